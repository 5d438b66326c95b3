//===- fuzz_safetensors.cpp - libFuzzer target: safetensors files ---------===//
// Any bytes as a .safetensors file (written to a temporary file, since the
// reader maps files): an error naming the file, or tensors inside it.
#include "spark/Import/Safetensors.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::string path = [] {
    char name[] = "/tmp/spark-fuzz-XXXXXX";
    int fd = mkstemp(name);
    close(fd);
    return std::string(name) + "";
  }();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto file = spark::SafetensorsFile::open(path);
  if (!file)
    llvm::consumeError(file.takeError());
  return 0;
}
