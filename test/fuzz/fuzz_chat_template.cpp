//===- fuzz_chat_template.cpp - libFuzzer target: Jinja chat templates ----===//
// Any bytes as a template, rendered with a conversation with tools: either a
// clear TextError (syntax, raise_exception, unsupported filter) or text.
#include "ChatTemplate.h"
#include "Tokenizer.h"

#include <cstdint>
#include <string>

static const char *kVariables = R"({"messages": [
  {"role": "system", "content": "You are Spark."},
  {"role": "user", "content": "Turn on Wi-Fi"},
  {"role": "assistant", "content": "<think>x</think>", "tool_calls": [
    {"type": "function", "function": {"name": "tap", "arguments": {"index": 3}}}]},
  {"role": "tool", "content": "[0] Network"}],
 "tools": [{"type": "function", "function": {"name": "tap", "parameters":
   {"type": "object", "properties": {"index": {"type": "integer"}}}}}],
 "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string source(reinterpret_cast<const char *>(data), size);
  try {
    auto t = spark::text::ChatTemplate::parse(source, "fuzz.jinja");
    t->render(kVariables);
  } catch (const spark::text::TextError &) {
  }
  return 0;
}
