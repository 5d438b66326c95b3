/* two_models_test.c - two model libraries in one program, and sessions
 * stepping in parallel threads.
 *
 * Linked with two libspark_model.a built with --entry-point=spark_model_first
 * and --entry-point=spark_model_second (their kernels, drivers and Halide
 * runtimes are private to each library) and the runtime. For each model it
 * evaluates one prompt and decodes greedily, once alone, then in THREADS
 * threads per model at once, every session on its own thread, while another
 * thread installs and removes a layer probe on the first model: every run
 * must give the same tokens and the same last logits, bit for bit. Prints
 * "first: IDS" and "second: IDS" (the generated ids) for the caller to
 * compare with spark-run on each build.
 *
 * Usage: two_models_test FIRST.spkw SECOND.spkw THREADS N_PREDICT */
#include "spark/runtime.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const spark_model_def *spark_model_first(void);
const spark_model_def *spark_model_second(void);

enum { kPrompt = 12, kMaxPredict = 64 };

typedef struct run {
  spark_model *model;
  int32_t vocab;
  int32_t n_predict;
  int32_t ids[kMaxPredict];
  float *logits; /* the last step's logits */
  int ok;
} run;

static void *generate(void *user) {
  run *r = (run *)user;
  spark_session *session;
  spark_sampler *sampler;
  spark_sampler_params sp = spark_sampler_params_default();
  r->ok = 0;
  if (spark_session_create(r->model, NULL, &session) != SPARK_OK)
    return NULL;
  if (spark_sampler_create(&sp, r->vocab, &sampler) != SPARK_OK) {
    spark_session_destroy(session);
    return NULL;
  }
  int32_t prompt[kPrompt];
  for (int i = 0; i < kPrompt; ++i)
    prompt[i] = (i * 7 + 3) % r->vocab;
  spark_status status = spark_session_eval(session, prompt, kPrompt, 0, NULL);
  const float *logits = NULL;
  for (int32_t i = 0; status == SPARK_OK && i < r->n_predict; ++i) {
    status = spark_session_logits(session, &logits);
    if (status == SPARK_OK)
      status = spark_sampler_sample(sampler, logits, &r->ids[i]);
    if (status == SPARK_OK && i + 1 < r->n_predict)
      status = spark_session_decode(session, r->ids[i]);
  }
  if (status == SPARK_OK) {
    memcpy(r->logits, logits, sizeof(float) * (size_t)r->vocab);
    r->ok = 1;
  } else {
    fprintf(stderr, "generate: %s\n", spark_status_string(status));
  }
  spark_sampler_destroy(sampler);
  spark_session_destroy(session);
  return NULL;
}

static int probe_calls;

static void count_probe(void *user, int32_t layer, int32_t rows, int32_t width,
                        const float *hidden, int32_t row_stride) {
  (void)layer;
  (void)rows;
  (void)width;
  (void)hidden;
  (void)row_stride;
  __atomic_fetch_add((int *)user, 1, __ATOMIC_RELAXED);
}

typedef struct toggler {
  spark_model *model;
  int stop;
} toggler;

static void *toggle_probe(void *user) {
  toggler *t = (toggler *)user;
  while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
    spark_model_set_layer_probe(t->model, count_probe, &probe_calls);
    spark_model_set_layer_probe(t->model, NULL, NULL);
  }
  return NULL;
}

