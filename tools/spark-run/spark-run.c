/* spark-run.c - run a compiled model on token ids or text.
 *
 *   spark-run OUT --prompt-ids 1,2,3 [--n-predict N] [--threads T] [--chunk C]
 *             [--logits-out F.npy] [--temperature X --top-k K --top-p P
 *             --seed S] [--print-dispatch] [--no-verify]
 *   spark-run OUT --prompt TEXT | --chat [--system TEXT] [--tools FILE]
 *             [--grammar tools] [--think-budget B] [--tokenizer DIR] ...
 *
 * The text modes (host build only, text_mode.c) read the tokenizer and chat
 * template that spark-compile copies into OUT from the checkpoint.
 *
 * Two builds of this one file:
 * - the host tool (build/bin/spark-run) loads OUT/libspark_model.so with
 *   dlopen and OUT/model.spkw;
 * - with SPARK_RUN_STATIC_MODEL, `spark-compile --emit=exe` links it
 *   statically with the model library and the runtime for the target into
 *   OUT/spark-run, which opens the model.spkw next to itself (or --pack F);
 *   the OUT argument is then optional.
 * It prefills the prompt, then samples N tokens (greedy by default), prints
 * their ids, and with --logits-out writes the logits of every prompt
 * position and generated token ([rows][vocab] float32 .npy). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "spark/runtime.h"

#include "../loader/options.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SPARK_RUN_TEXT
#include "text_mode.h"
#endif

#ifdef SPARK_RUN_STATIC_MODEL
extern const spark_model_def *spark_model_definition(void);
#else
#include "model_dir.h"
#endif

static const char *kUsage =
    "usage: spark-run OUT --prompt-ids 1,2,3 [--n-predict N] [--threads T]\n"
    "                 [--chunk C] [--logits-out F.npy] [--temperature X]\n"
    "                 [--top-k K] [--top-p P] [--seed S] [--print-dispatch]\n"
    "                 [--no-verify] [--pack F]"
#ifdef SPARK_RUN_TEXT
    "\n"
    "       spark-run OUT --prompt TEXT | --chat [--system TEXT] [--tools FILE]\n"
    "                 [--grammar tools] [--think-budget B] [--tokenizer DIR]\n"
    "                 [--n-predict N] [sampling and thread options as above]\n"
    "--prompt alone completes the text; with --system, --tools or --grammar it\n"
    "is one user turn through the chat template. --chat reads one user message\n"
    "per line of stdin (an empty line ends) and keeps the session between\n"
    "turns. --tools FILE: the tools (JSON list) for the template; tool calls\n"
    "are reported on stderr. --grammar tools: constrained decoding, every\n"
    "answer a well-formed call of one of the tools (thinking first allowed,\n"
    "at most --think-budget bytes, default 512). --tokenizer DIR: where\n"
    "tokenizer.json and tokenizer_config.json are (default OUT).\n"
#endif
#ifdef SPARK_RUN_STATIC_MODEL
    "\n(this static build carries its model; OUT is optional and names the\n"
    "folder of model.spkw, by default the executable's own; --pack F opens\n"
    "the weight pack F instead)\n";
#else
    "\n--pack F: open the weight pack F (of the same build) instead of\n"
    "OUT/model.spkw\n";
#endif

static int fail(const char *format, const char *detail) {
  fprintf(stderr, "spark-run: error: ");
  fprintf(stderr, format, detail);
  fprintf(stderr, "\n");
  return 1;
}

typedef struct options {
  const char *out, *prompt_ids, *logits_out, *pack;
  const char *prompt, *system, *tools, *grammar, *tokenizer;
  long long n_predict, threads, chunk, top_k, seed, think_budget;
  double temperature, top_p;
  int print_dispatch, no_verify, help, chat;
} options;

/* Parses the command line (options.h); returns NULL or a message. Flags
 * seen before an error are set (--help is honoured). */
