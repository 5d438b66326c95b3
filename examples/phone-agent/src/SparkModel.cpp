//===- SparkModel.cpp - a spark-compile build as the agent's model --------===//
#include "SparkModel.h"

#include <algorithm>
#include <cstring>

namespace agent {

SparkModel::~SparkModel() {
  spark_tool_grammar_destroy(grammar);
  spark_chat_template_close(chatTemplate);
  spark_tokenizer_close(tokenizer);
  spark_sampler_destroy(sampler);
  spark_session_destroy(session);
  spark_model_close(model);
}

namespace {

std::vector<int32_t> encode(const spark_tokenizer *t, const std::string &text) {
  size_t count = 0;
  spark_tokenizer_encode(t, text.data(), text.size(), 0, nullptr, 0, &count);
  std::vector<int32_t> ids(count);
  spark_tokenizer_encode(t, text.data(), text.size(), 0, ids.data(), ids.size(), &count);
  ids.resize(count);
  return ids;
}

} // namespace

bool SparkModel::open(const spark_model_def *definition, const std::string &pack,
                      const std::string &checkpoint, const std::string &toolsJson,
                      const SparkModelOptions &opts, std::string &error) {
  options = opts;
  tools = toolsJson;
  char message[1024] = "";
  spark_open_params params = spark_open_params_default();
  params.num_threads = options.threads;
  // The checksums are verified while the tokenizer, the template and the
  // grammar load and the first prompt runs; that step waits for the verdict.
  params.verify_checksums = SPARK_VERIFY_IN_BACKGROUND;
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  if (spark_model_open(definition, pack.c_str(), &params, &model) != SPARK_OK) {
    error = message;
    return false;
  }
  spark_model_info info;
  spark_model_get_info(model, &info);
  vocab = info.vocab_size;
  maxContext = info.max_context;
  spark_sampler_params sp = spark_sampler_params_default(); // greedy
  if (spark_session_create(model, nullptr, &session) != SPARK_OK ||
      spark_sampler_create(&sp, vocab, &sampler) != SPARK_OK) {
    error = "out of memory";
    return false;
  }
  if (spark_tokenizer_open(checkpoint.c_str(), &tokenizer, message, sizeof(message)) !=
          SPARK_TEXT_OK ||
      spark_chat_template_open(checkpoint.c_str(), nullptr, &chatTemplate, message,
                               sizeof(message)) != SPARK_TEXT_OK) {
    error = message;
    return false;
  }
  int32_t endIds[16];
  size_t count = 0;
  spark_tokenizer_end_tokens(tokenizer, checkpoint.c_str(), endIds, 16, &count);
  ends.assign(endIds, endIds + std::min<size_t>(count, 16));
  if (ends.empty()) {
    error = checkpoint + ": no end token (generation_config.json eos_token_id)";
    return false;
  }
  thinkClose = encode(tokenizer, "</think>");
  if (options.grammar &&
      spark_tool_grammar_create(tokenizer, tools.c_str(), ends.data(), ends.size(), 1,
                                size_t(options.thinkTokens) * 4, &grammar, message,
                                sizeof(message)) != SPARK_TEXT_OK) {
    error = message;
    return false;
  }
  return true;
}

bool SparkModel::isEnd(int32_t id) const {
  return std::find(ends.begin(), ends.end(), id) != ends.end();
}

bool SparkModel::feed(const std::vector<int32_t> &ids, std::string &error) {
  if (ids.empty())
    return true;
  if (spark_session_position(session) + int64_t(ids.size()) > maxContext) {
    error = "the conversation no longer fits the build's context (MAX_CONTEXT)";
    return false;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) {
      error = "the tokenizer's ids exceed the model's vocabulary";
      return false;
    }
  spark_status s = spark_session_eval(session, ids.data(), int32_t(ids.size()), 0, nullptr);
  if (s != SPARK_OK) {
    char message[1024] = "";
    error = s == SPARK_ERROR_BAD_PACK &&
                    spark_model_wait_verified(model, message, sizeof(message)) != SPARK_OK
                ? message
                : spark_status_string(s);
    return false;
  }
  history.insert(history.end(), ids.begin(), ids.end());
  evaluated += int64_t(ids.size());
  return true;
}

bool SparkModel::reply(const nlohmann::json &messages, std::string &text, std::string &error) {
  nlohmann::json variables = {{"messages", messages}, {"add_generation_prompt", true},
                              {"tools", nlohmann::json::parse(tools)}};
  char *rendered = nullptr;
  char message[1024] = "";
  if (spark_chat_template_render(chatTemplate, variables.dump().c_str(), &rendered, message,
                                 sizeof(message)) != SPARK_TEXT_OK) {
    error = message;
    return false;
  }
  std::vector<int32_t> ids = encode(tokenizer, rendered);
  spark_text_free(rendered);
  // Only what the session lacks: the common prefix stays in the caches.
  size_t same = 0;
  while (same < ids.size() && same < history.size() && ids[same] == history[same])
    ++same;
  if (same < history.size()) { // the template wrote earlier turns differently
    spark_session_reset(session);
    history.clear();
    same = 0;
  }
  if (!feed(std::vector<int32_t>(ids.begin() + long(same), ids.end()), error))
    return false;

  text.clear();
  if (grammar)
    spark_tool_grammar_reset(grammar);
  std::vector<float> masked(static_cast<size_t>(vocab));
  // Tokens inside <think>: -1 before it opens (or after it closed), then
  // counted; only the text since the last look is searched.
  int thinking = -1;
  size_t searched = 0;
  for (int i = 0; i < options.maxTokens; ++i) {
    const float *logits;
    if (spark_session_logits(session, &logits) != SPARK_OK) {
      error = "no logits";
      return false;
    }
    if (grammar) {
      std::memcpy(masked.data(), logits, sizeof(float) * size_t(vocab));
      size_t allowed = 0;
      spark_tool_grammar_mask(grammar, masked.data(), vocab, &allowed);
      logits = masked.data();
    }
    int32_t next;
    if (spark_sampler_sample(sampler, logits, &next) != SPARK_OK) {
      error = "the tool grammar allows no token";
      return false;
    }
    if (grammar)
      spark_tool_grammar_accept(grammar, next);
    if (isEnd(next))
      break; // not evaluated: the next prefill reads the turn's end
    size_t len = 0;
    spark_tokenizer_decode(tokenizer, &next, 1, 0, nullptr, 0, &len);
    std::string piece(len, '\0');
    spark_tokenizer_decode(tokenizer, &next, 1, 0, piece.data(), len, &len);
    text += piece;
    if (!feed({next}, error))
      return false;
    size_t from = searched > 8 ? searched - 8 : 0; // a tag split across pieces
    searched = text.size();
    if (thinking == -1 && text.find("<think>", from) != std::string::npos)
      thinking = 0;
    else if (thinking >= 0 && text.find("</think>", from) != std::string::npos)
      thinking = -2; // closed: never counted again
    if (thinking >= 0)
      ++thinking;
    // The thinking budget: close the block and let the model go on.
    if (!grammar && options.thinkTokens > 0 && thinking >= options.thinkTokens) {
      text += "</think>";
      if (!feed(thinkClose, error))
        return false;
      thinking = -2; // closed by the budget
    }
  }
  return true;
}

} // namespace agent
