/* attention_job.h - what the attention microkernels of every CPU target
 * share: the arguments of the Halide attention kernel's function as a job
 * (spark_attention_job), the rows of the caches and of the chunk's own keys
 * and values, and the store of a head's output (x86_attention.h,
 * avx512_attention.c, targets/arm64/lib/neon_attention.c).
 *
 * The function (the Halide attention kernel's, kernels/lib/Kernels.cpp):
 *   (q f32 [hd, H, n], k f32 [hd, KV, n], v f32 [hd, KV, n],
 *    k_cache [hd, KV, S], v_cache [hd, KV, S], [gate f32 [H, n]],
 *    pos0, cached, out f32 [hd, H, n]):
 * keys m < cached come from cache slot m (a ring cache's slot m holds
 * position pos0 - 1 - ((pos0 - 1 - m) mod S)), the others are the chunk's
 * own rows m - cached at pos0 + m - cached; a query at pos0 + t sees the
 * keys at positions <= its own (and, in a sliding layer, > its own -
 * window); out = sum softmax(scale q.k) v, divided by 1 + exp(-gate) when
 * gated. The caches hold f32, bf16 or f16. Plain C. */
#ifndef SPARK_TARGETS_ATTENTION_JOB_H
#define SPARK_TARGETS_ATTENTION_JOB_H

#include "HalideRuntime.h"
#include "scratch.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The caches' elements (the chunk's own keys and values are f32). */
enum { kCacheF32 = 0, kCacheBF16 = 1, kCacheF16 = 2 };

typedef struct attention_job {
  const halide_buffer_t *q, *k, *v, *kc, *vc, *gate, *out;
  int32_t pos0, cached, n, hd, heads, kv_heads, group, slots;
  float scale;
  int32_t window, ring;
  int32_t cache_type; /* kCacheF32, kCacheBF16, kCacheF16 */
} attention_job;

static inline const float *at3(const halide_buffer_t *b, int a, int c) {
  return (const float *)b->host + (size_t)a * b->dim[1].stride +
         (size_t)c * b->dim[2].stride;
}

/* Row (a, c) of a buffer of 16-bit elements. */
static inline const uint16_t *at3_16(const halide_buffer_t *b, int a, int c) {
  return (const uint16_t *)b->host + (size_t)a * b->dim[1].stride +
         (size_t)c * b->dim[2].stride;
}

/* Key or value row m of head g as this chunk sees it, and its position. */
static inline const float *key_row(const attention_job *j, int cache_key, int g,
                                   int m, int32_t *position) {
  if (m < j->cached) {
    const int32_t last = j->pos0 - 1;
    if (j->ring) {
      int32_t back = (last - m) % j->slots;
      if (back < 0)
        back += j->slots;
      *position = last - back;
    } else {
      *position = m;
    }
    return at3(cache_key ? j->kc : j->vc, g, m < j->slots ? m : j->slots - 1);
  }
  const int row = m - j->cached;
  *position = j->pos0 + row;
  return at3(cache_key ? j->k : j->v, g, row);
}

/* Query head `head` of token t's output: its weighted value sum (sum[d *
 * step] for d < hd) times 1 / the sum of its weights `total`, divided by
 * 1 + exp(-gate) when gated. */
static inline void spark_attention_store(const attention_job *j, int head,
                                         int t, const float *sum, size_t step,
                                         float total) {
  float factor = 1.0f / total;
  if (j->gate)
    factor /=
        1.0f +
        expf(-((const float *)
                   j->gate->host)[(size_t)t * j->gate->dim[1].stride + head]);
  float *o = (float *)at3(j->out, head, t);
  for (int d = 0; d < j->hd; ++d)
    o[d] = sum[(size_t)d * step] * factor;
}

/* Row m (cache slot or the chunk's own row) of key / value head g, and its
 * elements' type (*type). */
static inline const void *slot_row(const attention_job *j, int cache_key, int g,
                                   int m, int *type) {
  if (m < j->cached) {
    const int slot = m < j->slots ? m : j->slots - 1;
    const halide_buffer_t *cache = cache_key ? j->kc : j->vc;
    *type = j->cache_type;
    return j->cache_type == kCacheF32 ? (const void *)at3(cache, g, slot)
                                      : (const void *)at3_16(cache, g, slot);
  }
  *type = kCacheF32;
  return at3(cache_key ? j->k : j->v, g, m - j->cached);
}

/* The position key m holds (key_row's). */
static inline int32_t key_position(const attention_job *j, int m) {
  if (m >= j->cached)
    return j->pos0 + m - j->cached;
  if (!j->ring)
    return m;
  const int32_t last = j->pos0 - 1;
  int32_t back = (last - m) % j->slots;
  if (back < 0)
    back += j->slots;
  return last - back;
}