static spark_model *open_model(const spark_model_def *def, const char *pack,
                               int threads, int verify) {
  char message[512] = "";
  spark_open_params params = spark_open_params_default();
  params.num_threads = threads;
  params.verify_checksums = verify;
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  spark_model *model = NULL;
  if (spark_model_open(def, pack, &params, &model) != SPARK_OK) {
    fprintf(stderr, "%s: %s\n", pack, message);
    exit(1);
  }
  return model;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s FIRST.spkw SECOND.spkw THREADS N_PREDICT\n",
            argv[0]);
    return 2;
  }
  int threads = atoi(argv[3]), n_predict = atoi(argv[4]);
  if (threads < 1 || threads > 16 || n_predict < 1 || n_predict > kMaxPredict)
    return 2;
  /* Different worker counts: each library has its own pool. */
  spark_model *models[2] = {
      open_model(spark_model_first(), argv[1], 1, SPARK_VERIFY_AT_OPEN),
      open_model(spark_model_second(), argv[2], 2, SPARK_VERIFY_AT_OPEN)};
  const char *names[2] = {"first", "second"};
  run alone[2];
  for (int m = 0; m < 2; ++m) {
    spark_model_info info;
    spark_model_get_info(models[m], &info);
    alone[m] = (run){models[m], info.vocab_size, n_predict, {0}, NULL, 0};
    alone[m].logits = malloc(sizeof(float) * (size_t)info.vocab_size);
    generate(&alone[m]);
    if (!alone[m].ok)
      return 1;
  }
  if (spark_model_first() == spark_model_second() ||
      spark_model_first()->abi_hash == spark_model_second()->abi_hash) {
    fprintf(stderr, "FAIL: the two libraries give one model\n");
    return 1;
  }

  /* THREADS sessions of each model at once, and the probe toggled. */
  int count = 2 * threads;
  run *runs = calloc((size_t)count, sizeof(run));
  pthread_t *ids = calloc((size_t)count, sizeof(pthread_t));
  toggler t = {models[0], 0};
  pthread_t toggle;
  if (pthread_create(&toggle, NULL, toggle_probe, &t) != 0)
    return 1;
  for (int i = 0; i < count; ++i) {
    runs[i] = alone[i % 2];
    runs[i].logits = malloc(sizeof(float) * (size_t)runs[i].vocab);
    if (pthread_create(&ids[i], NULL, generate, &runs[i]) != 0)
      return 1;
  }
  for (int i = 0; i < count; ++i)
    pthread_join(ids[i], NULL);
  __atomic_store_n(&t.stop, 1, __ATOMIC_RELEASE);
  pthread_join(toggle, NULL);
  int failures = 0;
  for (int i = 0; i < count; ++i) {
    const run *want = &alone[i % 2];
    if (!runs[i].ok ||
        memcmp(runs[i].ids, want->ids, sizeof(int32_t) * (size_t)n_predict) ||
        memcmp(runs[i].logits, want->logits,
               sizeof(float) * (size_t)want->vocab)) {
      fprintf(stderr, "FAIL: thread %d (%s model) differs from its run alone\n",
              i, names[i % 2]);
      ++failures;
    }
    free(runs[i].logits);
  }
  /* The second pack opened again with its checksums verified in the
   * background: THREADS sessions step at once, their first steps beside the
   * pass, and all wait for its verdict; the same tokens and logits. */
  spark_model *deferred = open_model(spark_model_second(), argv[2], 2,
                                     SPARK_VERIFY_IN_BACKGROUND);
  for (int i = 0; i < threads; ++i) {
    runs[i] = alone[1];
    runs[i].model = deferred;
    runs[i].logits = malloc(sizeof(float) * (size_t)runs[i].vocab);
    if (pthread_create(&ids[i], NULL, generate, &runs[i]) != 0)
      return 1;
  }
  for (int i = 0; i < threads; ++i) {
    pthread_join(ids[i], NULL);
    if (!runs[i].ok ||
        memcmp(runs[i].ids, alone[1].ids, sizeof(int32_t) * (size_t)n_predict) ||
        memcmp(runs[i].logits, alone[1].logits,
               sizeof(float) * (size_t)alone[1].vocab)) {
      fprintf(stderr, "FAIL: thread %d (second model, checksums in the "
                      "background) differs from its run alone\n", i);
      ++failures;
    }
    free(runs[i].logits);
  }
  spark_model_close(deferred);
  for (int m = 0; m < 2; ++m) {
    printf("%s:", names[m]);
    for (int i = 0; i < n_predict; ++i)
      printf(" %d", alone[m].ids[i]);
    printf("\n");
    free(alone[m].logits);
    spark_model_close(models[m]);
  }
  free(runs);
  free(ids);
  if (failures)
    return 1;
  printf("%d sessions in parallel agree; the probe ran %d times\n", count,
         probe_calls);
  return 0;
}
