/* text_mode.c - spark-run's text modes: --prompt and --chat.
 *
 * Tokenizer, chat template, tool-call parser and constrained decoding come
 * from the text layer (spark/text.h). Only the host spark-run has them; the
 * static executables of `spark-compile --emit=exe` take --prompt-ids. */
#include "text_mode.h"

#include "spark/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable string. */
typedef struct buffer {
  char *data;
  size_t size, capacity;
} buffer;

static int buffer_append(buffer *b, const char *s, size_t n) {
  if (b->size + n + 1 > b->capacity) {
    size_t cap = b->capacity ? b->capacity * 2 : 256;
    while (cap < b->size + n + 1)
      cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
      return -1;
    b->data = p;
    b->capacity = cap;
  }
  memcpy(b->data + b->size, s, n);
  b->size += n;
  b->data[b->size] = 0;
  return 0;
}

static int buffer_puts(buffer *b, const char *s) { return buffer_append(b, s, strlen(s)); }

/* Appends s as a JSON string. */
static int buffer_json_string(buffer *b, const char *s) {
  int rc = buffer_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p && !rc; ++p) {
    char escaped[8];
    switch (*p) {
    case '"': rc = buffer_puts(b, "\\\""); break;
    case '\\': rc = buffer_puts(b, "\\\\"); break;
    case '\n': rc = buffer_puts(b, "\\n"); break;
    case '\r': rc = buffer_puts(b, "\\r"); break;
    case '\t': rc = buffer_puts(b, "\\t"); break;
    default:
      if (*p < 0x20) {
        snprintf(escaped, sizeof(escaped), "\\u%04x", *p);
        rc = buffer_puts(b, escaped);
      } else {
        rc = buffer_append(b, (const char *)p, 1);
      }
    }
  }
  return rc ? rc : buffer_puts(b, "\"");
}

static int text_fail(const char *what, const char *detail) {
  fprintf(stderr, "spark-run: error: %s%s\n", what, detail ? detail : "");
  return 1;
}

typedef struct text_state {
  const text_options *o;
  spark_model *model;
  spark_session *session;
  spark_sampler *sampler;
  spark_tokenizer *tokenizer;
  spark_chat_template *chat_template;
  spark_tool_grammar *grammar;
  int32_t vocab, max_context;
  int32_t end_tokens[16];
  size_t num_end_tokens;
  float *masked; /* vocab floats for the grammar's mask */
  buffer history; /* the text whose tokens the session holds */
} text_state;

static int is_end_token(const text_state *t, int32_t id) {
  for (size_t i = 0; i < t->num_end_tokens; ++i)
    if (t->end_tokens[i] == id)
      return 1;
  return 0;
}

/* Encodes text and evaluates it after what the session holds. */
static int eval_text(text_state *t, const char *text, int add_special) {
  /* One encoding: a token covers at least one byte, plus the few the
   * post-processor adds; the exact need is reported if that is short. */
  size_t len = strlen(text), count = 0, capacity = len + 64;
  int32_t *ids = malloc(sizeof(int32_t) * capacity);
  if (!ids)
    return text_fail("out of memory", NULL);
  spark_text_status ts =
      spark_tokenizer_encode(t->tokenizer, text, len, add_special, ids, capacity, &count);
  if (ts == SPARK_TEXT_ERROR_TOO_SMALL) {
    int32_t *bigger = realloc(ids, sizeof(int32_t) * count);
    if (!bigger) {
      free(ids);
      return text_fail("out of memory", NULL);
    }
    ids = bigger;
    ts = spark_tokenizer_encode(t->tokenizer, text, len, add_special, ids, count, &count);
  }
  if (ts != SPARK_TEXT_OK) {
    free(ids);
    return text_fail("cannot encode the prompt: ", spark_text_status_string(ts));
  }
  if (!count) {
    free(ids);
    return 0;
  }
  for (size_t i = 0; i < count; ++i)
    if (ids[i] >= t->vocab) {
      free(ids);
      return text_fail("the tokenizer's ids exceed the model's vocabulary: is --tokenizer "
                       "the checkpoint this build was compiled from?", NULL);
    }
  if (spark_session_position(t->session) + (int64_t)count > t->max_context) {
    free(ids);
    return text_fail("the conversation no longer fits the build's context "
                     "(spark-compile --max-context)", NULL);
  }
  spark_status s = spark_session_eval(t->session, ids, (int32_t)count, (int32_t)t->o->chunk, NULL);
  free(ids);
  if (s != SPARK_OK)
    return text_fail("prefill: ", spark_run_step_error(t->model, s));
  return 0;
}

/* Samples up to n_predict tokens, streaming the text to stdout; the text
 * (without the end token) is appended to *reply. */
