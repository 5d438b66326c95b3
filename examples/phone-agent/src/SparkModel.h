//===- SparkModel.h - a spark-compile build as the agent's model ----------===//
//
// The model library linked into the program (its spark_model_def), its
// weight pack, and the checkpoint's tokenizer, chat template and end tokens.
// Each reply renders the whole conversation and evaluates only the tokens
// the session has not seen (the previous turns stay in the caches), then
// decodes greedily until an end token, with a thinking budget: when <think>
// is still open after that many tokens, "</think>" is fed to the model and
// it goes on from there. With `grammar`, every reply is a well-formed call.
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_SPARKMODEL_H
#define PHONE_AGENT_SPARKMODEL_H

#include "Agent.h"

#include "spark/runtime.h"
#include "spark/text.h"

#include <string>
#include <vector>

namespace agent {

struct SparkModelOptions {
  bool grammar = false;   // constrain replies to one tool call
  int thinkTokens = 96;   // thinking budget (0: none)
  int maxTokens = 256;    // per reply
  int threads = 0;        // kernel threads (0: one per core)
};

class SparkModel : public Model {
public:
  ~SparkModel() override;
  /// Opens the build; false (and `error`) on failure.
  bool open(const spark_model_def *definition, const std::string &pack,
            const std::string &checkpoint, const std::string &toolsJson,
            const SparkModelOptions &options, std::string &error);
  bool reply(const nlohmann::json &messages, std::string &text, std::string &error) override;
  /// Tokens evaluated so far (prefill and decode), for the report.
  long long tokensEvaluated() const { return evaluated; }

private:
  bool feed(const std::vector<int32_t> &ids, std::string &error);
  bool isEnd(int32_t id) const;

  SparkModelOptions options;
  std::string tools;
  spark_model *model = nullptr;
  spark_session *session = nullptr;
  spark_sampler *sampler = nullptr;
  spark_tokenizer *tokenizer = nullptr;
  spark_chat_template *chatTemplate = nullptr;
  spark_tool_grammar *grammar = nullptr;
  std::vector<int32_t> ends;
  std::vector<int32_t> history; // the ids in the session, in order
  std::vector<int32_t> thinkClose;
  int32_t vocab = 0, maxContext = 0;
  long long evaluated = 0;
};

} // namespace agent

#endif
