/* text.h - the spark text layer: Hugging Face tokenizers, streaming decode.
 *
 *   #include "spark/text.h"
 *   spark_tokenizer *tok;
 *   char err[512];
 *   if (spark_tokenizer_open("ckpt/", &tok, err, sizeof err) != SPARK_TEXT_OK)
 *     fprintf(stderr, "%s\n", err);
 *   int32_t ids[256]; size_t n;
 *   spark_tokenizer_encode(tok, "Hello", 5, 0, ids, 256, &n);
 *
 * Link with spark_text (C++17 inside, a C interface outside: PCRE2 and ICU
 * are its dependencies). Conventions as in runtime.h: opaque handles with
 * create/destroy pairs, every function returns a status, out-parameters
 * last. A tokenizer is immutable after open and may be shared by threads; a
 * decode stream belongs to one thread. */
#ifndef SPARK_TEXT_H
#define SPARK_TEXT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spark_text_status {
  SPARK_TEXT_OK = 0,
  SPARK_TEXT_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle or pointer */
  SPARK_TEXT_ERROR_FILE = 2,      /* a file is missing, unreadable or malformed */
  SPARK_TEXT_ERROR_TOO_SMALL = 3, /* the output buffer is too small: the
                                     count it needs is in the out-parameter */
  SPARK_TEXT_ERROR_TOKEN_OUT_OF_RANGE = 4,
  SPARK_TEXT_ERROR_OUT_OF_MEMORY = 5,
} spark_text_status;

const char *spark_text_status_string(spark_text_status status);

typedef struct spark_tokenizer spark_tokenizer;

/* path: a tokenizer.json file, or a folder that holds one (a checkpoint).
 * On failure, error (when non-NULL) receives a message naming the file and
 * the field at fault. */
spark_text_status spark_tokenizer_open(const char *path,
                                       spark_tokenizer **out_tokenizer,
                                       char *error, size_t error_bytes);
void spark_tokenizer_close(spark_tokenizer *tokenizer);

/* Encodes len bytes of UTF-8 (invalid sequences count as U+FFFD). With
 * add_special the file's post-processor adds its tokens (BOS...). Writes at
 * most capacity ids; *out_count is the number the text needs. */
spark_text_status spark_tokenizer_encode(const spark_tokenizer *tokenizer,
                                         const char *text, size_t len,
                                         int add_special, int32_t *ids,
                                         size_t capacity, size_t *out_count);

/* Decodes ids to UTF-8 (no terminating NUL); *out_len is the byte count the
 * text needs. */
spark_text_status spark_tokenizer_decode(const spark_tokenizer *tokenizer,
                                         const int32_t *ids, size_t n,
                                         int skip_special, char *text,
                                         size_t capacity, size_t *out_len);

int32_t spark_tokenizer_vocab_size(const spark_tokenizer *tokenizer);
/* The id of a token given by its content ("<|user|>"), or -1. */
int32_t spark_tokenizer_token_id(const spark_tokenizer *tokenizer,
                                 const char *content);
/* Non-zero when id is an added token marked special. */
int spark_tokenizer_is_special(const spark_tokenizer *tokenizer, int32_t id);

/* Streaming decode: text that never ends inside a UTF-8 character. */
typedef struct spark_decode_stream spark_decode_stream;
spark_text_status spark_decode_stream_create(const spark_tokenizer *tokenizer,
                                             int skip_special,
                                             spark_decode_stream **out_stream);
void spark_decode_stream_destroy(spark_decode_stream *stream);
/* Pushes one id; *out_text (NUL-terminated, valid until the next call on
 * the stream) is the text it completes, often "" . */
spark_text_status spark_decode_stream_push(spark_decode_stream *stream,
                                           int32_t id, const char **out_text);
/* Whatever is held back, as U+FFFD; the stream starts over. */
spark_text_status spark_decode_stream_flush(spark_decode_stream *stream,
                                            const char **out_text);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_TEXT_H */
