//===- text_api.cpp - the C interface of the text layer -------------------===//
#include "spark/text.h"

#include "ChatTemplate.h"
#include "Tokenizer.h"
#include "ToolCalls.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>

#include <cstring>
#include <fstream>
#include <sstream>
#include <new>

using namespace spark::text;

struct spark_tokenizer {
  std::unique_ptr<Tokenizer> impl;
};

struct spark_decode_stream {
  DecodeStream stream;
  std::string text;
  spark_decode_stream(const Tokenizer &t, bool skip) : stream(t, skip) {}
};

struct spark_chat_template {
  std::unique_ptr<ChatTemplate> impl;
  ChatConfig config;
};

struct spark_tool_parser {
  ToolCallParser impl;
  std::deque<ToolEvent> pending;
  ToolEvent current;
  std::string arguments;
  explicit spark_tool_parser(size_t budget) : impl(budget) {}
};

struct spark_tool_grammar {
  std::unique_ptr<ToolGrammar> impl;
};

namespace {
void setError(char *error, size_t bytes, const char *message) {
  if (!error || !bytes)
    return;
  std::strncpy(error, message, bytes - 1);
  error[bytes - 1] = '\0';
}
/// Runs `body`, which returns a status, and turns what it throws into one:
/// std::bad_alloc is SPARK_TEXT_ERROR_OUT_OF_MEMORY, any other exception
/// `failure`, with its message in `error`. Nothing crosses the C interface.
template <typename Body>
spark_text_status guarded(spark_text_status failure, char *error, size_t errorBytes,
                          Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    setError(error, errorBytes, "out of memory");
    return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setError(error, errorBytes, e.what());
    return failure;
  }
}
} // namespace

