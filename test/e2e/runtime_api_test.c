/* runtime_api_test.c - the runtime's C API against a real compiled model.
 *
 * Built by test_e2e.py the way an application is: this C file includes
 * spark/runtime.h and the generated spark_model.h and links
 * libspark_model.a + libspark_runtime.a.
 *
 * usage: runtime_api_test OUT/model.spkw OTHER_BUILD/model.spkw SCRATCH_DIR */
#define _POSIX_C_SOURCE 200112L
#include "spark/pack_format.h"
#include "spark/runtime.h"
#include "spark_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)
#define CHECK_STATUS(expr, expected)                                           \
  do {                                                                         \
    spark_status got_ = (expr);                                                \
    if (got_ != (expected)) {                                                  \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %s\n", __FILE__,   \
              __LINE__, #expr, (int)got_, spark_status_string(got_),           \
              #expected);                                                      \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* Copies src to dst, flipping the byte at flip (if >= 0) and keeping only
 * keep bytes (if >= 0). */
static void copy_file(const char *src, const char *dst, long flip, long keep) {
  long n = file_size(src);
  unsigned char *data = malloc((size_t)n);
  FILE *f = fopen(src, "rb");
  if (fread(data, 1, (size_t)n, f) != (size_t)n)
    abort();
  fclose(f);
  if (flip >= 0)
    data[flip] ^= 0x40;
  f = fopen(dst, "wb");
  fwrite(data, 1, (size_t)(keep >= 0 ? keep : n), f);
  fclose(f);
  free(data);
}

/* Where tensor i's bytes start in the pack at path. */
static long tensor_offset(const char *path, int i) {
  spark_pack_header h;
  spark_pack_entry e;
  FILE *f = fopen(path, "rb");
  if (!f || fread(&h, sizeof h, 1, f) != 1 ||
      fseek(f, (long)(h.table_offset + (uint64_t)i * sizeof e), SEEK_SET) !=
          0 ||
      fread(&e, sizeof e, 1, f) != 1)
    abort();
  fclose(f);
  return (long)e.offset;
}

/* Copies src to dst after edit(header, table) changed it, with the table's
 * checksum recomputed, so that only the edited field is wrong. */
static void patch_pack(const char *src, const char *dst,
                       void (*edit)(spark_pack_header *, spark_pack_entry *)) {
  long n = file_size(src);
  unsigned char *data = malloc((size_t)n);
  FILE *f = fopen(src, "rb");
  if (fread(data, 1, (size_t)n, f) != (size_t)n)
    abort();
  fclose(f);
  spark_pack_header *h = (spark_pack_header *)data;
  spark_pack_entry *table = (spark_pack_entry *)(data + h->table_offset);
  uint64_t count = h->tensor_count;
  edit(h, table);
  table = (spark_pack_entry *)(data + h->table_offset);
  if (h->table_offset + count * sizeof(spark_pack_entry) <= (uint64_t)n)
    h->table_checksum = spark_checksum(table, count * sizeof(spark_pack_entry));
  f = fopen(dst, "wb");
  fwrite(data, 1, (size_t)n, f);
  fclose(f);
  free(data);
}
static void edit_header_bytes(spark_pack_header *h, spark_pack_entry *t) {
  (void)t;
  h->header_bytes += 8;
}
static void edit_misaligned(spark_pack_header *h, spark_pack_entry *t) {
  (void)h;
  t[1].offset += 64;
}
static void edit_overlap(spark_pack_header *h, spark_pack_entry *t) {
  (void)h;
  t[1].offset = t[0].offset;
}
static void edit_table_misaligned(spark_pack_header *h, spark_pack_entry *t) {
  (void)t;
  h->table_offset += 4;
}
static void edit_into_table(spark_pack_header *h, spark_pack_entry *t) {
  t[0].offset = h->table_offset / SPARK_PACK_ALIGNMENT * SPARK_PACK_ALIGNMENT;
}

static spark_status open_pack(const char *path, int verify, spark_model **m,
                              char *message, size_t message_bytes) {
  spark_open_params p = spark_open_params_default();
  p.verify_checksums = verify;
  p.num_threads = 2;
  p.error_message = message;
  p.error_message_bytes = message_bytes;
  return spark_model_open(spark_model_definition(), path, &p, m);
}

static float max_abs_diff(const float *a, const float *b, int n) {
  float d = 0;
  for (int i = 0; i < n; ++i)
    d = fmaxf(d, fabsf(a[i] - b[i]));
  return d;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PACK OTHER_PACK SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  const char *pack = argv[1], *other = argv[2], *scratch = argv[3];
  char message[512], path[1024];
  spark_model *model = NULL;

  CHECK(strlen(spark_runtime_version()) > 0);
  CHECK(strlen(spark_status_string(SPARK_ERROR_CONTEXT_FULL)) > 0);
  CHECK_STATUS(spark_model_open(NULL, pack, NULL, &model),
               SPARK_ERROR_INVALID_ARGUMENT);

  /* Failures name the file and leave no model behind. */
  snprintf(path, sizeof path, "%s/missing.spkw", scratch);
  CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
               SPARK_ERROR_IO);
  CHECK(model == NULL && strstr(message, "missing.spkw") != NULL);
  snprintf(path, sizeof path, "%s/flipped.spkw", scratch);
  copy_file(pack, path, file_size(pack) - 5, -1);
  CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
               SPARK_ERROR_BAD_PACK);
  CHECK(strstr(message, "checksum") != NULL);
  CHECK_STATUS(open_pack(path, 0, &model, message, sizeof message), SPARK_OK);
  spark_model_close(model);
  model = NULL;
  /* Verified in the background: the open succeeds, the first step fails and
   * keeps its logits, and so does every later one; the verdict names the
   * tensor. */
  CHECK_STATUS(open_pack(path, 3, &model, message, sizeof message),
               SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(message, "verify_checksums is 3") != NULL);
  CHECK_STATUS(open_pack(path, SPARK_VERIFY_IN_BACKGROUND, &model, message,
                         sizeof message),
               SPARK_OK);
  {
    spark_session *s = NULL;
    const float *logits;
    int32_t token = 1;
    CHECK_STATUS(spark_session_create(model, NULL, &s), SPARK_OK);
    CHECK_STATUS(spark_session_eval(s, &token, 1, 0, NULL),
                 SPARK_ERROR_BAD_PACK);
    CHECK_STATUS(spark_session_logits(s, &logits), SPARK_ERROR_NO_LOGITS);
    CHECK_STATUS(spark_session_decode(s, token), SPARK_ERROR_BAD_PACK);
    message[0] = 0;
    CHECK_STATUS(spark_model_wait_verified(model, message, sizeof message),
                 SPARK_ERROR_BAD_PACK);
    CHECK(strstr(message, "fails its checksum") != NULL);
    spark_session_destroy(s);
    spark_model_close(model);
    model = NULL;
  }
  /* Closed while the pass may still run: it stops, nothing leaks (ASan). */
  CHECK_STATUS(open_pack(pack, SPARK_VERIFY_IN_BACKGROUND, &model, message,
                         sizeof message),
               SPARK_OK);
  spark_model_close(model);
  model = NULL;
  /* Two damaged tensors, verified on 2 threads: the first in table order is
   * named, whichever thread finds it. */
  {
    const spark_model_def *def = spark_model_definition();
    const int last = def->num_tensors - 1;
    char once[1024];
    snprintf(once, sizeof once, "%s/once.spkw", scratch);
    copy_file(pack, once, tensor_offset(pack, last), -1);
    snprintf(path, sizeof path, "%s/two-tensors.spkw", scratch);
    copy_file(once, path, tensor_offset(pack, 1) + 3, -1);
    CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
                 SPARK_ERROR_BAD_PACK);
    char expected[512];
    snprintf(expected, sizeof expected, "tensor '%s' fails its checksum",
             def->tensors[1].name);
    CHECK(strstr(message, expected) != NULL);
    CHECK(model == NULL);
    CHECK_STATUS(open_pack(path, SPARK_VERIFY_IN_BACKGROUND, &model, message,
                           sizeof message),
                 SPARK_OK);
    message[0] = 0;
    CHECK_STATUS(spark_model_wait_verified(model, message, sizeof message),
                 SPARK_ERROR_BAD_PACK);
    CHECK(strstr(message, expected) != NULL);
    spark_model_close(model);
    model = NULL;
  }
  snprintf(path, sizeof path, "%s/truncated.spkw", scratch);
  copy_file(pack, path, -1, file_size(pack) - 4096);
  CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
               SPARK_ERROR_BAD_PACK);
  snprintf(path, sizeof path, "%s/magic.spkw", scratch);
  copy_file(pack, path, 0, -1);
  CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
               SPARK_ERROR_BAD_PACK);
  /* Not a regular file: refused at once, a FIFO included (no hang). */
  snprintf(path, sizeof path, "%s/fifo.spkw", scratch);
  CHECK(mkfifo(path, 0600) == 0);
  CHECK_STATUS(open_pack(path, 1, &model, message, sizeof message),
               SPARK_ERROR_IO);
  CHECK(strstr(message, "not a regular file (a FIFO)") != NULL);
  CHECK_STATUS(open_pack(scratch, 1, &model, message, sizeof message),
               SPARK_ERROR_IO);
  CHECK(strstr(message, "not a regular file (a directory)") != NULL);

  /* Each damaged field is named, also without checksum verification. */
  struct {
    void (*edit)(spark_pack_header *, spark_pack_entry *);
    const char *expected;
  } damage[] = {
      {edit_header_bytes, "the header says it is"},
      {edit_misaligned, "is misaligned (expected a multiple of 4096)"},
      {edit_overlap, "overlap"},
      {edit_table_misaligned, "tensor table at offset"},
      {edit_into_table, "overlaps the"},
  };
  for (size_t k = 0; k < sizeof damage / sizeof damage[0]; ++k) {
    snprintf(path, sizeof path, "%s/damaged-%zu.spkw", scratch, k);
    patch_pack(pack, path, damage[k].edit);
    message[0] = 0;
    CHECK_STATUS(open_pack(path, 0, &model, message, sizeof message),
                 SPARK_ERROR_BAD_PACK);
    if (!strstr(message, damage[k].expected)) {
      fprintf(stderr, "damage %zu: '%s' lacks '%s'\n", k, message,
              damage[k].expected);
      ++failures;
    }
    CHECK(model == NULL);
  }

  CHECK_STATUS(open_pack(other, 1, &model, message, sizeof message),
               SPARK_ERROR_PACK_MISMATCH);
  CHECK(model == NULL);

  CHECK_STATUS(open_pack(pack, 1, &model, message, sizeof message), SPARK_OK);
  if (!model) {
    fprintf(stderr, "cannot open %s: %s\n", pack, message);
    return 1;
  }
  spark_model_info info;
  CHECK_STATUS(spark_model_get_info(model, &info), SPARK_OK);
  CHECK(info.vocab_size == SPARK_MODEL_VOCAB_SIZE);
  CHECK(info.max_context == SPARK_MODEL_MAX_CONTEXT);
  CHECK(strcmp(info.target, "host") == 0);
  const int V = info.vocab_size;

  spark_session *s;
  CHECK_STATUS(spark_session_create(model, NULL, &s), SPARK_OK);
  const float *logits;
  CHECK_STATUS(spark_session_logits(s, &logits), SPARK_ERROR_NO_LOGITS);
  int32_t prompt[20];
  for (int i = 0; i < 20; ++i)
    prompt[i] = (i * 7 + 3) % V;
  CHECK_STATUS(spark_session_eval(s, prompt, 20, 0, NULL), SPARK_OK);
  CHECK(spark_session_position(s) == 20);
  float *first = malloc(sizeof(float) * (size_t)V);
  CHECK_STATUS(spark_session_logits(s, &logits), SPARK_OK);
  memcpy(first, logits, sizeof(float) * (size_t)V);
  /* An intact pack verified in the background: the same logits, verdict OK. */
  {
    spark_model *background = NULL;
    spark_session *b = NULL;
    const float *same;
    CHECK_STATUS(open_pack(pack, SPARK_VERIFY_IN_BACKGROUND, &background,
                           message, sizeof message),
                 SPARK_OK);
    CHECK_STATUS(spark_session_create(background, NULL, &b), SPARK_OK);
    CHECK_STATUS(spark_session_eval(b, prompt, 20, 0, NULL), SPARK_OK);
    CHECK_STATUS(spark_session_logits(b, &same), SPARK_OK);
    CHECK(max_abs_diff(same, first, V) == 0.0f);
    CHECK_STATUS(spark_model_wait_verified(background, NULL, 0), SPARK_OK);
    spark_session_destroy(b);
    spark_model_close(background);
  }

  /* Invalid tokens are refused and change nothing. */
  int32_t bad = V;
  CHECK_STATUS(spark_session_eval(s, &bad, 1, 0, NULL),
               SPARK_ERROR_TOKEN_OUT_OF_RANGE);
  bad = -1;
  CHECK_STATUS(spark_session_decode(s, bad), SPARK_ERROR_TOKEN_OUT_OF_RANGE);
  CHECK(spark_session_position(s) == 20);

  /* Snapshot, continue, restore, continue again: identical logits. */
  size_t snap_bytes;
  CHECK_STATUS(spark_session_snapshot_bytes(s, &snap_bytes), SPARK_OK);
  void *snap = malloc(snap_bytes);
  CHECK_STATUS(spark_session_snapshot(s, snap, snap_bytes), SPARK_OK);
  float *after = malloc(sizeof(float) * (size_t)V);
  int32_t next[3] = {1, 2, 3};
  for (int i = 0; i < 3; ++i)
    CHECK_STATUS(spark_session_decode(s, next[i]), SPARK_OK);
  spark_session_logits(s, &logits);
  memcpy(after, logits, sizeof(float) * (size_t)V);
  CHECK_STATUS(spark_session_restore(s, snap, snap_bytes), SPARK_OK);
  CHECK(spark_session_position(s) == 20);
  spark_session_logits(s, &logits);
  CHECK(max_abs_diff(logits, first, V) == 0.0f);
  for (int i = 0; i < 3; ++i)
    CHECK_STATUS(spark_session_decode(s, next[i]), SPARK_OK);
  spark_session_logits(s, &logits);
  CHECK(max_abs_diff(logits, after, V) == 0.0f);
  CHECK_STATUS(spark_session_restore(s, snap, snap_bytes - 1),
               SPARK_ERROR_INVALID_ARGUMENT);
  /* A damaged snapshot, or one of another build (its hashes), is refused
   * and leaves the session as it was. */
  {
    unsigned char *bad = malloc(snap_bytes);
    memcpy(bad, snap, snap_bytes);
    bad[snap_bytes / 2] ^= 0x10;
    CHECK_STATUS(spark_session_decode(s, 5), SPARK_OK);
    int32_t here = spark_session_position(s);
    CHECK_STATUS(spark_session_restore(s, bad, snap_bytes),
                 SPARK_ERROR_BAD_SNAPSHOT);
    CHECK(spark_session_position(s) == here);
    memcpy(bad, snap, snap_bytes);
    bad[24] ^= 1; /* the ABI hash */
    CHECK_STATUS(spark_session_restore(s, bad, snap_bytes),
                 SPARK_ERROR_PACK_MISMATCH);
    memcpy(bad, snap, snap_bytes);
    bad[0] = 'X'; /* the magic */
    CHECK_STATUS(spark_session_restore(s, bad, snap_bytes),
                 SPARK_ERROR_BAD_SNAPSHOT);
    CHECK(spark_session_position(s) == here);
    CHECK_STATUS(spark_session_restore(s, snap, snap_bytes), SPARK_OK);
    CHECK(spark_session_position(s) == 20);
    free(bad);
  }

  /* Reset forgets everything: the prompt gives the same logits again. */
  CHECK_STATUS(spark_session_reset(s), SPARK_OK);
  CHECK(spark_session_position(s) == 0);
  CHECK_STATUS(spark_session_eval(s, prompt, 20, 7, NULL), SPARK_OK);
  spark_session_logits(s, &logits);
  CHECK(max_abs_diff(logits, first, V) < 1e-4f);

  /* The context is bounded by the build's max context. */
  CHECK_STATUS(spark_session_reset(s), SPARK_OK);
  int32_t *many = calloc((size_t)info.max_context + 1, sizeof(int32_t));
  CHECK_STATUS(spark_session_eval(s, many, info.max_context + 1, 0, NULL),
               SPARK_ERROR_CONTEXT_FULL);
  CHECK(spark_session_position(s) == 0);
  CHECK_STATUS(spark_session_eval(s, many, info.max_context, 0, NULL),
               SPARK_OK);
  CHECK_STATUS(spark_session_decode(s, 0), SPARK_ERROR_CONTEXT_FULL);
  free(many);

  /* Caches the application allocates itself. */
  void *caches[256];
  CHECK(info.num_caches <= 256);
  for (int i = 0; i < info.num_caches; ++i) {
    size_t bytes;
    CHECK_STATUS(spark_cache_bytes(model, i, &bytes), SPARK_OK);
    CHECK(posix_memalign(&caches[i], 64, bytes) == 0);
  }
  spark_session *own;
  CHECK_STATUS(spark_session_create(model, caches, &own), SPARK_OK);
  CHECK_STATUS(spark_session_eval(own, prompt, 20, 0, NULL), SPARK_OK);
  spark_session_logits(own, &logits);
  CHECK(max_abs_diff(logits, first, V) == 0.0f);
  void *cache0;
  CHECK_STATUS(spark_session_cache(own, 0, &cache0), SPARK_OK);
  CHECK(cache0 == caches[0]);
  spark_session_destroy(own);
  for (int i = 0; i < info.num_caches; ++i)
    free(caches[i]);

  /* Sampling: greedy is the argmax; a seed makes sampling repeatable. */
  int best = 0;
  for (int i = 1; i < V; ++i)
    if (first[i] > first[best])
      best = i;
  spark_sampler_params sp = spark_sampler_params_default();
  spark_sampler *greedy;
  CHECK_STATUS(spark_sampler_create(&sp, V, &greedy), SPARK_OK);
  int32_t token = -1;
  CHECK_STATUS(spark_sampler_sample(greedy, first, &token), SPARK_OK);
  CHECK(token == best);
  spark_sampler_destroy(greedy);
  sp.temperature = 1.5f;
  sp.top_k = 1;
  spark_sampler *topk;
  CHECK_STATUS(spark_sampler_create(&sp, V, &topk), SPARK_OK);
  CHECK_STATUS(spark_sampler_sample(topk, first, &token), SPARK_OK);
  CHECK(token == best);
  spark_sampler_destroy(topk);
  sp.top_k = 0;
  sp.top_p = 0.9f;
  sp.seed = 1234;
  int32_t run1[16], run2[16];
  int distinct = 0;
  for (int r = 0; r < 2; ++r) {
    spark_sampler *sampler;
    CHECK_STATUS(spark_sampler_create(&sp, V, &sampler), SPARK_OK);
    for (int i = 0; i < 16; ++i)
      spark_sampler_sample(sampler, first, r ? &run2[i] : &run1[i]);
    spark_sampler_destroy(sampler);
  }
  for (int i = 0; i < 16; ++i) {
    CHECK(run1[i] == run2[i]);
    CHECK(run1[i] >= 0 && run1[i] < V);
    distinct += run1[i] != run1[0];
  }
  CHECK(distinct > 0); /* temperature 1.5 over a varied distribution */

  /* Broken inputs are errors, masked (-inf) logits are not. */
  {
    spark_sampler_params bad = spark_sampler_params_default();
    spark_sampler *sampler = NULL;
    bad.temperature = NAN;
    CHECK_STATUS(spark_sampler_create(&bad, V, &sampler),
                 SPARK_ERROR_INVALID_ARGUMENT);
    bad = spark_sampler_params_default();
    bad.top_p = NAN;
    CHECK_STATUS(spark_sampler_create(&bad, V, &sampler),
                 SPARK_ERROR_INVALID_ARGUMENT);
    bad = spark_sampler_params_default();
    bad.temperature = INFINITY;
    CHECK_STATUS(spark_sampler_create(&bad, V, &sampler),
                 SPARK_ERROR_INVALID_ARGUMENT);
    CHECK(sampler == NULL);
    float *row = malloc(sizeof(float) * (size_t)V);
    for (int temperature = 0; temperature < 2; ++temperature) {
      spark_sampler_params p = spark_sampler_params_default();
      p.temperature = temperature ? 0.8f : 0.0f;
      CHECK_STATUS(spark_sampler_create(&p, V, &sampler), SPARK_OK);
      for (int i = 0; i < V; ++i)
        row[i] = -INFINITY;
      CHECK_STATUS(spark_sampler_sample(sampler, row, &token),
                   SPARK_ERROR_INVALID_ARGUMENT); /* all masked */
      row[V - 1] = 0.5f;
      token = -1;
      CHECK_STATUS(spark_sampler_sample(sampler, row, &token), SPARK_OK);
      CHECK(token == V - 1); /* the one token the mask leaves */
      row[3] = NAN;
      CHECK_STATUS(spark_sampler_sample(sampler, row, &token),
                   SPARK_ERROR_INVALID_ARGUMENT);
      row[3] = INFINITY;
      CHECK_STATUS(spark_sampler_sample(sampler, row, &token),
                   SPARK_ERROR_INVALID_ARGUMENT);
      spark_sampler_destroy(sampler);
    }
    free(row);
  }

  spark_session_destroy(s);
  spark_model_close(model);
  free(first);
  free(after);
  free(snap);
  if (failures)
    fprintf(stderr, "%d checks failed\n", failures);
  else
    printf("runtime API: all checks passed\n");
  return failures ? 1 : 0;
}
