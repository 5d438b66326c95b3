/* fuzz_pack.c - libFuzzer target: the weight pack and session snapshots as
 * the runtime reads them.
 *
 * The model is a small definition made here (three tensors, two caches, a
 * step() that reads every weight byte), so the target needs no compiled
 * model library. The first input byte chooses what the rest is:
 *   bit 0  a pack; its table and tensor checksums are repaired first, so
 *          the checks behind them are reached;
 *   bit 1  a pack, opened without checksum verification;
 *   bit 2  a snapshot, restored into a session of a valid pack.
 * What must hold: open and restore return a status and never crash; an
 * opened pack's tensors lie inside the file, aligned (step() reads them
 * all: a tensor outside the mapping faults); a restored session evaluates.
 *
 * SPARK_FUZZ_WRITE_SEEDS=DIR writes seed inputs (a valid pack in each mode,
 * a valid snapshot) into DIR and exits. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "spark/model_abi.h"
#include "spark/pack_format.h"
#include "spark/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { kVocab = 16, kHidden = 8, kContext = 8, kChunk = 4 };

static const spark_tensor_def kTensors[] = {
    {"model.embed_tokens.weight", SPARK_DTYPE_BF16, SPARK_LAYOUT_ROW_MAJOR,
     kVocab * kHidden * 2},
    {"model.norm.weight", SPARK_DTYPE_F32, SPARK_LAYOUT_ROW_MAJOR, kHidden * 4},
    {"rope.full.cos", SPARK_DTYPE_F32, SPARK_LAYOUT_TABLE, 0},
};
static const spark_cache_def kCaches[] = {
    {SPARK_CACHE_LINEAR, SPARK_DTYPE_BF16, kContext, 1, 4},
    {SPARK_CACHE_RING, SPARK_DTYPE_F32, 4, 1, 4},
};
static const spark_call_def kCalls[] = {{"embed", -1}};

static const char *no_reason(void) { return NULL; }
static const char *dispatch(void) { return "fuzz"; }
static void set_threads(int threads) { (void)threads; }
static void set_probe(spark_layer_probe probe, void *user) {
  (void)probe;
  (void)user;
}
static void set_profile(uint64_t *ns, uint64_t (*clock)(void)) {
  (void)ns;
  (void)clock;
}

static volatile unsigned sink;

static int step(const void *const *weights, void *const *caches, void *arena,
                const int32_t *ids, int32_t pos0, int32_t n, int32_t n_logits,
                float *logits) {
  unsigned sum = 0;
  for (size_t i = 0; i < sizeof(kTensors) / sizeof(kTensors[0]); ++i) {
    if ((uintptr_t)weights[i] % SPARK_PACK_ALIGNMENT != 0)
      abort(); /* the runtime promised aligned tensors */
    const unsigned char *p = weights[i];
    for (uint64_t b = 0; b < kTensors[i].bytes; ++b)
      sum += p[b];
  }
  for (int32_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= kVocab || pos0 + t >= kContext)
      abort(); /* the runtime checks both before step() */
    ((float *)caches[1])[(pos0 + t) % 4 * 4] = (float)ids[t];
  }
  memset(arena, 0, 64);
  for (int32_t r = 0; r < n_logits * kVocab; ++r)
    logits[r] = (float)(r % kVocab);
  sink = sum;
  return 0;
}

static const spark_model_def kDef = {
    SPARK_MODEL_ABI_VERSION, 0x5eed5eed5eed5eedull, 0xc0f19c0f19c0f19cull,
    "host", kVocab, kHidden, 1, kContext, kChunk, kChunk, 64,
    (int32_t)(sizeof(kTensors) / sizeof(kTensors[0])), kTensors,
    (int32_t)(sizeof(kCaches) / sizeof(kCaches[0])), kCaches, no_reason,
    dispatch, set_threads, step, dispatch, set_probe, 1, kCalls, set_profile};

/* A valid pack of kDef: header, table, each tensor at the next aligned
 * offset (filled with a pattern). Returns malloc'd bytes. */
static unsigned char *valid_pack(size_t *out_bytes) {
  int32_t n = kDef.num_tensors;
  uint64_t table = sizeof(spark_pack_header);
  uint64_t offset = SPARK_PACK_ALIGNMENT, end = offset;
  uint64_t offsets[8];
  for (int32_t i = 0; i < n; ++i) {
    offsets[i] = offset;
    end = offset + kTensors[i].bytes;
    offset = (end + SPARK_PACK_ALIGNMENT - 1) / SPARK_PACK_ALIGNMENT *
             SPARK_PACK_ALIGNMENT;
  }
  unsigned char *bytes = calloc(1, end);
  spark_pack_header *h = (spark_pack_header *)bytes;
  memcpy(h->magic, SPARK_PACK_MAGIC, 8);
  h->version = SPARK_PACK_VERSION;
  h->header_bytes = sizeof(*h);
  h->abi_hash = kDef.abi_hash;
  h->config_hash = kDef.config_hash;
  strcpy(h->target, kDef.target);
  h->tensor_count = (uint64_t)n;
  h->table_offset = table;
  h->file_bytes = end;
  spark_pack_entry *e = (spark_pack_entry *)(bytes + table);
  for (int32_t i = 0; i < n; ++i) {
    strcpy(e[i].name, kTensors[i].name);
    e[i].dtype = (uint32_t)kTensors[i].dtype;
    e[i].layout = (uint32_t)kTensors[i].layout;
    e[i].offset = offsets[i];
    e[i].bytes = kTensors[i].bytes;
    for (uint64_t b = 0; b < e[i].bytes; ++b)
      bytes[offsets[i] + b] = (unsigned char)(b * 7 + i);
    e[i].checksum = spark_checksum(bytes + offsets[i], e[i].bytes);
  }
  h->table_checksum = spark_checksum(e, (size_t)n * sizeof(*e));
  *out_bytes = end;
  return bytes;
}

