//===- text_api.cpp - the C interface of the text layer -------------------===//
#include "spark/text.h"

#include "Tokenizer.h"

#include <cstring>
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

namespace {
void setError(char *error, size_t bytes, const char *message) {
  if (!error || !bytes)
    return;
  std::strncpy(error, message, bytes - 1);
  error[bytes - 1] = '\0';
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
  try {
    auto t = Tokenizer::load(path);
    *out = new spark_tokenizer{std::move(t)};
    return SPARK_TEXT_OK;
  } catch (const TextError &e) {
    setError(error, error_bytes, e.what());
    return SPARK_TEXT_ERROR_FILE;
  } catch (const std::bad_alloc &) {
    setError(error, error_bytes, "out of memory");
    return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setError(error, error_bytes, e.what());
    return SPARK_TEXT_ERROR_FILE;
  }
}

void spark_tokenizer_close(spark_tokenizer *t) { delete t; }

spark_text_status spark_tokenizer_encode(const spark_tokenizer *t,
                                         const char *text, size_t len,
                                         int add_special, int32_t *ids,
                                         size_t capacity, size_t *out_count) {
  if (!t || (!text && len) || !out_count || (!ids && capacity))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  try {
    auto v = t->impl->encode(std::string_view(text ? text : "", len), add_special);
    *out_count = v.size();
    if (v.size() > capacity)
      return SPARK_TEXT_ERROR_TOO_SMALL;
    std::copy(v.begin(), v.end(), ids);
    return SPARK_TEXT_OK;
  } catch (const std::bad_alloc &) {
    return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &) {
    // A character without a token in a vocabulary without unk.
    return SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE;
  }
}

spark_text_status spark_tokenizer_decode(const spark_tokenizer *t,
                                         const int32_t *ids, size_t n,
                                         int skip_special, char *text,
                                         size_t capacity, size_t *out_len) {
  if (!t || (!ids && n) || !out_len || (!text && capacity))
    return SPARK_TEXT_ERROR_INVALID_ARGUMENT;
  try {
    std::string s = t->impl->decode(std::vector<int32_t>(ids, ids + n), skip_special);
    *out_len = s.size();
    if (s.size() > capacity)
      return SPARK_TEXT_ERROR_TOO_SMALL;
    std::memcpy(text, s.data(), s.size());
    return SPARK_TEXT_OK;
  } catch (const std::bad_alloc &) {
    return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &) {
    return SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE;
  }
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
  try {
    s->stream.push(id, s->text);
  } catch (const std::bad_alloc &) {
    return SPARK_TEXT_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &) {
    *out_text = "";
    return SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE;
  }
  *out_text = s->text.c_str();
  return SPARK_TEXT_OK;
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

} // extern "C"