static const char *parse(int argc, char **argv, options *o) {
  static char message[256];
  spark_option table[] = {
      {"help", 0, NULL},        {"print-dispatch", 0, NULL},
      {"no-verify", 0, NULL},   {"prompt-ids", 1, NULL},
      {"logits-out", 1, NULL},  {"pack", 1, NULL},
      {"temperature", 1, NULL}, {"top-p", 1, NULL},
      {"n-predict", 1, NULL},   {"threads", 1, NULL},
      {"chunk", 1, NULL},       {"top-k", 1, NULL},
      {"seed", 1, NULL},        {"think-budget", 1, NULL},
#ifdef SPARK_RUN_TEXT
      {"chat", 0, NULL},        {"prompt", 1, NULL},
      {"system", 1, NULL},      {"tools", 1, NULL},
      {"grammar", 1, NULL},     {"tokenizer", 1, NULL},
#endif
  };
  const size_t count = sizeof(table) / sizeof(table[0]);
  size_t positionals = 0;
  const int failed =
      spark_options_parse(argc, argv, table, count, &o->out, 1, &positionals,
                          message, sizeof(message));
#define SPARK_RUN_OPTION(name) spark_option_find(table, count, name)
  o->help = SPARK_RUN_OPTION("help")->value != NULL;
  if (failed)
    return message;
  o->print_dispatch = SPARK_RUN_OPTION("print-dispatch")->value != NULL;
  o->no_verify = SPARK_RUN_OPTION("no-verify")->value != NULL;
  o->prompt_ids = SPARK_RUN_OPTION("prompt-ids")->value;
  o->logits_out = SPARK_RUN_OPTION("logits-out")->value;
  o->pack = SPARK_RUN_OPTION("pack")->value;
#ifdef SPARK_RUN_TEXT
  o->chat = SPARK_RUN_OPTION("chat")->value != NULL;
  o->prompt = SPARK_RUN_OPTION("prompt")->value;
  o->system = SPARK_RUN_OPTION("system")->value;
  o->tools = SPARK_RUN_OPTION("tools")->value;
  o->grammar = SPARK_RUN_OPTION("grammar")->value;
  o->tokenizer = SPARK_RUN_OPTION("tokenizer")->value;
#endif
  const int bad =
      spark_option_double(SPARK_RUN_OPTION("temperature"), o->temperature,
                          &o->temperature, message, sizeof(message)) ||
      spark_option_double(SPARK_RUN_OPTION("top-p"), o->top_p, &o->top_p,
                          message, sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("n-predict"), o->n_predict,
                       &o->n_predict, message, sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("threads"), o->threads, &o->threads,
                       message, sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("chunk"), o->chunk, &o->chunk, message,
                       sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("top-k"), o->top_k, &o->top_k, message,
                       sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("seed"), o->seed, &o->seed, message,
                       sizeof(message)) ||
      spark_option_int(SPARK_RUN_OPTION("think-budget"), o->think_budget,
                       &o->think_budget, message, sizeof(message));
#undef SPARK_RUN_OPTION
  return bad ? message : NULL;
}

/* Writes rows x cols float32 as .npy through a temporary name. */
static int write_npy(const char *path, const float *data, size_t rows,
                     size_t cols) {
  char header[128];
  int n = snprintf(header, sizeof(header),
                   "{'descr': '<f4', 'fortran_order': False, 'shape': "
                   "(%zu, %zu), }",
                   rows, cols);
  size_t total = 10 + (size_t)n + 1, pad = (64 - total % 64) % 64;
  memset(header + n, ' ', pad);
  header[n + pad] = '\n';
  size_t header_bytes = (size_t)n + pad + 1;
  char temporary[4096];
  snprintf(temporary, sizeof(temporary), "%s.partial", path);
  FILE *f = fopen(temporary, "wb");
  if (!f)
    return -1;
  unsigned char length[2] = {(unsigned char)(header_bytes & 0xff),
                             (unsigned char)(header_bytes >> 8)};
  int ok = fwrite("\x93NUMPY\x01\x00", 1, 8, f) == 8 &&
           fwrite(length, 1, 2, f) == 2 &&
           fwrite(header, 1, header_bytes, f) == header_bytes &&
           fwrite(data, sizeof(float), rows * cols, f) == rows * cols;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(temporary, path) != 0) {
    remove(temporary);
    return -1;
  }
  return 0;
}

/* What a failed step reports: for a damaged pack (its checksums verified
 * in the background), the tensor that fails. Shared with text_mode.c. */
const char *spark_run_step_error(spark_model *model, spark_status status) {
  static char message[512];
  if (status == SPARK_ERROR_BAD_PACK &&
      spark_model_wait_verified(model, message, sizeof(message)) != SPARK_OK) {
    const size_t used = strlen(message);
    snprintf(message + used, sizeof(message) - used,
             " (the weight pack is damaged: copy or rebuild it)");
    return message;
  }
  return spark_status_string(status);
}

