/* runtime.c - the thin spark runtime: pack loading, sessions, sampling. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "spark/runtime.h"
#include "spark/pack_format.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include "checksum_x86.h"
#endif

/* Checksums are verified on several threads where the C library has them
 * (not the freestanding Hexagon build). */
#if defined(__has_include)
#if __has_include(<pthread.h>)
#include <pthread.h>
#define SPARK_VERIFY_THREADS 1
#endif
#endif

/* The pack's layout as docs/pack-format.md gives it, on every target. */
_Static_assert(sizeof(spark_pack_header) == 96, "spark_pack_header changed");
_Static_assert(sizeof(spark_pack_entry) == 168, "spark_pack_entry changed");

typedef struct verify_job verify_job;

struct spark_model {
  const spark_model_def *def;
  void *map;
  size_t map_bytes;
  const void **weights; /* def->num_tensors pointers into map */
  /* SPARK_VERIFY_IN_BACKGROUND: the checksum pass still running (NULL once
   * it has been waited for), and its verdict: SPARK_OK, or
   * SPARK_ERROR_BAD_PACK with the first failing tensor in bad_tensor. */
  verify_job *background;
  spark_status verified;
  int32_t bad_tensor;
  char *pack_path; /* for the verdict's message */
#ifdef SPARK_VERIFY_THREADS
  pthread_t verifier;
  pthread_mutex_t verify_lock;
  int has_verify_lock;
#endif
};

struct spark_session {
  spark_model *model;
  void **caches;
  void *cache_block; /* the caches the session allocated, one block */
  void *arena;
  size_t arena_mapped; /* bytes of the arena's own mapping; 0: allocated */
  float *logits;       /* [logits_rows][vocab] */
  int32_t position;
  int32_t has_logits;
  int32_t last_row; /* row of logits holding the last token */
};

/* A sampler's tokens are kept in buckets of probability: the top 12 bits
 * of a probability's float bits (sign 0, the 8 exponent bits, 4 of the
 * mantissa). The bit patterns of non-negative floats order as their values
 * do, so every probability of a bucket is larger than every one of a lower
 * bucket, and the tokens in descending probability are the buckets from
 * the highest down, each sorted on its own. */
enum { kSamplerBucketShift = 19, kSamplerBuckets = 1 << (31 - 19) };

typedef struct sampler_bucket {
  int32_t count, start; /* its tokens: order[start, start + count) */
  int32_t next;         /* while the tokens are placed */
  int32_t sorted;
  double mass;
} sampler_bucket;

struct spark_sampler {
  spark_sampler_params params;
  int32_t vocab;
  uint64_t state;
  float *probs;
  int32_t *order;
  int32_t *scratch;
  sampler_bucket *buckets; /* [kSamplerBuckets] */
};

const char *spark_status_string(spark_status status) {
  switch (status) {
  case SPARK_OK:
    return "ok";
  case SPARK_ERROR_INVALID_ARGUMENT:
    return "invalid argument";
  case SPARK_ERROR_IO:
    return "cannot read the weight pack";
  case SPARK_ERROR_BAD_PACK:
    return "the weight pack is damaged";
  case SPARK_ERROR_PACK_MISMATCH:
    return "the weight pack belongs to another model, target or ABI";
  case SPARK_ERROR_UNSUPPORTED_CPU:
    return "this CPU cannot run the model library";
  case SPARK_ERROR_TOKEN_OUT_OF_RANGE:
    return "token id outside the vocabulary";
  case SPARK_ERROR_CONTEXT_FULL:
    return "the session's context is full";
  case SPARK_ERROR_OUT_OF_MEMORY:
    return "out of memory";
  case SPARK_ERROR_KERNEL:
    return "a kernel failed";
  case SPARK_ERROR_NO_LOGITS:
    return "no token evaluated yet";
  case SPARK_ERROR_BAD_SNAPSHOT:
    return "not a snapshot of this build's sessions, or damaged";
  }
  return "unknown status";
}

const char *spark_runtime_version(void) { return "0.1.0"; }

spark_open_params spark_open_params_default(void) {
  spark_open_params p;
  memset(&p, 0, sizeof(p));
  p.verify_checksums = 1;
  return p;
}

static spark_status fail(const spark_open_params *params, spark_status status,
                         const char *format, ...) {
  if (params && params->error_message && params->error_message_bytes) {
    va_list args;
    va_start(args, format);
    vsnprintf(params->error_message, params->error_message_bytes, format, args);
    va_end(args);
  }
  return status;
}

/* 64-byte aligned memory, zeroed when `zero`. Caches and the logits are
 * not: every slot and row is written before it is read, so their pages are
 * only touched (and only count in the resident set) once a step uses them,
 * and a session is ready without writing the whole context's caches. */
static void *aligned_alloc64(size_t bytes, int zero) {
  void *p = NULL;
  if (bytes == 0)
    bytes = 64;
  if (posix_memalign(&p, 64, (bytes + 63) & ~(size_t)63) != 0)
    return NULL;
  if (zero)
    memset(p, 0, bytes);
  return p;
}

/* The arena, zeroed, 64-byte aligned. From 64 KiB up a mapping of its own
 * (*mapped: its length), whose pages the kernel gives zeroed when a step
 * first writes them: the arena is sized for the largest chunk, and a decode
 * step touches a few of its rows. Writing zeros here faulted in every page
 * at session creation: the 1.7b's 6.8 MB arena took 19-27 ms of a 2-core
 * VM's open-to-ready (each first touch of anonymous memory is a fault the
 * host serves). */