extern "C" {

const char *spark_text_status_string(spark_text_status status) {
  switch (status) {
  case SPARK_TEXT_OK:
    return "ok";
  case SPARK_TEXT_ERROR_INVALID_ARGUMENT:
    return "invalid argument";
  case SPARK_TEXT_ERROR_FILE:
    return "a file is missing, unreadable or malformed";
  case SPARK_TEXT_ERROR_TOO_SMALL:
    return "the output buffer is too small";
  case SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE:
    return "token id outside the vocabulary";
  case SPARK_TEXT_ERROR_OUT_OF_MEMORY:
    return "out of memory";
  }
  return "unknown status";
}

spark_text_status spark_tokenizer_open(const char *path, spark_tokenizer **out,
                                       char *error, size_t error_bytes) {
  if (!path || !out)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(SPARK_TEXT_ERROR_FILE, error, error_bytes, [&] {
    auto t = Tokenizer::load(path);
    *out = new spark_tokenizer{std::move(t)};
    return SPARK_TEXT_OK;
  });
}

void spark_tokenizer_close(spark_tokenizer *t) { delete t; }

spark_text_status spark_tokenizer_encode(const spark_tokenizer *t,
                                         const char *text, size_t len,
                                         int add_special, int32_t *ids,
                                         size_t capacity, size_t *out_count) {
  if (!t || (!text && len) || !out_count || (!ids && capacity))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  // Throws for a character without a token in a vocabulary without unk.
  return guarded(SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE, nullptr, 0, [&] {
    auto v = t->impl->encode(std::string_view(text ? text : "", len), add_special);
    *out_count = v.size();
    if (v.size() > capacity)
      return SPARK_TEXT_ERROR_TOO_SMALL;
    std::copy(v.begin(), v.end(), ids);
    return SPARK_TEXT_OK;
  });
}

spark_text_status spark_tokenizer_decode(const spark_tokenizer *t,
                                         const int32_t *ids, size_t n,
                                         int skip_special, char *text,
                                         size_t capacity, size_t *out_len) {
  if (!t || (!ids && n) || !out_len || (!text && capacity))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  return guarded(SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE, nullptr, 0, [&] {
    std::string s = t->impl->decode(std::vector<int32_t>(ids, ids + n), skip_special);
    *out_len = s.size();
    if (s.size() > capacity)
      return SPARK_TEXT_ERROR_TOO_SMALL;
    std::memcpy(text, s.data(), s.size());
    return SPARK_TEXT_OK;
  });
}

int32_t spark_tokenizer_vocab_size(const spark_tokenizer *t) {
  return t ? t->impl->vocabSize() : 0;
}

int32_t spark_tokenizer_token_id(const spark_tokenizer *t, const char *content) {
  if (!t || !content)
    return -1;
  auto id = t->impl->tokenId(content);
  return id ? *id : -1;
}

int spark_tokenizer_is_special(const spark_tokenizer *t, int32_t id) {
  return t && t->impl->isSpecial(id);
}

spark_text_status spark_decode_stream_create(const spark_tokenizer *t,
                                             int skip_special,
                                             spark_decode_stream **out) {
  if (!t || !out)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out = new (std::nothrow) spark_decode_stream(*t->impl, skip_special);
  return *out ? SPARK_TEXT_OK : SPARK_TEXT_ERROR_OUT_OF_MEMORY;
}

void spark_decode_stream_destroy(spark_decode_stream *s) { delete s; }

spark_text_status spark_decode_stream_push(spark_decode_stream *s, int32_t id,
                                           const char **out_text) {
  if (!s || !out_text)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  s->text.clear();
  *out_text = "";
  spark_text_status status = guarded(SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE, nullptr, 0, [&] {
    s->stream.push(id, s->text);
    return SPARK_TEXT_OK;
  });
  if (status == SPARK_TEXT_OK)
    *out_text = s->text.c_str();
  return status;
}

spark_text_status spark_decode_stream_flush(spark_decode_stream *s,
                                            const char **out_text) {
  if (!s || !out_text)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  s->text.clear();
  s->stream.flush(s->text);
  *out_text = s->text.c_str();
  return SPARK_TEXT_OK;
}

void spark_text_free(char *text) { std::free(text); }

spark_text_status spark_tokenizer_end_tokens(const spark_tokenizer *t, const char *dir,
                                             int32_t *ids, size_t capacity,
                                             size_t *out_count) {
  if (!t || !dir || !out_count || (!ids && capacity))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  std::vector<int32_t> found;
  auto read = [](const std::string &path, nlohmann::json &j) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return false;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception &) {
      return false;
    }
    return j.is_object();
  };
  std::string base = std::string(dir) + "/";
  nlohmann::json j;
  if (read(base + "generation_config.json", j) && j.contains("eos_token_id")) {
    const auto &e = j["eos_token_id"];
    if (e.is_number_integer())
      found.push_back(e.get<int32_t>());
    else if (e.is_array())
      for (auto &x : e)
        if (x.is_number_integer())
          found.push_back(x.get<int32_t>());
  }
  if (found.empty() && read(base + "tokenizer_config.json", j) && j.contains("eos_token")) {
    const auto &e = j["eos_token"];
    std::string content = e.is_string() ? e.get<std::string>()
                          : e.is_object() && e.contains("content") && e["content"].is_string()
                              ? e["content"].get<std::string>()
                              : "";
    if (auto id = t->impl->tokenId(content))
      found.push_back(*id);
  }
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](int32_t id) { return id < 0 || id >= t->impl->vocabSize(); }),
              found.end());
  *out_count = found.size();
  std::copy_n(found.begin(), std::min(capacity, found.size()), ids);
  return found.size() > capacity ? SPARK_TEXT_ERROR_TOO_SMALL : SPARK_TEXT_OK;
}

spark_text_status spark_chat_template_open(const char *dir, const char *template_file,
                                           spark_chat_template **out, char *error,
                                           size_t error_bytes) {
  if (!dir || !out)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(SPARK_TEXT_ERROR_FILE, error, error_bytes, [&] {
    auto t = std::make_unique<spark_chat_template>();
    if (template_file) {
      std::ifstream in(template_file, std::ios::binary);
      if (!in)
        throw TextError(std::string(template_file) + ": cannot open");
      std::ostringstream ss;
      ss << in.rdbuf();
      t->config.source = ss.str();
      t->config.origin = template_file;
      try {
        ChatConfig folder = loadChatConfig(dir);
        t->config.bosToken = folder.bosToken;
        t->config.eosToken = folder.eosToken;
      } catch (const TextError &) {
      }
    } else {
      t->config = loadChatConfig(dir);
    }
    t->impl = ChatTemplate::parse(t->config.source, t->config.origin);
    *out = t.release();
    return SPARK_TEXT_OK;
  });
}

void spark_chat_template_close(spark_chat_template *t) { delete t; }