int main(int argc, char **argv) {
  options o = {0};
  o.n_predict = 16;
  o.top_p = 1.0;
  const char *problem = parse(argc, argv, &o);
  if (o.help) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (problem) {
    fprintf(stderr, "spark-run: error: %s\n%s", problem, kUsage);
    return 1;
  }
#ifndef SPARK_RUN_STATIC_MODEL
  if (!o.out) {
    fprintf(stderr, "spark-run: error: expected one output folder\n%s", kUsage);
    return 1;
  }
#endif
  int text_mode = o.prompt || o.chat;
  if (!o.prompt_ids && !text_mode) {
    fprintf(stderr, "spark-run: error: --prompt-ids%s is required\n%s",
#ifdef SPARK_RUN_TEXT
            " (or --prompt, or --chat)",
#else
            "",
#endif
            kUsage);
    return 1;
  }
  if (o.prompt_ids && text_mode)
    return fail("--prompt-ids does not combine with --prompt or --chat%s", "");
  if (!text_mode && (o.system || o.tools || o.grammar || o.tokenizer || o.think_budget))
    return fail("--system, --tools, --grammar, --tokenizer and --think-budget "
                "need --prompt or --chat%s", "");
  if (o.grammar && strcmp(o.grammar, "tools"))
    return fail("--grammar: expected 'tools', got '%s'", o.grammar);
  if (o.grammar && !o.tools)
    return fail("--grammar tools needs --tools FILE%s", "");
  if (text_mode && o.logits_out)
    return fail("--logits-out needs --prompt-ids%s", "");
  if (o.think_budget < 0)
    return fail("--think-budget must not be negative%s", "");
  if (o.n_predict < 1)
    return fail("--n-predict must be at least 1%s", "");
  if (o.threads < 0 || o.chunk < 0)
    return fail("--threads and --chunk must not be negative%s", "");

  char *tools_json = NULL;
#ifdef SPARK_RUN_TEXT
  if (o.tools) {
    FILE *f = fopen(o.tools, "rb");
    if (!f)
      return fail("--tools %s: cannot open", o.tools);
    size_t cap = 1 << 16, n = 0, got;
    tools_json = malloc(cap);
    while (tools_json && (got = fread(tools_json + n, 1, cap - n - 1, f)) > 0) {
      n += got;
      if (n + 1 == cap)
        tools_json = realloc(tools_json, cap *= 2);
    }
    fclose(f);
    if (!tools_json)
      return fail("out of memory reading %s", o.tools);
    tools_json[n] = 0;
  }
#endif

  /* The prompt. */
  size_t count = 1;
  if (text_mode)
    o.prompt_ids = "0";
  for (const char *p = o.prompt_ids; *p; ++p)
    count += *p == ',';
  int32_t *prompt = malloc(sizeof(int32_t) * count);
  size_t n_prompt = 0;
  for (const char *p = o.prompt_ids;;) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || (*end && *end != ',') || errno || v < INT32_MIN ||
        v > INT32_MAX) {
      char item[64];
      size_t length = strcspn(p, ",");
      snprintf(item, sizeof(item), "%.*s", (int)(length < 60 ? length : 60), p);
      return fail("--prompt-ids: '%s' is not an integer token id", item);
    }
    prompt[n_prompt++] = (int32_t)v;
    if (!*end)
      break;
    p = end + 1;
  }

  /* The model. */
  spark_open_params params = spark_open_params_default();
  params.num_threads = (int)o.threads;
  /* The checksums are verified while the tokenizer loads and the prompt's
   * first step runs; that step waits for the verdict. */
  params.verify_checksums =
      o.no_verify ? SPARK_VERIFY_NONE : SPARK_VERIFY_IN_BACKGROUND;
  spark_model *model = NULL;
  char error[1024] = "";
#ifdef SPARK_RUN_STATIC_MODEL
  char pack[4096];
  if (o.pack) {
    snprintf(pack, sizeof(pack), "%s", o.pack);
  } else if (o.out) {
    snprintf(pack, sizeof(pack), "%s/model.spkw", o.out);
  } else {
    /* Next to this executable. */
    char self[2048];
    ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0)
      return fail("cannot locate the executable; pass --pack F%s", "");
    self[length] = 0;
    char *slash = strrchr(self, '/');
    if (slash)
      *slash = 0;
    snprintf(pack, sizeof(pack), "%s/model.spkw", slash ? self : ".");
  }
  params.error_message = error;
  params.error_message_bytes = sizeof(error);
  spark_status opened =
      spark_model_open(spark_model_definition(), pack, &params, &model);
  if (opened != SPARK_OK)
    return fail("%s", error);
  void *library = NULL;