static void *zeroed_block_alloc(size_t bytes, size_t *mapped) {
  *mapped = 0;
#ifdef MAP_ANONYMOUS
  if (bytes >= ((size_t)64 << 10)) {
    const size_t length = (bytes + 4095) & ~(size_t)4095;
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return NULL;
    *mapped = length;
    return p;
  }
#endif
  return aligned_alloc64(bytes, 1);
}

/* The block of a session's own caches, 64-byte aligned like every cache.
 * From 2 MiB up it is 2 MiB aligned and advised into transparent huge pages:
 * a decode step reads each cache as one stream per thread, and the CPU's
 * prefetchers stop at every page boundary (1.7b, a full layer's bf16 cache
 * of 32704 positions, one Zen 5 thread: 18 GB/s in 4 KiB pages, 26-28 GB/s
 * in 2 MiB pages, against a 30 GB/s stream). Pages are still only taken
 * when a step first writes them, 2 MiB at a time. */
static void *cache_block_alloc(size_t bytes) {
#ifdef MADV_HUGEPAGE
  const size_t huge = (size_t)2 << 20;
  if (bytes >= huge) {
    void *p = NULL;
    bytes = (bytes + huge - 1) & ~(huge - 1);
    if (posix_memalign(&p, huge, bytes) != 0)
      return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
  }
#endif
  return aligned_alloc64(bytes, 0);
}

/* A block's digest on the widest vectors this x86 CPU has
 * (checksum_x86.h); other targets take the portable function. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static uint64_t (*block_digest(void))(const void *, size_t, uint64_t) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return spark_checksum_block_avx512;
  if (__builtin_cpu_supports("avx2"))
    return spark_checksum_block_avx2;
  return spark_checksum_block;
}
#else
static uint64_t (*block_digest(void))(const void *, size_t, uint64_t) {
  return spark_checksum_block;
}
#endif

/* Verifies the checksums of the pack's tensors, block by block: each thread
 * takes the next block not yet taken (of any tensor: a large tensor is
 * shared too) and adds its digest to its tensor's sum. */
struct verify_job {
  const unsigned char *base;
  const spark_pack_entry *table;
  int32_t count;
  uint64_t *first_block; /* [count + 1]: tensor i's blocks start */
  uint64_t *digests;     /* [count]: the sums of their digests */
  uint64_t next;         /* the next block to take */
  uint64_t (*digest)(const void *, size_t, uint64_t);
  int stop; /* set by spark_model_close: the blocks left are not read */
};

static void *verify_blocks(void *user) {
  verify_job *job = (verify_job *)user;
  const uint64_t blocks = job->first_block[job->count];
  int32_t t = 0; /* blocks are taken in order: the tensor only moves on */
  for (;;) {
    const uint64_t b = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
    if (b >= blocks || __atomic_load_n(&job->stop, __ATOMIC_RELAXED))
      return NULL;
    while (job->first_block[t + 1] <= b)
      ++t;
    const spark_pack_entry *e = &job->table[t];
    const uint64_t index = b - job->first_block[t],
                   at = index * SPARK_CHECKSUM_BLOCK;
    const size_t n = e->bytes - at < SPARK_CHECKSUM_BLOCK
                         ? (size_t)(e->bytes - at)
                         : SPARK_CHECKSUM_BLOCK;
#ifdef MADV_POPULATE_READ
    /* The block's page table entries in one call, not a fault per 64 KiB
     * (blocks start at multiples of 4096; an error only means faults). */
    madvise((void *)(job->base + e->offset + at), n, MADV_POPULATE_READ);
#endif
    __atomic_fetch_add(&job->digests[t],
                       job->digest(job->base + e->offset + at, n, index),
                       __ATOMIC_RELAXED);
  }
}

/* A checksum pass over the count tensors of table, not yet started; NULL
 * when out of memory. */
static verify_job *verify_job_create(const unsigned char *base,
                                     const spark_pack_entry *table,
                                     int32_t count) {
  verify_job *job = (verify_job *)calloc(1, sizeof(verify_job));
  uint64_t *first_block = (uint64_t *)malloc(sizeof(uint64_t) * (count + 1));
  uint64_t *digests = (uint64_t *)calloc(count > 0 ? count : 1, 8);
  if (!job || !first_block || !digests) {
    free(job);
    free(first_block);
    free(digests);
    return NULL;
  }
  first_block[0] = 0;
  for (int32_t i = 0; i < count; ++i)
    first_block[i + 1] =
        first_block[i] +
        (table[i].bytes + SPARK_CHECKSUM_BLOCK - 1) / SPARK_CHECKSUM_BLOCK;
  job->base = base;
  job->table = table;
  job->count = count;
  job->first_block = first_block;
  job->digests = digests;
  job->digest = block_digest();
  return job;
}

/* The index of the first tensor whose bytes failed their checksum in a
 * finished pass, count when none did; frees the job. */
static int32_t verify_job_finish(verify_job *job) {
  int32_t bad = job->count;
  for (int32_t i = 0; i < job->count && bad == job->count; ++i)
    if (spark_checksum_of_digests(job->digests[i], job->table[i].bytes) !=
        job->table[i].checksum)
      bad = i;
  free(job->first_block);
  free(job->digests);
  free(job);
  return bad;
}

/* Runs a pass on one thread per core (the caller's included), whatever the
 * kernels' thread count: a pass of tens of milliseconds that memory bounds,
 * which every core shortens. */
