//===- Safetensors.h - mmap'd, fully validated safetensors files ----------===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping tensor names to {dtype, shape, data_offsets}, then the data.
// Opening maps the file read-only and validates the whole header; tensor data
// is never copied.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_IMPORT_SAFETENSORS_H
#define SPARK_IMPORT_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spark {

/// Element types of stored tensors. The values match spark_dtype of the
/// runtime's model_abi.h. Checkpoints hold F32/F16/BF16; I8 is for int8
/// codes in a weight pack, U8 for bytes of two packed 4-bit codes.
enum class DType { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, U8 = 4 };

llvm::StringRef dtypeName(DType dtype); // "F32", "F16", "BF16", "I8"
size_t dtypeSize(DType dtype);

/// Stores `value` as one element of `dtype` at `out` (round to nearest even).
void encodeElement(float value, DType dtype, uint8_t *out);

/// One tensor inside a mapped safetensors file.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Start of the data in the mapping; not necessarily aligned.
  const uint8_t *data = nullptr;
  uint64_t bytes = 0;
  /// Offset of the data from the start of the file.
  uint64_t fileOffset = 0;
  /// The file that holds it.
  std::string path;

  int64_t numElements() const;
  /// Element i widened to float.
  float element(int64_t i) const;
  /// Elements [first, first + count) widened to float, into out.
  void elements(int64_t first, int64_t count, float *out) const;
};

/// Drops the pages holding elements [first, first + count) of `tensor` from
/// this process's resident set (they stay in the page cache). For streaming
/// over a multi-GB checkpoint in bounded RSS; reading them again is valid.
void releaseResidentPages(const TensorView &tensor, int64_t first,
                          int64_t count);

class SafetensorsFile {
public:
  /// Maps `path` and validates its header: length inside the file, JSON,
  /// dtypes, shape x dtype size = byte range, ranges inside the data section
  /// and not overlapping.
  static llvm::Expected<std::unique_ptr<SafetensorsFile>>
  open(llvm::StringRef path);

  llvm::StringRef path() const { return filePath; }
  llvm::ArrayRef<TensorView> tensors() const { return tensorViews; }

  /// Checks every element of `tensor` (which must belong to this file) is
  /// finite. Scanned pages are released from this process's resident set
  /// as it goes, so checking a multi-GB file keeps RSS small.
  llvm::Error checkFinite(const TensorView &tensor) const;

private:
  SafetensorsFile() = default;
  std::string filePath;
  llvm::sys::fs::mapped_file_region region;
  std::vector<TensorView> tensorViews;
};

} // namespace spark

#endif // SPARK_IMPORT_SAFETENSORS_H