static int generate(text_state *t, buffer *reply) {
  spark_decode_stream *stream = NULL;
  spark_tool_parser *parser = NULL;
  /* Special tokens are shown: Spark's <tool_call> tags are special. */
  if (spark_decode_stream_create(t->tokenizer, 0, &stream) != SPARK_TEXT_OK)
    return text_fail("out of memory", NULL);
  if (t->o->tools)
    spark_tool_parser_create((size_t)t->o->think_budget, &parser);
  if (t->grammar)
    spark_tool_grammar_reset(t->grammar);
  int rc = 0, ended = 0;
  for (long long i = 0; i < t->o->n_predict; ++i) {
    const float *logits;
    spark_session_logits(t->session, &logits);
    if (t->grammar) {
      memcpy(t->masked, logits, sizeof(float) * (size_t)t->vocab);
      size_t allowed = 0;
      spark_tool_grammar_mask(t->grammar, t->masked, t->vocab, &allowed);
      if (!allowed) {
        rc = text_fail("the tool grammar allows no token here (no end token known? see "
                       "generation_config.json)", NULL);
        break;
      }
      logits = t->masked;
    }
    int32_t next;
    spark_sampler_sample(t->sampler, logits, &next);
    if (t->grammar)
      spark_tool_grammar_accept(t->grammar, next);
    if (is_end_token(t, next)) {
      ended = 1;
      break;
    }
    const char *piece = "";
    spark_decode_stream_push(stream, next, &piece);
    fputs(piece, stdout);
    fflush(stdout);
    buffer_puts(reply, piece);
    if (parser)
      spark_tool_parser_feed(parser, piece, strlen(piece));
    if (spark_session_position(t->session) >= t->max_context) {
      rc = text_fail("the build's context is full (spark-compile --max-context)", NULL);
      break;
    }
    spark_status s = spark_session_decode(t->session, next);
    if (s != SPARK_OK) {
      rc = text_fail("decode: ", spark_run_step_error(t->model, s));
      break;
    }
  }
  const char *rest = "";
  spark_decode_stream_flush(stream, &rest);
  fputs(rest, stdout);
  buffer_puts(reply, rest);
  fputs("\n", stdout);
  fflush(stdout);
  if (!ended && !rc)
    fprintf(stderr, "spark-run: stopped after --n-predict %lld tokens\n", t->o->n_predict);
  if (parser) {
    spark_tool_parser_feed(parser, rest, strlen(rest));
    spark_tool_parser_finish(parser);
    spark_tool_event e;
    while (spark_tool_parser_next(parser, &e)) {
      if (e.kind == SPARK_TOOL_EVENT_CALL)
        fprintf(stderr, "spark-run: tool call: %s %s\n", e.name, e.arguments_json);
      else if (e.kind == SPARK_TOOL_EVENT_RECOVERY)
        fprintf(stderr, "spark-run: recovered: %s\n", e.text);
    }
    spark_tool_parser_destroy(parser);
  }
  spark_decode_stream_destroy(stream);
  return rc;
}

/* Renders the conversation and evaluates what the session lacks: the
 * suffix when the session's history is a prefix of the new text (the
 * usual case: earlier turns are never re-read), else everything again. */
static int eval_conversation(text_state *t, const buffer *messages) {
  buffer vars = {0};
  buffer_puts(&vars, "{\"messages\": [");
  buffer_append(&vars, messages->data ? messages->data : "", messages->size);
  buffer_puts(&vars, "], \"add_generation_prompt\": true");
  if (t->o->tools_json) {
    buffer_puts(&vars, ", \"tools\": ");
    buffer_puts(&vars, t->o->tools_json);
  }
  buffer_puts(&vars, "}");
  char *text = NULL;
  char error[1024] = "";
  spark_text_status ts =
      spark_chat_template_render(t->chat_template, vars.data, &text, error, sizeof(error));
  free(vars.data);
  if (ts != SPARK_TEXT_OK)
    return text_fail(error, NULL);
  const char *suffix = text;
  if (t->history.size && strncmp(text, t->history.data, t->history.size) == 0) {
    suffix = text + t->history.size;
  } else if (t->history.size) {
    fprintf(stderr, "spark-run: the template rewrote earlier turns; reading the whole "
                    "conversation again\n");
    spark_session_reset(t->session);
  }
  int rc = eval_text(t, suffix, 0);
  t->history.size = 0;
  buffer_puts(&t->history, text);
  spark_text_free(text);
  return rc;
}

static int add_message(buffer *messages, const char *role, const char *content) {
  if (messages->size)
    buffer_puts(messages, ", ");
  buffer_puts(messages, "{\"role\": ");
  buffer_json_string(messages, role);
  buffer_puts(messages, ", \"content\": ");
  buffer_json_string(messages, content);
  return buffer_puts(messages, "}");
}