static void *verify_on_every_core(void *user) {
  verify_job *job = (verify_job *)user;
#ifdef SPARK_VERIFY_THREADS
  enum { kMaxThreads = 16 };
  pthread_t helpers[kMaxThreads];
  int started = 0;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores > 0 ? (int)cores : 1;
  if (threads > kMaxThreads)
    threads = kMaxThreads;
  while (started < threads - 1 &&
         pthread_create(&helpers[started], NULL, verify_blocks, job) == 0)
    ++started;
  verify_blocks(job);
  for (int i = 0; i < started; ++i)
    pthread_join(helpers[i], NULL);
#else
  verify_blocks(job);
#endif
  return NULL;
}

/* The index of the first tensor whose bytes fail their checksum, count when
 * none does, or -1 when out of memory. */
static int32_t first_bad_tensor(const unsigned char *base,
                                const spark_pack_entry *table, int32_t count) {
  verify_job *job = verify_job_create(base, table, count);
  if (!job)
    return -1;
  verify_on_every_core(job);
  return verify_job_finish(job);
}

/* SPARK_VERIFY_IN_BACKGROUND: starts the pass on a thread of its own, which
 * shares it with one helper per further core (the first step waits for the
 * verdict: one thread alone gave it 62-93 ms after the open of a 1.59 GiB
 * pack on a 2-core VM); returns 0, or -1 when it cannot (the caller
 * verifies at open instead). */
static int verify_in_background(spark_model *model,
                                const spark_pack_entry *table,
                                const char *pack_path) {
#ifdef SPARK_VERIFY_THREADS
  const size_t length = strlen(pack_path) + 1;
  if (!(model->pack_path = (char *)malloc(length)))
    return -1;
  memcpy(model->pack_path, pack_path, length);
  verify_job *job = verify_job_create((const unsigned char *)model->map, table,
                                      model->def->num_tensors);
  if (!job)
    return -1;
  if (pthread_mutex_init(&model->verify_lock, NULL) != 0) {
    verify_job_finish(job);
    return -1;
  }
  if (pthread_create(&model->verifier, NULL, verify_on_every_core, job) != 0) {
    pthread_mutex_destroy(&model->verify_lock);
    verify_job_finish(job);
    return -1;
  }
  model->has_verify_lock = 1;
  model->background = job;
  return 0;
#else
  (void)model;
  (void)table;
  (void)pack_path;
  return -1;
#endif
}

/* The verdict of the model's checksums, waiting for a background pass
 * (once; later calls only read it). `stop`: abandon the blocks not yet
 * read (spark_model_close). */
