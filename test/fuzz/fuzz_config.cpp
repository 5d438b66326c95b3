//===- fuzz_config.cpp - libFuzzer target: config.json --------------------===//
// Any bytes as a checkpoint's config.json: an error naming the field, or a
// config whose sizes are in range (no allocation without bound).
#include "spark/Import/ModelConfig.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<spark::ModelConfig> config = spark::ModelConfig::parse(text, "config.json");
  if (!config) {
    llvm::consumeError(config.takeError());
    return 0;
  }
  if (config->numLayers > 1024 || config->headDim > 4096 || config->hiddenSize > 65536)
    std::abort(); // the ranges the parser promises
  return 0;
}
