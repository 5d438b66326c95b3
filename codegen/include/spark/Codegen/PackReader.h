//===- PackReader.h - a weight pack written earlier, read back --*- C++ -*-===//
//
// A model.spkw mapped read-only and validated (header, table, every entry in
// bounds), so that a build can take another build's stored tensors instead of
// quantizing them again: --target=s25 quantizes the weights once, for its
// arm64 part, and its hexagon part (the same options, the same stored bytes)
// copies them (spark-compile --weights-from).
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_PACKREADER_H
#define SPARK_CODEGEN_PACKREADER_H

#include "spark/Import/Checkpoint.h"
#include "spark/pack_format.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spark {

class PackReader {
public:
  /// Maps `path` and checks it is a weight pack of this format version whose
  /// table and entries lie inside the file; the error names the file and
  /// what is wrong.
  static llvm::Expected<std::shared_ptr<PackReader>> open(llvm::StringRef path);

  /// One stored tensor: its bytes in the file and their recorded checksum.
  struct Stored {
    llvm::ArrayRef<uint8_t> bytes;
    uint64_t checksum = 0;
  };
  /// Entry `name` if it is stored with this dtype, layout (spark_layout) and
  /// shape.
  std::optional<Stored> find(llvm::StringRef name, DType dtype, int layout,
                             llvm::ArrayRef<int64_t> shape) const;

  const std::string &path() const { return filePath; }
  uint64_t configHash() const { return config; }
  /// The target the pack was built for (its header's).
  const std::string &target() const { return builtFor; }

private:
  std::string filePath, builtFor;
  uint64_t config = 0;
  std::unique_ptr<llvm::sys::fs::mapped_file_region> file;
  llvm::StringMap<size_t> entries; // name -> table index
  std::vector<spark_pack_entry> table;
};

} // namespace spark

#endif // SPARK_CODEGEN_PACKREADER_H