static spark_status await_verification(spark_model *model, int stop) {
#ifdef SPARK_VERIFY_THREADS
  if (!__atomic_load_n(&model->background, __ATOMIC_ACQUIRE))
    return model->verified;
  pthread_mutex_lock(&model->verify_lock);
  verify_job *job = model->background;
  if (job) {
    if (stop)
      __atomic_store_n(&job->stop, 1, __ATOMIC_RELAXED);
    pthread_join(model->verifier, NULL);
    const int32_t bad = verify_job_finish(job);
    model->bad_tensor = bad;
    model->verified = stop || bad == model->def->num_tensors
                          ? SPARK_OK
                          : SPARK_ERROR_BAD_PACK;
    __atomic_store_n(&model->background, NULL, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&model->verify_lock);
#else
  (void)stop;
#endif
  return model->verified;
}

spark_status spark_model_wait_verified(spark_model *model, char *message,
                                       size_t message_bytes) {
  if (!model)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_status status = await_verification(model, 0);
  if (status != SPARK_OK && message && message_bytes)
    snprintf(message, message_bytes, "%s: tensor '%s' fails its checksum",
             model->pack_path ? model->pack_path : "the weight pack",
             model->def->tensors[model->bad_tensor].name);
  return status;
}

static size_t dtype_bytes(spark_dtype dtype) {
  return dtype == SPARK_DTYPE_F32 ? 4 : 2;
}

spark_status spark_model_open(const spark_model_def *def, const char *pack_path,
                              const spark_open_params *params,
                              spark_model **out_model) {
  spark_open_params defaults = spark_open_params_default();
  if (!params)
    params = &defaults;
  if (!def || !pack_path || !out_model)
    return fail(params, SPARK_ERROR_INVALID_ARGUMENT,
                "spark_model_open: def, pack_path and out_model must be set");
  *out_model = NULL;
  if (def->abi_version != SPARK_MODEL_ABI_VERSION)
    return fail(params, SPARK_ERROR_PACK_MISMATCH,
                "model library ABI version %u, runtime expects %u",
                def->abi_version, SPARK_MODEL_ABI_VERSION);
  if (params->verify_checksums < SPARK_VERIFY_NONE ||
      params->verify_checksums > SPARK_VERIFY_IN_BACKGROUND)
    return fail(params, SPARK_ERROR_INVALID_ARGUMENT,
                "spark_model_open: verify_checksums is %d; expected "
                "SPARK_VERIFY_NONE (0), _AT_OPEN (1) or _IN_BACKGROUND (2)",
                params->verify_checksums);
  const char *why = def->unsupported_reason();
  if (why)
    return fail(params, SPARK_ERROR_UNSUPPORTED_CPU, "%s", why);

  /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
  int fd = open(pack_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return fail(params, SPARK_ERROR_IO, "%s: %s", pack_path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return fail(params, SPARK_ERROR_IO, "%s: %s", pack_path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fail(params, SPARK_ERROR_IO,
                "%s: not a regular file (%s); expected the weight pack "
                "(model.spkw)",
                pack_path,
                S_ISDIR(st.st_mode)                          ? "a directory"
                : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                             : "not a file");
  }
  if (st.st_size < (off_t)sizeof(spark_pack_header)) {
    close(fd);
    return fail(params, SPARK_ERROR_BAD_PACK,
                "%s: too short for a weight pack header", pack_path);
  }
  size_t bytes = (size_t)st.st_size;
  void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return fail(params, SPARK_ERROR_IO, "%s: mmap: %s", pack_path,
                strerror(errno));
#ifdef MADV_HUGEPAGE
  madvise(map, bytes, MADV_HUGEPAGE);
#endif

  spark_model *model = calloc(1, sizeof(*model));
  const void **weights = calloc((size_t)def->num_tensors + 1, sizeof(void *));
  if (!model || !weights) {
    free(model);
    free(weights);
    munmap(map, bytes);
    return fail(params, SPARK_ERROR_OUT_OF_MEMORY, "out of memory");
  }
  model->def = def;
  model->map = map;
  model->map_bytes = bytes;
  model->weights = weights;

  spark_status status = SPARK_OK;
  const spark_pack_header *h = (const spark_pack_header *)map;
  const unsigned char *base = (const unsigned char *)map;
#define REJECT(code, ...)                                                      \
  do {                                                                         \
    status = fail(params, code, __VA_ARGS__);                                  \
    goto done;                                                                 \
  } while (0)
  if (memcmp(h->magic, SPARK_PACK_MAGIC, 8) != 0)
    REJECT(SPARK_ERROR_BAD_PACK, "%s: not a spark weight pack (bad magic)",
           pack_path);
  if (h->version != SPARK_PACK_VERSION)
    REJECT(SPARK_ERROR_BAD_PACK, "%s: pack format version %u, expected %u",
           pack_path, h->version, SPARK_PACK_VERSION);
  if (h->header_bytes != sizeof(spark_pack_header))
    REJECT(SPARK_ERROR_BAD_PACK,
           "%s: the header says it is %u bytes; format "
           "version %u headers are %zu bytes",
           pack_path, h->header_bytes, SPARK_PACK_VERSION,
           sizeof(spark_pack_header));
  if (h->file_bytes != bytes)
    REJECT(SPARK_ERROR_BAD_PACK,
           "%s: file is %zu bytes, header says %llu "
           "(truncated or appended to)",
           pack_path, bytes, (unsigned long long)h->file_bytes);
  if (memchr(h->target, 0, sizeof(h->target)) == NULL ||
      strcmp(h->target, def->target) != 0)
    REJECT(SPARK_ERROR_PACK_MISMATCH,
           "%s: pack built for target '%.32s', "
           "library for '%s'",
           pack_path, h->target, def->target);
  if (h->abi_hash != def->abi_hash)
    REJECT(SPARK_ERROR_PACK_MISMATCH,
           "%s: pack ABI hash %016llx differs from "
           "the library's %016llx (built by another compile)",
           pack_path, (unsigned long long)h->abi_hash,
           (unsigned long long)def->abi_hash);
  if (h->config_hash != def->config_hash)
    REJECT(SPARK_ERROR_PACK_MISMATCH, "%s: pack is for another model config",
           pack_path);
  if (h->tensor_count != (uint64_t)def->num_tensors ||
      h->table_offset > bytes ||
      (bytes - h->table_offset) / sizeof(spark_pack_entry) < h->tensor_count)
    REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor table does not fit the file",
           pack_path);
  if (h->table_offset % 8 != 0)
    REJECT(SPARK_ERROR_BAD_PACK,
           "%s: tensor table at offset %llu is "
           "misaligned (expected a multiple of 8)",
           pack_path, (unsigned long long)h->table_offset);
  if (h->table_offset < sizeof(spark_pack_header))
    REJECT(SPARK_ERROR_BAD_PACK,
           "%s: tensor table at offset %llu overlaps "
           "the header",
           pack_path, (unsigned long long)h->table_offset);
  const spark_pack_entry *table =
      (const spark_pack_entry *)(base + h->table_offset);
  if (spark_checksum(table, h->tensor_count * sizeof(spark_pack_entry)) !=
      h->table_checksum)
    REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor table checksum mismatch",
           pack_path);
  for (int32_t i = 0; i < def->num_tensors; ++i) {
    const spark_pack_entry *e = &table[i];
    const spark_tensor_def *t = &def->tensors[i];
    if (memchr(e->name, 0, sizeof(e->name)) == NULL ||
        strcmp(e->name, t->name) != 0 || e->dtype != (uint32_t)t->dtype ||
        e->layout != (uint32_t)t->layout || e->bytes != t->bytes)
      REJECT(SPARK_ERROR_PACK_MISMATCH,
             "%s: tensor %d is '%.96s' (dtype %u, layout %u, %llu bytes), "
             "the library expects '%s' (dtype %d, layout %d, %llu bytes)",
             pack_path, i, e->name, (unsigned)e->dtype, (unsigned)e->layout,
             (unsigned long long)e->bytes, t->name, (int)t->dtype,
             (int)t->layout, (unsigned long long)t->bytes);
    if (e->offset > bytes || e->bytes > bytes - e->offset)
      REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor '%s' lies outside the file",
             pack_path, t->name);
    if (e->offset % SPARK_PACK_ALIGNMENT != 0)
      REJECT(SPARK_ERROR_BAD_PACK,
             "%s: tensor '%s' at offset %llu is "
             "misaligned (expected a multiple of %u)",
             pack_path, t->name, (unsigned long long)e->offset,
             SPARK_PACK_ALIGNMENT);
    uint64_t table_end =
        h->table_offset + h->tensor_count * sizeof(spark_pack_entry);
    if (e->bytes && e->offset < table_end &&
        e->offset + e->bytes > h->table_offset)
      REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor '%s' overlaps the %s", pack_path,
             t->name,
             e->offset < sizeof(spark_pack_header) ? "header" : "tensor table");
    if (e->bytes && e->offset < sizeof(spark_pack_header))
      REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor '%s' overlaps the header",
             pack_path, t->name);
    weights[i] = base + e->offset;
  }
  /* No two tensors share bytes (cheap: the table is ordered by offset as
   * written; any other order is sorted first). */
  {
    int32_t n = def->num_tensors;
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!order)
      REJECT(SPARK_ERROR_OUT_OF_MEMORY, "out of memory");
    for (int32_t i = 0; i < n; ++i)
      order[i] = i;
    for (int32_t i = 1; i < n; ++i) { /* insertion sort: sorted already */
      int32_t k = order[i], j = i - 1;
      while (j >= 0 && table[order[j]].offset > table[k].offset) {
        order[j + 1] = order[j];
        --j;
      }
      order[j + 1] = k;
    }
    int32_t clash = -1;
    for (int32_t i = 1; i < n && clash < 0; ++i) {
      const spark_pack_entry *a = &table[order[i - 1]], *b = &table[order[i]];
      if (a->bytes && b->bytes && a->offset + a->bytes > b->offset)
        clash = i;
    }
    int32_t first = clash >= 0 ? order[clash - 1] : 0,
            second = clash >= 0 ? order[clash] : 0;
    free(order);
    if (clash >= 0)
      REJECT(SPARK_ERROR_BAD_PACK, "%s: tensors '%s' and '%s' overlap",
             pack_path, def->tensors[first].name, def->tensors[second].name);
  }
  if (params->verify_checksums == SPARK_VERIFY_IN_BACKGROUND &&
      verify_in_background(model, table, pack_path) == 0) {
    /* the sessions' first step waits for the verdict */
  } else if (params->verify_checksums) {
    int32_t bad = first_bad_tensor(base, table, def->num_tensors);
    if (bad < 0)
      REJECT(SPARK_ERROR_OUT_OF_MEMORY, "%s: no memory to verify the checksums",
             pack_path);
    if (bad < def->num_tensors)
      REJECT(SPARK_ERROR_BAD_PACK, "%s: tensor '%s' fails its checksum",
             pack_path, def->tensors[bad].name);
  }
