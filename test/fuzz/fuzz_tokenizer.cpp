//===- fuzz_tokenizer.cpp - libFuzzer target: tokenizer.json --------------===//
// Any bytes as a tokenizer.json: either a clear TextError or a tokenizer that
// encodes and decodes without crashing.
#include "Tokenizer.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string json(reinterpret_cast<const char *>(data), size);
  try {
    auto t = spark::text::Tokenizer::fromJson(json, "fuzz.json");
    for (const char *text : {"Hello, world! 12345 \xE4\xBD\xA0\xE5\xA5\xBD <|user|> \n\n  x",
                             "\xFF\xFE invalid", ""}) {
      auto ids = t->encode(text, true);
      t->decode(ids, false);
      t->decode(ids, true);
    }
  } catch (const spark::text::TextError &) {
  }
  return 0;
}