/* Makes the checksums of a (fuzzed) pack right, where its header and table
 * are readable enough to find them. */
static void repair_checksums(unsigned char *bytes, size_t size) {
  if (size < sizeof(spark_pack_header))
    return;
  spark_pack_header *h = (spark_pack_header *)bytes;
  uint64_t count = h->tensor_count;
  if (h->table_offset > size || count > 64 ||
      (size - h->table_offset) / sizeof(spark_pack_entry) < count ||
      h->table_offset % 8 != 0)
    return;
  spark_pack_entry *e = (spark_pack_entry *)(bytes + h->table_offset);
  for (uint64_t i = 0; i < count; ++i)
    if (e[i].offset <= size && e[i].bytes <= size - e[i].offset)
      e[i].checksum = spark_checksum(bytes + e[i].offset, e[i].bytes);
  h->table_checksum = spark_checksum(e, count * sizeof(*e));
}

/* Opens bytes as a pack through a memory file (the runtime takes a path). */
static spark_status open_bytes(const unsigned char *bytes, size_t size,
                               int verify, spark_model **model) {
  int fd = memfd_create("pack", MFD_CLOEXEC);
  if (fd < 0 || (size && write(fd, bytes, size) != (ssize_t)size))
    abort();
  char path[64], message[512];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  spark_open_params params = spark_open_params_default();
  params.verify_checksums = verify;
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  message[0] = 0;
  spark_status status = spark_model_open(&kDef, path, &params, model);
  close(fd);
  if (status != SPARK_OK && message[0] == 0)
    abort(); /* every refusal says why */
  return status;
}

static void evaluate(spark_session *session) {
  int32_t tokens[3] = {1, 2, 3};
  int32_t room = kContext - spark_session_position(session);
  if (room > 0 &&
      spark_session_eval(session, tokens, room < 3 ? room : 3, 0, NULL) !=
          SPARK_OK)
    abort();
}

static void write_file(const char *dir, const char *name,
                       const unsigned char *bytes, size_t size) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

static void write_seeds(const char *dir) {
  size_t size;
  unsigned char *pack = valid_pack(&size);
  unsigned char *input = malloc(size + 1);
  const unsigned char modes[] = {0, 1, 2};
  const char *names[] = {"valid-pack", "valid-pack-repaired",
                         "valid-pack-unverified"};
  for (int m = 0; m < 3; ++m) {
    input[0] = modes[m];
    memcpy(input + 1, pack, size);
    write_file(dir, names[m], input, size + 1);
  }
  spark_model *model;
  spark_session *session;
  size_t snap_bytes;
  if (open_bytes(pack, size, 1, &model) != SPARK_OK ||
      spark_session_create(model, NULL, &session) != SPARK_OK)
    abort();
  evaluate(session);
  spark_session_snapshot_bytes(session, &snap_bytes);
  unsigned char *snap = malloc(snap_bytes + 1);
  snap[0] = 4;
  if (spark_session_snapshot(session, snap + 1, snap_bytes) != SPARK_OK)
    abort();
  write_file(dir, "valid-snapshot", snap, snap_bytes + 1);
  spark_session_destroy(session);
  spark_model_close(model);
  free(snap);
  free(input);
  free(pack);
  exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *dir = getenv("SPARK_FUZZ_WRITE_SEEDS");
  if (dir)
    write_seeds(dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  unsigned mode = data[0];
  const unsigned char *rest = data + 1;
  size -= 1;
  spark_model *model = NULL;
  if (mode & 4) {
    /* A snapshot, restored into a fresh session of a valid pack. */
    static unsigned char *pack;
    static size_t pack_size;
    if (!pack)
      pack = valid_pack(&pack_size);
    spark_session *session;
    if (open_bytes(pack, pack_size, 0, &model) != SPARK_OK ||
        spark_session_create(model, NULL, &session) != SPARK_OK)
      abort();
    if (spark_session_restore(session, rest, size) == SPARK_OK) {
      int32_t position = spark_session_position(session);
      if (position < 0 || position > kContext)
        abort();
      evaluate(session);
    }
    spark_session_destroy(session);
    spark_model_close(model);
    return 0;
  }
  unsigned char *copy = malloc(size ? size : 1);
  memcpy(copy, rest, size);
  if (mode & 1)
    repair_checksums(copy, size);
  if (open_bytes(copy, size, !(mode & 2), &model) == SPARK_OK) {
    spark_session *session;
    if (spark_session_create(model, NULL, &session) != SPARK_OK)
      abort();
    evaluate(session); /* step() reads every tensor byte */
    spark_session_destroy(session);
    spark_model_close(model);
  }
  free(copy);
  return 0;
}