spark_text_status spark_chat_template_render(const spark_chat_template *t,
                                             const char *variables_json, char **out_text,
                                             char *error, size_t error_bytes) {
  if (!t || !variables_json || !out_text)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out_text = nullptr;
  return guarded(SPARK_TEXT_ERROR_INVALID_ARGUMENT, error, error_bytes, [&] {
    std::string text = t->impl->render(
        withSpecialTokens(variables_json, "the template variables", t->config));
    char *copy = static_cast<char *>(std::malloc(text.size() + 1));
    if (!copy)
      return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
    std::memcpy(copy, text.c_str(), text.size() + 1);
    *out_text = copy;
    return SPARK_TEXT_OK;
  });
}

spark_text_status spark_tool_parser_create(size_t think_budget, spark_tool_parser **out) {
  if (!out)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out = new (std::nothrow) spark_tool_parser(think_budget);
  return *out ? SPARK_TEXT_OK : SPARK_TEXT_ERROR_OUT_OF_MEMORY;
}

void spark_tool_parser_destroy(spark_tool_parser *p) { delete p; }

spark_text_status spark_tool_parser_feed(spark_tool_parser *p, const char *text, size_t len) {
  if (!p || (!text && len))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  return guarded(SPARK_TEXT_ERROR_INVALID_ARGUMENT, nullptr, 0, [&] {
    std::vector<ToolEvent> events;
    p->impl.feed(std::string_view(text ? text : "", len), events);
    for (auto &e : events)
      p->pending.push_back(std::move(e));
    return SPARK_TEXT_OK;
  });
}

spark_text_status spark_tool_parser_finish(spark_tool_parser *p) {
  if (!p)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  return guarded(SPARK_TEXT_ERROR_INVALID_ARGUMENT, nullptr, 0, [&] {
    std::vector<ToolEvent> events;
    p->impl.finish(events);
    for (auto &e : events)
      p->pending.push_back(std::move(e));
    return SPARK_TEXT_OK;
  });
}

int spark_tool_parser_next(spark_tool_parser *p, spark_tool_event *out) {
  if (!p || !out || p->pending.empty())
    return 0;
  p->current = std::move(p->pending.front());
  p->pending.pop_front();
  out->kind = static_cast<spark_tool_event_kind>(p->current.kind);
  out->text = p->current.text.c_str();
  out->name = p->current.call.name.c_str();
  p->arguments = p->current.kind == ToolEvent::Call ? p->current.call.argumentsJson() : "";
  out->arguments_json = p->arguments.c_str();
  return 1;
}

spark_text_status spark_tool_grammar_create(const spark_tokenizer *tokenizer,
                                            const char *tools_json, const int32_t *end_tokens,
                                            size_t num_end_tokens, int allow_thinking,
                                            size_t think_budget, spark_tool_grammar **out,
                                            char *error, size_t error_bytes) {
  if (!tokenizer || !tools_json || !out || (!end_tokens && num_end_tokens))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  *out = nullptr;
  return guarded(SPARK_TEXT_ERROR_INVALID_ARGUMENT, error, error_bytes, [&] {
    auto tools = parseToolSpecs(tools_json, "tools");
    auto g = std::make_unique<spark_tool_grammar>();
    g->impl = std::make_unique<ToolGrammar>(
        *tokenizer->impl, std::move(tools),
        std::vector<int32_t>(end_tokens, end_tokens + num_end_tokens), allow_thinking != 0,
        think_budget);
    *out = g.release();
    return SPARK_TEXT_OK;
  });
}

void spark_tool_grammar_destroy(spark_tool_grammar *g) { delete g; }

spark_text_status spark_tool_grammar_mask(const spark_tool_grammar *g, float *logits,
                                          int32_t vocab_size, size_t *out_allowed) {
  if (!g || !logits || vocab_size <= 0)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  size_t n = g->impl->mask(logits, vocab_size);
  if (out_allowed)
    *out_allowed = n;
  return SPARK_TEXT_OK;
}

spark_text_status spark_tool_grammar_accept(spark_tool_grammar *g, int32_t token) {
  if (!g)
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  return g->impl->accept(token) ? SPARK_TEXT_OK : SPARK_TEXT_ERROR_INVALID_ARGUMENT;
}

int spark_tool_grammar_done(const spark_tool_grammar *g) { return g && g->impl->done(); }

void spark_tool_grammar_reset(spark_tool_grammar *g) {
  if (g)
    g->impl->reset();
}

} // extern "C"