#else
  void *library = NULL;
  if (spark_open_model_dir(o.out, o.pack, params, &model, &library, error,
                           sizeof(error)) != 0)
    return fail("%s", error);
#endif
  spark_model_info info;
  spark_model_get_info(model, &info);
  if (o.print_dispatch)
    fprintf(stderr, "spark-run: kernels: %s (chosen from the CPU; target %s)%s%s\n",
            info.dispatch, info.target, info.dispatch_reason ? "; " : "",
            info.dispatch_reason ? info.dispatch_reason : "");
#ifdef SPARK_RUN_TEXT
  if (text_mode) {
    text_options t = {0};
    t.prompt = o.prompt;
    t.system = o.system;
    t.tools = o.tools;
    t.tools_json = tools_json;
    t.tokenizer_dir = o.tokenizer ? o.tokenizer : o.out;
    t.tokenizer_given = o.tokenizer != NULL;
    t.chat = o.chat;
    t.grammar = o.grammar != NULL;
    t.n_predict = o.n_predict;
    t.chunk = o.chunk;
    t.top_k = o.top_k;
    t.seed = o.seed;
    t.think_budget = o.think_budget ? o.think_budget : 512;
    t.temperature = o.temperature;
    t.top_p = o.top_p;
    int text_rc = spark_run_text(model, &t);
    free(tools_json);
    free(prompt);
    spark_close_model_dir(model, library);
    return text_rc;
  }
#endif
  free(tools_json);
  for (size_t i = 0; i < n_prompt; ++i)
    if (prompt[i] < 0 || prompt[i] >= info.vocab_size) {
      char message[128];
      snprintf(message, sizeof(message),
               "token %d is outside the vocabulary [0, %d)", prompt[i],
               info.vocab_size);
      return fail("--prompt-ids: %s", message);
    }
  if (n_prompt + (size_t)o.n_predict - 1 > (size_t)info.max_context) {
    char message[160];
    snprintf(message, sizeof(message),
             "prompt + --n-predict need %zu positions; the build holds %d "
             "(spark-compile --max-context)",
             n_prompt + (size_t)o.n_predict - 1, info.max_context);
    return fail("%s", message);
  }

  spark_session *session;
  spark_status s = spark_session_create(model, NULL, &session);
  if (s != SPARK_OK)
    return fail("cannot create a session: %s", spark_status_string(s));
  spark_sampler_params sampler_params = spark_sampler_params_default();
  sampler_params.temperature = (float)o.temperature;
  sampler_params.top_k = (int32_t)o.top_k;
  sampler_params.top_p = (float)o.top_p;
  sampler_params.seed = (uint64_t)o.seed;
  spark_sampler *sampler;
  s = spark_sampler_create(&sampler_params, info.vocab_size, &sampler);
  if (s != SPARK_OK)
    return fail("sampler: %s", spark_status_string(s));

  const size_t vocab = (size_t)info.vocab_size;
  float *rows = NULL;
  if (o.logits_out &&
      !(rows = malloc(sizeof(float) * vocab * (n_prompt + (size_t)o.n_predict))))
    return fail("out of memory for %s", o.logits_out);
  s = spark_session_eval(session, prompt, (int32_t)n_prompt, (int32_t)o.chunk,
                         rows);
  if (s != SPARK_OK)
    return fail("prefill: %s", spark_run_step_error(model, s));
  size_t n_rows = n_prompt;
  for (long long i = 0; i < o.n_predict; ++i) {
    const float *logits;
    spark_session_logits(session, &logits);
    int32_t next;
    spark_sampler_sample(sampler, logits, &next);
    printf("%s%d", i ? " " : "", next);
    if (i + 1 == o.n_predict)
      break;
    s = spark_session_decode(session, next);
    if (s != SPARK_OK)
      return fail("decode: %s", spark_run_step_error(model, s));
    if (rows) {
      spark_session_logits(session, &logits);
      memcpy(rows + n_rows * vocab, logits, sizeof(float) * vocab);
      ++n_rows;
    }
  }
  printf("\n");
  fflush(stdout);
  spark_sampler_destroy(sampler);
  spark_session_destroy(session);
  int rc = 0;
  if (rows && write_npy(o.logits_out, rows, n_rows, vocab) != 0)
    rc = fail("%s: cannot write", o.logits_out);
  free(rows);
  free(prompt);
#ifdef SPARK_RUN_STATIC_MODEL
  spark_model_close(model);
  (void)library;
#else
  spark_close_model_dir(model, library);
#endif
  return rc;
}
