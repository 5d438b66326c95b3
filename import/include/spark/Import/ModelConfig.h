//===- ModelConfig.h - the Spark-X2.5 config.json, parsed and checked -----===//
#ifndef SPARK_IMPORT_MODELCONFIG_H
#define SPARK_IMPORT_MODELCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spark {

enum class LayerType { Sliding, Full };

/// The name config.json uses for a layer type.
llvm::StringRef layerTypeName(LayerType type);

struct RopeParameters {
  double theta = 10000.0;
  double partialRotaryFactor = 1.0;
};

/// Every field of spec section 1 that the model function depends on.
struct ModelConfig {
  int64_t hiddenSize = 0;
  int64_t intermediateSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKVHeads = 0;
  int64_t headDim = 0;
  int64_t slidingWindow = 0;
  int64_t vocabSize = 0;
  int64_t maxPositionEmbeddings = 0;
  double rmsNormEps = 1e-6;
  bool tieWordEmbeddings = true;
  bool headwiseGate = true;
  std::vector<LayerType> layerTypes;
  RopeParameters slidingRope, fullRope;

  const RopeParameters &rope(LayerType type) const {
    return type == LayerType::Sliding ? slidingRope : fullRope;
  }
  /// Dims of each head that RoPE rotates for this layer type.
  int64_t rotaryDim(LayerType type) const;

  /// Parses and checks config.json text; `path` names the file in errors.
  static llvm::Expected<ModelConfig> parse(llvm::StringRef text,
                                           llvm::StringRef path);
  /// Reads and parses a config.json file.
  static llvm::Expected<ModelConfig> load(llvm::StringRef path);

  /// The config.json form of this config (what parse accepts).
  llvm::json::Object toJSON() const;
};

/// The default layer pattern of the spec: every fourth layer is full.
std::vector<LayerType> defaultLayerTypes(int64_t numLayers);

} // namespace spark

#endif // SPARK_IMPORT_MODELCONFIG_H