#undef REJECT
  if (params->num_threads > 0)
    def->set_num_threads(params->num_threads);
done:
  if (status != SPARK_OK) {
    spark_model_close(model);
    return status;
  }
  *out_model = model;
  return SPARK_OK;
}

void spark_model_close(spark_model *model) {
  if (!model)
    return;
  if (model->background)
    await_verification(model, 1);
#ifdef SPARK_VERIFY_THREADS
  if (model->has_verify_lock)
    pthread_mutex_destroy(&model->verify_lock);
#endif
  if (model->map)
    munmap(model->map, model->map_bytes);
  free(model->weights);
  free(model->pack_path);
  free(model);
}

spark_status spark_model_get_info(const spark_model *model,
                                  spark_model_info *out_info) {
  if (!model || !out_info)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_model_def *d = model->def;
  out_info->vocab_size = d->vocab_size;
  out_info->num_layers = d->num_layers;
  out_info->max_context = d->max_context;
  out_info->max_chunk = d->max_chunk;
  out_info->num_caches = d->num_caches;
  out_info->arena_bytes = d->arena_bytes;
  out_info->pack_bytes = model->map_bytes;
  out_info->target = d->target;
  out_info->dispatch = d->dispatch_name();
  out_info->dispatch_reason = d->dispatch_reason();
  return SPARK_OK;
}

spark_status spark_model_set_layer_probe(spark_model *model,
                                         spark_layer_probe probe, void *user) {
  if (!model)
    return SPARK_ERROR_INVALID_ARGUMENT;
  /* A probe sees a step's activations: none from unverified weights. */
  if (probe && await_verification(model, 0) != SPARK_OK)
    return SPARK_ERROR_BAD_PACK;
  model->def->set_layer_probe(probe, user);
  return SPARK_OK;
}

spark_status spark_model_get_calls(const spark_model *model,
                                   int32_t *out_num_calls,
                                   const spark_call_def **out_calls) {
  if (!model || !out_num_calls || !out_calls)
    return SPARK_ERROR_INVALID_ARGUMENT;
  *out_num_calls = model->def->num_calls;
  *out_calls = model->def->calls;
  return SPARK_OK;
}

spark_status spark_model_set_profile(spark_model *model, uint64_t *ns_per_call,
                                     uint64_t (*clock_ns)(void)) {
  if (!model || (ns_per_call && !clock_ns))
    return SPARK_ERROR_INVALID_ARGUMENT;
  model->def->set_profile(ns_per_call, clock_ns);
  return SPARK_OK;
}

spark_status spark_cache_bytes(const spark_model *model, int32_t index,
                               size_t *out_bytes) {
  if (!model || !out_bytes || index < 0 || index >= model->def->num_caches)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_cache_def *c = &model->def->caches[index];
  *out_bytes =
      (size_t)c->slots * c->kv_heads * c->head_dim * dtype_bytes(c->dtype);
  return SPARK_OK;
}

