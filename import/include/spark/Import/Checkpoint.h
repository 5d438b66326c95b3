//===- Checkpoint.h - a Spark-X2.5 checkpoint directory, validated --------===//
//
// Opens config.json and model.safetensors (or the shards listed in
// model.safetensors.index.json), maps the tensor data without copying it and
// resolves every tensor the spec (section 2) requires, accepting the layout
// alternatives converters write. Every error names the file and the tensor
// or field at fault.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_IMPORT_CHECKPOINT_H
#define SPARK_IMPORT_CHECKPOINT_H

#include "spark/Import/ModelConfig.h"
#include "spark/Import/Safetensors.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace spark {

/// The tensors of one decoder layer. Exactly one of `qkv` and (q, k, v) is
/// set, and exactly one of `gateUp` and (gate, up); `attnGate` is set iff the
/// head-wise gate is on.
struct LayerTensors {
  const TensorView *inputNorm = nullptr;
  const TensorView *qkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr;
  const TensorView *attnGate = nullptr;
  const TensorView *out = nullptr;
  const TensorView *postNorm = nullptr;
  const TensorView *gateUp = nullptr, *gate = nullptr, *up = nullptr;
  const TensorView *down = nullptr;
};

/// A 4-bit grid the checkpoint brings for one of its matrices M, chosen by
/// a tool outside the compiler (docs/checkpoints.md): M.int4_codes (U8, M's
/// shape, codes 0..15), M.int4_scales (F16 [rows, cols / group]) and
/// optionally M.int4_zeros (F16, the scales' shape; absent: every zero point
/// is 8). Each value of M is (code - zero) * scale. Or a 6-bit grid, the
/// same with int6_ in the names and codes 0..63 (`bits` says which).
struct Int4Grid {
  const TensorView *codes = nullptr, *scales = nullptr, *zeros = nullptr;
  int64_t group = 0;
  int bits = 4;
};

struct CheckpointOptions {
  /// Scan every weight for NaN/Inf (streams the whole checkpoint once).
  bool checkFinite = true;
};

class Checkpoint {
public:
  static llvm::Expected<std::unique_ptr<Checkpoint>>
  open(llvm::StringRef directory, const CheckpointOptions &options = {});

  const ModelConfig &config() const { return modelConfig; }
  llvm::StringRef directory() const { return dir; }

  const TensorView &embedding() const { return *embeddingTensor; }
  const TensorView &finalNorm() const { return *finalNormTensor; }
  /// The output head: the embedding when tied, else lm_head.weight.
  const TensorView &outputHead() const { return *headTensor; }
  llvm::ArrayRef<LayerTensors> layers() const { return layerTensors; }
  /// The checkpoint's tensor of this name, or null.
  const TensorView *tensor(llvm::StringRef name) const {
    return byName.lookup(name);
  }

  /// The 4- or 6-bit grid the checkpoint brings for matrix `name`, or null.
  const Int4Grid *int4Grid(llvm::StringRef name) const {
    auto it = grids.find(name);
    return it == grids.end() ? nullptr : &it->second;
  }

  /// The tensor's file, relative to the checkpoint directory.
  std::string relativeFile(const TensorView &tensor) const;

private:
  Checkpoint() = default;
  llvm::Error loadFiles();
  llvm::Error resolveTensors();
  /// Claims and checks the 4-bit grid tensors of `matrix`, if it has any.
  llvm::Error takeGrid(const std::string &matrix, llvm::StringSet<> &claimed);
  llvm::Error checkFiniteWeights();

  std::string dir;
  ModelConfig modelConfig;
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  llvm::StringMap<const TensorView *> byName;
  llvm::StringMap<Int4Grid> grids;
  const TensorView *embeddingTensor = nullptr, *finalNormTensor = nullptr,
                   *headTensor = nullptr;
  std::vector<LayerTensors> layerTensors;
};

} // namespace spark

#endif // SPARK_IMPORT_CHECKPOINT_H