static char *read_line(FILE *in) {
  buffer b = {0};
  int c;
  while ((c = fgetc(in)) != EOF && c != '\n') {
    char ch = (char)c;
    buffer_append(&b, &ch, 1);
  }
  if (c == EOF && !b.size) {
    free(b.data);
    return NULL;
  }
  if (!b.data)
    buffer_puts(&b, "");
  return b.data;
}

int spark_run_text(spark_model *model, const text_options *o) {
  text_state t = {0};
  t.o = o;
  t.model = model;
  spark_model_info info;
  spark_model_get_info(model, &info);
  t.vocab = info.vocab_size;
  t.max_context = info.max_context;
  char error[1024] = "";
  if (spark_tokenizer_open(o->tokenizer_dir, &t.tokenizer, error, sizeof(error)) != SPARK_TEXT_OK)
    return text_fail(error, o->tokenizer_given ? NULL
                                               : " (the build folder has no tokenizer: pass "
                                                 "--tokenizer CHECKPOINT)");
  if (spark_tokenizer_vocab_size(t.tokenizer) > t.vocab)
    fprintf(stderr, "spark-run: warning: the tokenizer has %d ids, the model %d\n",
            spark_tokenizer_vocab_size(t.tokenizer), t.vocab);
  spark_tokenizer_end_tokens(t.tokenizer, o->tokenizer_dir, t.end_tokens, 16,
                             &t.num_end_tokens);
  if (t.num_end_tokens > 16)
    t.num_end_tokens = 16;

  int use_template = o->chat || o->system || o->tools || o->grammar;
  if (use_template &&
      spark_chat_template_open(o->tokenizer_dir, NULL, &t.chat_template, error,
                               sizeof(error)) != SPARK_TEXT_OK)
    return text_fail(error, NULL);
  if (o->grammar) {
    if (!t.num_end_tokens)
      return text_fail("--grammar tools needs an end token (generation_config.json "
                       "eos_token_id or tokenizer_config.json eos_token)", NULL);
    if (spark_tool_grammar_create(t.tokenizer, o->tools_json, t.end_tokens, t.num_end_tokens,
                                  1, (size_t)o->think_budget, &t.grammar, error,
                                  sizeof(error)) != SPARK_TEXT_OK)
      return fprintf(stderr, "spark-run: error: --tools %s: %s\n", o->tools, error), 1;
    t.masked = malloc(sizeof(float) * (size_t)t.vocab);
    if (!t.masked)
      return text_fail("out of memory", NULL);
  }

  spark_status s = spark_session_create(model, NULL, &t.session);
  if (s != SPARK_OK)
    return text_fail("cannot create a session: ", spark_status_string(s));
  spark_sampler_params sp = spark_sampler_params_default();
  sp.temperature = (float)o->temperature;
  sp.top_k = (int32_t)o->top_k;
  sp.top_p = (float)o->top_p;
  sp.seed = (uint64_t)o->seed;
  s = spark_sampler_create(&sp, t.vocab, &t.sampler);
  if (s != SPARK_OK)
    return text_fail("sampler: ", spark_status_string(s));

  int rc = 0;
  buffer messages = {0};
  if (o->system)
    add_message(&messages, "system", o->system);
  if (!use_template) {
    /* Plain completion of the prompt text. */
    rc = eval_text(&t, o->prompt, 1);
    if (!rc)
      rc = generate(&t, &(buffer){0});
  } else if (!o->chat) {
    add_message(&messages, "user", o->prompt);
    rc = eval_conversation(&t, &messages);
    buffer reply = {0};
    if (!rc)
      rc = generate(&t, &reply);
    free(reply.data);
  } else {
    if (o->prompt)
      fprintf(stderr, "spark-run: --chat: the first message is --prompt\n");
    for (int turn = 0; !rc; ++turn) {
      char *line = NULL;
      if (turn == 0 && o->prompt) {
        line = strdup(o->prompt);
      } else {
        fprintf(stderr, "> ");
        fflush(stderr);
        line = read_line(stdin);
      }
      if (!line || !*line) {
        free(line);
        break;
      }
      add_message(&messages, "user", line);
      free(line);
      rc = eval_conversation(&t, &messages);
      if (rc)
        break;
      buffer reply = {0};
      rc = generate(&t, &reply);
      add_message(&messages, "assistant", reply.data ? reply.data : "");
      /* The session holds the reply's tokens: they extend the history. */
      buffer_append(&t.history, reply.data ? reply.data : "", reply.size);
      free(reply.data);
    }
  }
  free(messages.data);
  free(t.history.data);
  free(t.masked);
  spark_sampler_destroy(t.sampler);
  spark_session_destroy(t.session);
  spark_tool_grammar_destroy(t.grammar);
  spark_chat_template_close(t.chat_template);
  spark_tokenizer_close(t.tokenizer);
  return rc;
}