spark_status spark_session_create(spark_model *model,
                                  void *const *cache_buffers,
                                  spark_session **out_session) {
  if (!model || !out_session)
    return SPARK_ERROR_INVALID_ARGUMENT;
  *out_session = NULL;
  const spark_model_def *d = model->def;
  spark_session *s = calloc(1, sizeof(*s));
  if (!s)
    return SPARK_ERROR_OUT_OF_MEMORY;
  s->model = model;
  s->caches = calloc((size_t)d->num_caches + 1, sizeof(void *));
  s->arena = zeroed_block_alloc(d->arena_bytes, &s->arena_mapped);
  s->logits = aligned_alloc64(
      (size_t)d->logits_rows * d->vocab_size * sizeof(float), 0);
  spark_status status = (s->caches && s->arena && s->logits)
                            ? SPARK_OK
                            : SPARK_ERROR_OUT_OF_MEMORY;
  if (status == SPARK_OK && cache_buffers) {
    for (int32_t i = 0; i < d->num_caches; ++i) {
      if (!cache_buffers[i] || ((uintptr_t)cache_buffers[i] & 63) != 0)
        status = SPARK_ERROR_INVALID_ARGUMENT;
      s->caches[i] = cache_buffers[i];
    }
  } else if (status == SPARK_OK) {
    /* one block, each cache at a multiple of 4 KiB: s->caches[i] holds
     * cache i's offset until the block is taken */
    size_t total = 0;
    for (int32_t i = 0; i < d->num_caches; ++i) {
      size_t bytes;
      spark_cache_bytes(model, i, &bytes);
      s->caches[i] = (void *)(uintptr_t)total;
      total += (bytes + 4095) & ~(size_t)4095;
    }
    s->cache_block = cache_block_alloc(total);
    if (!s->cache_block)
      status = SPARK_ERROR_OUT_OF_MEMORY;
    for (int32_t i = 0; status == SPARK_OK && i < d->num_caches; ++i)
      s->caches[i] = (char *)s->cache_block + (uintptr_t)s->caches[i];
  }
  if (status != SPARK_OK) {
    spark_session_destroy(s);
    return status;
  }
  *out_session = s;
  return SPARK_OK;
}

void spark_session_destroy(spark_session *session) {
  if (!session)
    return;
  free(session->cache_block);
  free(session->caches);
  if (session->arena_mapped)
    munmap(session->arena, session->arena_mapped);
  else
    free(session->arena);
  free(session->logits);
  free(session);
}

spark_status spark_session_reset(spark_session *session) {
  if (!session)
    return SPARK_ERROR_INVALID_ARGUMENT;
  session->position = 0;
  session->has_logits = 0;
  return SPARK_OK;
}

int32_t spark_session_position(const spark_session *session) {
  return session ? session->position : 0;
}

spark_status spark_session_cache(spark_session *session, int32_t index,
                                 void **out_data) {
  if (!session || !out_data || index < 0 ||
      index >= session->model->def->num_caches)
    return SPARK_ERROR_INVALID_ARGUMENT;
  *out_data = session->caches[index];
  return SPARK_OK;
}

/* A snapshot: this header, then the last logits and every cache. The
 * hashes tie it to one build; the checksum covers everything after the
 * header. */
typedef struct snapshot_header {
  char magic[8]; /* "SPKWSNAP" */
  uint32_t version;
  int32_t position;
  int32_t has_logits;
  uint32_t reserved;
  uint64_t abi_hash, config_hash;
  uint64_t payload_bytes, payload_checksum;
} snapshot_header;
#define SNAPSHOT_MAGIC "SPKWSNAP"
#define SNAPSHOT_VERSION 2u /* 2: the block checksum of pack version 2 */

spark_status spark_session_snapshot_bytes(const spark_session *session,
                                          size_t *out_bytes) {
  if (!session || !out_bytes)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_model_def *d = session->model->def;
  size_t total =
      sizeof(snapshot_header) + (size_t)d->vocab_size * sizeof(float);
  for (int32_t i = 0; i < d->num_caches; ++i) {
    size_t bytes;
    spark_cache_bytes(session->model, i, &bytes);
    total += bytes;
  }
  *out_bytes = total;
  return SPARK_OK;
}

spark_status spark_session_snapshot(const spark_session *session, void *buffer,
                                    size_t buffer_bytes) {
  size_t needed;
  if (!buffer || spark_session_snapshot_bytes(session, &needed) != SPARK_OK ||
      buffer_bytes < needed)
    return SPARK_ERROR_INVALID_ARGUMENT;
  if (await_verification(session->model, 0) != SPARK_OK)
    return SPARK_ERROR_BAD_PACK; /* caches computed from damaged weights */
  const spark_model_def *d = session->model->def;
  unsigned char *p = (unsigned char *)buffer + sizeof(snapshot_header);
  size_t logits_bytes = (size_t)d->vocab_size * sizeof(float);
  memcpy(p, session->logits + (size_t)session->last_row * d->vocab_size,
         logits_bytes);
  p += logits_bytes;
  for (int32_t i = 0; i < d->num_caches; ++i) {
    size_t bytes;
    spark_cache_bytes(session->model, i, &bytes);
    memcpy(p, session->caches[i], bytes);
    p += bytes;
  }
  snapshot_header h;
  memset(&h, 0, sizeof(h));
  memcpy(h.magic, SNAPSHOT_MAGIC, 8);
  h.version = SNAPSHOT_VERSION;
  h.position = session->position;
  h.has_logits = session->has_logits;
  h.abi_hash = d->abi_hash;
  h.config_hash = d->config_hash;
  h.payload_bytes = needed - sizeof(snapshot_header);
  h.payload_checksum = spark_checksum((unsigned char *)buffer + sizeof(h),
                                      (size_t)h.payload_bytes);
  memcpy(buffer, &h, sizeof(h));
  return SPARK_OK;
}