/* Whether the query at position `query` sees key m. */
static inline int key_seen(const attention_job *j, int m, int32_t query) {
  const int32_t position = key_position(j, m);
  return position <= query && (j->window <= 0 || position > query - j->window);
}

/* Token t's query rows, scaled, into qs ([kv][per_head][hd]): the
 * query heads of key / value head g at rows g * per_head on, the rows past
 * its group (per_head >= group) zero. */
static inline void spark_attention_queries(const attention_job *j, int t,
                                           int per_head, float *qs) {
  for (int r = 0; r < j->kv_heads * per_head; ++r) {
    const int g = r / per_head, h = r % per_head; /* within the group */
    float *q = qs + (size_t)r * j->hd;
    if (h < j->group) {
      const float *row = at3(j->q, g * j->group + h, t);
      for (int d = 0; d < j->hd; ++d)
        q[d] = row[d] * j->scale;
    } else {
      memset(q, 0, sizeof(float) * (size_t)j->hd);
    }
  }
}

/* The end of the run of cache keys from the seen key m (before m1) that the
 * query at `query` sees, in consecutive slots whose positions step by one:
 * a linear cache's keys up to the query's own, a ring's up to the slot of
 * its newest position (the next slot holds its oldest). A run is seen
 * throughout once its first key is: its positions only grow, and every
 * cached position is below the query's. m, if m is not a cache key. */
static inline int spark_attention_seen_run(const attention_job *j, int m,
                                           int m1, int32_t query) {
  int end = m1 < j->cached ? m1 : j->cached;
  if (end > j->slots)
    end = j->slots;
  if (m >= end)
    return m;
  if (j->ring) {
    /* the newest slot: (pos0 - 1 - slot) mod slots == 0 */
    int32_t newest = (j->pos0 - 1) % j->slots;
    if (newest < 0)
      newest += j->slots;
    if (newest >= m && newest + 1 < end)
      end = newest + 1;
  } else if (end > query + 1) {
    end = query + 1;
  }
  return end > m ? end : m;
}

/* How many keys from the seen key m (before m1) the query at `query` takes
 * together: `most` if they are all seen and of one type (the cache's or the
 * chunk's rows), else 1. */
static inline int spark_attention_key_run(const attention_job *j, int m, int m1,
                                          int32_t query, int most) {
  if (!(m + most <= m1 && (m + most <= j->cached || m >= j->cached)))
    return 1;
  for (int i = 1; i < most; ++i)
    if (!key_seen(j, m + i, query))
      return 1;
  return most;
}

/* The keys of a value block from key m (count_left keys left, at most
 * `most`), ending where the cache's rows end and the chunk's begin (their
 * types differ). */
static inline int spark_attention_value_block(const attention_job *j, int m,
                                              int count_left, int most) {
  int block = count_left < most ? count_left : most;
  if (m < j->cached && m + block > j->cached)
    block = j->cached - m;
  return block;
}

/* Fills `job` from the kernel's arguments; 0, or -1 for a shape the task
 * cannot take. */
static inline int
spark_attention_job(attention_job *job, halide_buffer_t *q, halide_buffer_t *k,
                    halide_buffer_t *v, halide_buffer_t *k_cache,
                    halide_buffer_t *v_cache, halide_buffer_t *gate,
                    int32_t pos0, int32_t cached, halide_buffer_t *out,
                    float scale, int32_t window, int32_t ring) {
  job->q = q;
  job->k = k;
  job->v = v;
  job->kc = k_cache;
  job->vc = v_cache;
  job->gate = gate;
  job->out = out;
  job->pos0 = pos0;
  job->cached = cached;
  job->n = q->dim[2].extent;
  job->hd = q->dim[0].extent;
  job->heads = q->dim[1].extent;
  job->kv_heads = k->dim[1].extent;
  job->slots = k_cache->dim[2].extent;
  job->scale = scale;
  job->window = window;
  job->ring = ring;
  const struct halide_type_t type = k_cache->type;
  if (type.code == halide_type_float && type.bits == 32)
    job->cache_type = kCacheF32;
  else if (type.code == halide_type_bfloat && type.bits == 16)
    job->cache_type = kCacheBF16;
  else if (type.code == halide_type_float && type.bits == 16)
    job->cache_type = kCacheF16;
  else
    return -1;
  if (v_cache->type.code != type.code || v_cache->type.bits != type.bits)
    return -1;
  if (job->kv_heads <= 0 || job->heads % job->kv_heads != 0 ||
      job->hd % 8 != 0 || job->heads / job->kv_heads > 16 || job->slots <= 0 ||
      cached < 0 || cached > job->slots)
    return -1;
  job->group = job->heads / job->kv_heads;
  return 0;
}

#endif
