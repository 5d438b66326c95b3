//===- ToolCalls.h - Spark tool calls: streaming parser and grammar -------===//
//
// Spark answers with
//   <think>...</think><tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>
// ToolCallParser reads that from a stream of text pieces (as a decode
// stream yields them) and reports visible text, thinking and calls; it also
// recovers what small models were seen to emit instead, and reports every
// recovery. ToolGrammar masks logits so that a model can only write a
// well-formed call to one of the given tools.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TEXT_TOOLCALLS_H
#define SPARK_TEXT_TOOLCALLS_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spark::text {

class Tokenizer;

struct ToolCall {
  std::string name;
  /// Keys and values in the order written; values as text (JSON values
  /// that were not strings keep their JSON spelling, e.g. 3, true).
  std::vector<std::pair<std::string, std::string>> arguments;
  /// The arguments as a JSON object; values are typed by `types` when
  /// given (key -> "integer" | "number" | "boolean" | "string"), otherwise
  /// numbers and booleans are recognised by their spelling.
  std::string argumentsJson() const;
};

struct ToolEvent {
  enum Kind {
    Content,  // visible text
    Thinking, // text inside <think>...</think>
    Call,     // a complete tool call
    Recovery, // what was repaired and how (text), always before its Call
  } kind;
  std::string text;
  ToolCall call;
};

class ToolCallParser {
public:
  /// thinkBudget: bytes of thinking after which the block is treated as
  /// closed (0: no limit).
  explicit ToolCallParser(size_t thinkBudget = 0);
  /// Feeds the next piece of generated text; complete events are appended.
  void feed(std::string_view text, std::vector<ToolEvent> &events);
  /// The end of generation: whatever is open is resolved (with a Recovery
  /// event) or returned as content.
  void finish(std::vector<ToolEvent> &events);
  /// True while inside a <think> block.
  bool thinking() const { return state == State::Think; }

private:
  enum class State { Content, Think, Call, Json };
  State state = State::Content;
  std::string buffer;   // held back: a possible tag start, a call, JSON
  std::string bracket;  // a "[name]" line waiting for its JSON
  size_t thinkBudget, thinkBytes = 0;
  int depth = 0;
  size_t jsonScanned = 0;
  bool inString = false, escaped = false;
  void emit(std::vector<ToolEvent> &events, ToolEvent::Kind kind, std::string text);
  void endJson(std::vector<ToolEvent> &events, bool atEnd);
  void endCall(std::vector<ToolEvent> &events, bool closed);
};

/// A tool's argument as the grammar sees it.
struct ToolParam {
  std::string name;
  enum Type { String, Integer, Number, Boolean } type = String;
  std::vector<std::string> enumValues; // non-empty: one of these exactly
  bool required = false;
};
struct ToolSpec {
  std::string name;
  std::string description;
  std::vector<ToolParam> params;
};

/// Reads tools in the chat-template format (OpenAI function objects, or
/// {name, parameters}); `name` names the source in errors.
std::vector<ToolSpec> parseToolSpecs(std::string_view json, const std::string &name);
/// The same tools as the JSON list a chat template takes.
std::string toolSpecsJson(std::string_view json, const std::string &name);

class ToolGrammarImpl;

/// Constrained decoding for Spark's tool-call format. The grammar accepts
///   [<think> text </think> whitespace] <tool_call> NAME (<arg_key> KEY
///   </arg_key><arg_value> VALUE </arg_value>)* </tool_call> EOS
/// where NAME is a tool, KEYs are its parameters (each once, the required
/// ones all), VALUEs match the parameter's type or enum (string values
/// cannot contain '<' and hold at most maxValueBytes), and EOS is one of the
/// given end tokens. Thinking, when allowed, is closed after thinkBudget
/// bytes (0: no limit).
class ToolGrammar {
public:
  ToolGrammar(const Tokenizer &tokenizer, std::vector<ToolSpec> tools,
              std::vector<int32_t> endTokens, bool allowThinking,
              size_t thinkBudget = 0, size_t maxValueBytes = 256);
  ~ToolGrammar();
  /// Sets logits of every token the grammar forbids next to -infinity.
  /// Returns the number of tokens left allowed (0: nothing can follow).
  size_t mask(float *logits, int32_t vocabSize) const;
  /// Whether `token` may come next.
  bool allows(int32_t token) const;
  /// Advances over a sampled token; false (and no change) if forbidden.
  bool accept(int32_t token);
  /// True once the call is complete and an end token was accepted.
  bool done() const;
  /// Back to the start.
  void reset();

private:
  std::unique_ptr<ToolGrammarImpl> impl;
};

} // namespace spark::text

#endif // SPARK_TEXT_TOOLCALLS_H