spark_status spark_session_restore(spark_session *session, const void *buffer,
                                   size_t buffer_bytes) {
  size_t needed;
  if (!buffer || spark_session_snapshot_bytes(session, &needed) != SPARK_OK ||
      buffer_bytes != needed)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_model_def *d = session->model->def;
  snapshot_header h;
  memcpy(&h, buffer, sizeof(h));
  if (memcmp(h.magic, SNAPSHOT_MAGIC, 8) != 0 || h.version != SNAPSHOT_VERSION)
    return SPARK_ERROR_BAD_SNAPSHOT;
  if (h.abi_hash != d->abi_hash || h.config_hash != d->config_hash)
    return SPARK_ERROR_PACK_MISMATCH;
  if (h.payload_bytes != needed - sizeof(h) || h.position < 0 ||
      h.position > d->max_context ||
      spark_checksum((const unsigned char *)buffer + sizeof(h),
                     (size_t)h.payload_bytes) != h.payload_checksum)
    return SPARK_ERROR_BAD_SNAPSHOT;
  /* Verified: only now is the session changed. */
  const unsigned char *p = (const unsigned char *)buffer + sizeof(h);
  session->position = h.position;
  session->has_logits = h.has_logits != 0;
  session->last_row = 0;
  size_t logits_bytes = (size_t)d->vocab_size * sizeof(float);
  memcpy(session->logits, p, logits_bytes);
  p += logits_bytes;
  for (int32_t i = 0; i < d->num_caches; ++i) {
    size_t bytes;
    spark_cache_bytes(session->model, i, &bytes);
    memcpy(session->caches[i], p, bytes);
    p += bytes;
  }
  return SPARK_OK;
}

spark_status spark_session_eval(spark_session *session, const int32_t *tokens,
                                int32_t n, int32_t chunk, float *logits) {
  if (!session || !tokens || n <= 0 || chunk < 0)
    return SPARK_ERROR_INVALID_ARGUMENT;
  const spark_model_def *d = session->model->def;
  if (chunk == 0 || chunk > d->max_chunk)
    chunk = d->max_chunk;
  for (int32_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= d->vocab_size)
      return SPARK_ERROR_TOKEN_OUT_OF_RANGE;
  if (n > d->max_context - session->position)
    return SPARK_ERROR_CONTEXT_FULL;
  for (int32_t done = 0; done < n;) {
    int32_t count = n - done < chunk ? n - done : chunk;
    int last_chunk = done + count == n;
    /* All rows when the caller wants them; else only the very last token. */
    int32_t rows = logits ? count : (last_chunk ? 1 : 0);
    int rc =
        d->step(session->model->weights, session->caches, session->arena,
                tokens + done, session->position, count, rows, session->logits);
    if (rc != 0)
      return SPARK_ERROR_KERNEL;
    /* SPARK_VERIFY_IN_BACKGROUND: the first step ran beside the checksum
     * pass; nothing it computed leaves the session before the verdict. */
    if (await_verification(session->model, 0) != SPARK_OK) {
      session->has_logits = 0;
      return SPARK_ERROR_BAD_PACK;
    }
    if (logits)
      memcpy(logits + (size_t)done * d->vocab_size, session->logits,
             (size_t)count * d->vocab_size * sizeof(float));
    session->position += count;
    if (rows > 0) {
      session->last_row = rows - 1;
      session->has_logits = 1;
    }
    done += count;
  }
  return SPARK_OK;
}

spark_status spark_session_decode(spark_session *session, int32_t token) {
  return spark_session_eval(session, &token, 1, 1, NULL);
}

spark_status spark_session_logits(const spark_session *session,
                                  const float **out_logits) {
  if (!session || !out_logits)
    return SPARK_ERROR_INVALID_ARGUMENT;
  if (!session->has_logits)
    return SPARK_ERROR_NO_LOGITS;
  *out_logits = session->logits +
                (size_t)session->last_row * session->model->def->vocab_size;
  return SPARK_OK;
}

spark_sampler_params spark_sampler_params_default(void) {
  spark_sampler_params p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.seed = 0;
  return p;
}

spark_status spark_sampler_create(const spark_sampler_params *params,
                                  int32_t vocab_size,
                                  spark_sampler **out_sampler) {
  if (!params || !out_sampler || vocab_size <= 0)
    return SPARK_ERROR_INVALID_ARGUMENT;
  /* NaN compares false everywhere: it would silently mean "greedy". */
  if (isnan(params->temperature) || isinf(params->temperature) ||
      isnan(params->top_p) || !(params->top_p > 0.0f))
    return SPARK_ERROR_INVALID_ARGUMENT;
  spark_sampler *s = calloc(1, sizeof(*s));
  if (!s)
    return SPARK_ERROR_OUT_OF_MEMORY;
  s->params = *params;
  s->vocab = vocab_size;
  s->state = params->seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  s->probs = malloc((size_t)vocab_size * sizeof(float));
  s->order = malloc((size_t)vocab_size * sizeof(int32_t));
  s->scratch = malloc((size_t)vocab_size * sizeof(int32_t));
  s->buckets = malloc(kSamplerBuckets * sizeof(sampler_bucket));
  if (!s->probs || !s->order || !s->scratch || !s->buckets) {
    spark_sampler_destroy(s);
    return SPARK_ERROR_OUT_OF_MEMORY;
  }
  *out_sampler = s;
  return SPARK_OK;
}

void spark_sampler_destroy(spark_sampler *sampler) {
  if (!sampler)
    return;
  free(sampler->probs);
  free(sampler->order);
  free(sampler->scratch);
  free(sampler->buckets);
  free(sampler);
}

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Sorts order[0..n) by descending probs (ties: lower id first), stable
 * merge sort through scratch; qsort would need global state for probs. */
