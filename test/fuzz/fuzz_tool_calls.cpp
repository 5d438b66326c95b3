//===- fuzz_tool_calls.cpp - libFuzzer target: the tool-call parser -------===//
// Any model output, fed in pieces whose sizes come from the first byte; the
// parser must not crash, and its events must account for every call.
#include "ToolCalls.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  size_t step = 1 + data[0] % 16, budget = data[0] & 0x80 ? 32 : 0;
  std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
  spark::text::ToolCallParser parser(budget);
  std::vector<spark::text::ToolEvent> events;
  for (size_t i = 0; i < text.size(); i += step)
    parser.feed(text.substr(i, step), events);
  parser.finish(events);
  for (auto &e : events)
    if (e.kind == spark::text::ToolEvent::Call)
      e.call.argumentsJson();
  return 0;
}
