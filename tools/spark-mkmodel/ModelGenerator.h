//===- ModelGenerator.h - deterministic random-weight Spark checkpoints ---===//
//
// Writes config.json + safetensors for any Spark-X2.5 shape, streaming each
// tensor in bounded memory, so the full 1.7B shapes (3.4 GB in BF16) can be
// generated on a small machine. The same seed always gives the same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TOOLS_MODELGENERATOR_H
#define SPARK_TOOLS_MODELGENERATOR_H

#include "spark/Import/ModelConfig.h"
#include "spark/Import/Safetensors.h"

namespace spark {

struct GeneratorOptions {
  ModelConfig config;
  DType dtype = DType::BF16;
  uint64_t seed = 0;
  /// 1: model.safetensors; n > 1: n shards and model.safetensors.index.json.
  int shards = 1;
  /// Layout alternatives of spec section 2.
  bool splitQKV = false;
  bool fusedGateUp = false;
  /// Also write lm_head.weight when the head is tied (it is then ignored).
  bool writeTiedHead = false;
  /// Print one line per file written.
  bool verbose = false;
};

/// Named shapes: "tiny" (unit tests, a few tens of KB), "mini" (8 layers,
/// d=256, V=4096) and "1.7b" (the real Spark-X2.5-1.7B shapes).
llvm::Expected<ModelConfig> presetConfig(llvm::StringRef name);

/// Writes the checkpoint into `directory` (created if needed). Each file is
/// written under a temporary name and renamed when complete.
llvm::Error writeCheckpoint(const GeneratorOptions &options,
                            llvm::StringRef directory);

} // namespace spark

#endif // SPARK_TOOLS_MODELGENERATOR_H