static void sort_by_probability(int32_t *order, int32_t *scratch, int32_t n,
                                const float *probs) {
  for (int32_t width = 1; width < n; width *= 2) {
    for (int32_t lo = 0; lo < n; lo += 2 * width) {
      int32_t mid = lo + width < n ? lo + width : n;
      int32_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int32_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        scratch[k++] =
            probs[order[j]] > probs[order[i]] ? order[j++] : order[i++];
      while (i < mid)
        scratch[k++] = order[i++];
      while (j < hi)
        scratch[k++] = order[j++];
    }
    memcpy(order, scratch, (size_t)n * sizeof(int32_t));
  }
}

/* The bucket of a probability p >= 0. */
static inline int probability_bucket(float p) {
  uint32_t bits;
  memcpy(&bits, &p, sizeof(bits));
  return (int)(bits >> kSamplerBucketShift);
}

/* Bucket b's tokens in descending probability (ties: lower id first), once
 * per draw. */
static void sort_bucket(spark_sampler *s, int b) {
  sampler_bucket *bucket = &s->buckets[b];
  if (!bucket->sorted)
    sort_by_probability(s->order + bucket->start, s->scratch, bucket->count,
                        s->probs);
  bucket->sorted = 1;
}

spark_status spark_sampler_sample(spark_sampler *s, const float *logits,
                                  int32_t *out_token) {
  if (!s || !logits || !out_token)
    return SPARK_ERROR_INVALID_ARGUMENT;
  /* -inf is a masked token (a grammar); NaN or +inf is a broken row, and a
   * row with nothing left is an error too, never "token 0". */
  int32_t best = -1;
  float largest = -INFINITY; /* the largest logit, held in a register */
  for (int32_t i = 0; i < s->vocab; ++i) {
    const float x = logits[i];
    if (isnan(x) || x == INFINITY)
      return SPARK_ERROR_INVALID_ARGUMENT;
    if (x > largest) {
      largest = x;
      best = i;
    }
  }
  if (best < 0)
    return SPARK_ERROR_INVALID_ARGUMENT;
  if (s->params.temperature <= 0.0f) {
    *out_token = best;
    return SPARK_OK;
  }
  /* expf of anything below -104 is 0 (e^-104 is under half the smallest
   * subnormal float); glibc's expf reaches that 0 through its underflow
   * path (errno), about 40 ns a token: milliseconds for a vocabulary whose
   * tail underflows. */
  double total = 0.0;
  for (int32_t i = 0; i < s->vocab; ++i) {
    const float z = (logits[i] - logits[best]) / s->params.temperature;
    s->probs[i] = z < -104.0f ? 0.0f : expf(z);
    total += s->probs[i];
  }
  sampler_bucket *buckets = s->buckets;
  memset(buckets, 0, kSamplerBuckets * sizeof(sampler_bucket));
  for (int32_t i = 0; i < s->vocab; ++i) {
    s->probs[i] = (float)(s->probs[i] / total);
    sampler_bucket *b = &buckets[probability_bucket(s->probs[i])];
    b->count += 1;
    b->mass += s->probs[i];
  }
  int32_t placed = 0;
  for (int b = kSamplerBuckets - 1; b >= 0; --b) {
    buckets[b].start = buckets[b].next = placed;
    placed += buckets[b].count;
  }
  for (int32_t i = 0; i < s->vocab; ++i)
    s->order[buckets[probability_bucket(s->probs[i])].next++] = i;

  /* The kept tokens: the first of the descending order, at most top_k of
   * them, and no more than the first whose running mass reaches top_p. A
   * bucket is sorted only if the end may lie inside it: its mass reaches
   * top_p, or top_k ends before its last token. Otherwise it is passed
   * whole (its count and mass), the last one too when it ends at top_k or
   * at the vocabulary's end (the tail of tokens whose probabilities
   * underflowed to 0 is one large bucket). */
  const int32_t most = s->params.top_k > 0 && s->params.top_k < s->vocab
                           ? s->params.top_k
                           : s->vocab;
  const double top_p = (double)s->params.top_p;
  int32_t keep = 0;
  double kept = 0.0;
  int found = 0;
  int last = 0; /* the bucket of the last kept token */
  for (int b = kSamplerBuckets - 1; b >= 0 && !found; --b) {
    const sampler_bucket *bucket = &buckets[b];
    if (bucket->count == 0)
      continue;
    last = b;
    if (keep + bucket->count <= most && kept + bucket->mass < top_p) {
      keep += bucket->count;
      kept += bucket->mass;
      found = keep == most;
      continue;
    }
    sort_bucket(s, b);
    for (int32_t j = 0; j < bucket->count && !found; ++j) {
      kept += s->probs[s->order[bucket->start + j]];
      found = ++keep == most || kept >= top_p;
    }
  }

  /* The draw: the first kept token whose running mass passes u. */
  double u = (double)(next_random(&s->state) >> 11) * 0x1.0p-53 * kept;
  int32_t passed = 0;
  for (int b = kSamplerBuckets - 1; b >= 0 && passed < keep; --b) {
    const sampler_bucket *bucket = &buckets[b];
    if (bucket->count == 0)
      continue;
    if (passed + bucket->count <= keep && u >= bucket->mass) {
      passed += bucket->count;
      u -= bucket->mass;
      continue;
    }
    sort_bucket(s, b);
    for (int32_t j = 0; j < bucket->count && passed < keep; ++j, ++passed) {
      u -= s->probs[s->order[bucket->start + j]];
      if (u < 0.0) {
        *out_token = s->order[bucket->start + j];
        return SPARK_OK;
      }
    }
  }
  sort_bucket(s, last); /* rounding left u at or above 0: the last kept */
  *out_token = s->order[keep - 1];
  return SPARK_OK;
}
