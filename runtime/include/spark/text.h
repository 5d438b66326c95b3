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

/* The tokens that end a turn: generation_config.json's eos_token_id (a
 * number or a list) in dir, else tokenizer_config.json's eos_token. Writes
 * at most capacity ids; *out_count is the number found (0: none known). */
spark_text_status spark_tokenizer_end_tokens(const spark_tokenizer *tokenizer,
                                             const char *dir, int32_t *ids,
                                             size_t capacity,
                                             size_t *out_count);

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

/* Frees a string the text layer returned. */
void spark_text_free(char *text);

/* Chat templates: tokenizer_config.json's chat_template (or
 * chat_template.jinja) of a checkpoint folder, rendered as Hugging Face
 * transformers' apply_chat_template does (docs/text.md). */
typedef struct spark_chat_template spark_chat_template;
/* template_file: NULL for the folder's own template, or a .jinja file (the
 * folder then only lends bos_token / eos_token). */
spark_text_status spark_chat_template_open(const char *dir,
                                           const char *template_file,
                                           spark_chat_template **out_template,
                                           char *error, size_t error_bytes);
void spark_chat_template_close(spark_chat_template *chat_template);
/* variables_json: a JSON object (messages, tools, add_generation_prompt,
 * ...). *out_text is NUL-terminated; free it with spark_text_free. */
spark_text_status spark_chat_template_render(
    const spark_chat_template *chat_template, const char *variables_json,
    char **out_text, char *error, size_t error_bytes);

/* Tool calls: a streaming parser of Spark's format
 *   <think>...</think><tool_call>name<arg_key>k</arg_key><arg_value>v
 *   </arg_value></tool_call>
 * that also recovers what models emit instead (a "[tap]" line with JSON,
 * bare JSON, unbalanced braces, unclosed blocks) and reports each recovery
 * as an event before its call. */
typedef enum spark_tool_event_kind {
  SPARK_TOOL_EVENT_CONTENT = 0,  /* text: visible text */
  SPARK_TOOL_EVENT_THINKING = 1, /* text: inside <think> */
  SPARK_TOOL_EVENT_CALL = 2,     /* name, arguments_json */
  SPARK_TOOL_EVENT_RECOVERY = 3, /* text: what was repaired */
} spark_tool_event_kind;

typedef struct spark_tool_event {
  spark_tool_event_kind kind;
  const char *text;           /* CONTENT, THINKING, RECOVERY */
  const char *name;           /* CALL */
  const char *arguments_json; /* CALL: {"key": value, ...} */
} spark_tool_event;

typedef struct spark_tool_parser spark_tool_parser;
/* think_budget: bytes of thinking after which <think> counts as closed (0:
 * no limit). */
spark_text_status spark_tool_parser_create(size_t think_budget,
                                           spark_tool_parser **out_parser);
void spark_tool_parser_destroy(spark_tool_parser *parser);
spark_text_status spark_tool_parser_feed(spark_tool_parser *parser,
                                         const char *text, size_t len);
/* The end of the output: resolves whatever is open. */
spark_text_status spark_tool_parser_finish(spark_tool_parser *parser);
/* Takes the next event: 1 and *out_event (valid until the next call on the
 * parser), or 0 when none is pending. */
int spark_tool_parser_next(spark_tool_parser *parser,
                           spark_tool_event *out_event);

/* Constrained decoding: masks logits so that the output is a well-formed
 * call of one of the tools (a JSON list as chat templates take), with a
 * <think> block first when allow_thinking, then one of end_tokens. */
typedef struct spark_tool_grammar spark_tool_grammar;
spark_text_status spark_tool_grammar_create(
    const spark_tokenizer *tokenizer, const char *tools_json,
    const int32_t *end_tokens, size_t num_end_tokens, int allow_thinking,
    size_t think_budget, spark_tool_grammar **out_grammar, char *error,
    size_t error_bytes);
void spark_tool_grammar_destroy(spark_tool_grammar *grammar);
/* Sets forbidden logits to -INFINITY; *out_allowed counts the rest. */
spark_text_status spark_tool_grammar_mask(const spark_tool_grammar *grammar,
                                          float *logits, int32_t vocab_size,
                                          size_t *out_allowed);
/* Advances over the sampled token (SPARK_TEXT_ERROR_INVALID_ARGUMENT and
 * no change when the grammar forbids it). */
spark_text_status spark_tool_grammar_accept(spark_tool_grammar *grammar,
                                            int32_t token);
/* Non-zero once the call and an end token are complete. */
int spark_tool_grammar_done(const spark_tool_grammar *grammar);
void spark_tool_grammar_reset(spark_tool_grammar *grammar);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_TEXT_H */
