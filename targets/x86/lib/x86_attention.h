/* x86_attention.h - the attention of the x86 variants, one task per key /
 * value head and token (avx2_attention.c runs it; avx512_attention.c runs it
 * for decode and short chunks): all the query heads that share a key /
 * value head (GQA) in one task, so each cached key and value is read once
 * per token, not once per query head.
 *
 * The function and the job: attention_job.h (targets/common/lib). The task
 * takes f32 caches and 16-bit ones (each row widened to f32 once per task
 * and pass, shared by the group's query heads; needs F16C). Scores are computed
 * in one pass over the keys, their largest subtracted before exp, the values
 * summed in a second pass. Needs hd % 8 == 0 and AVX2 + FMA (the including
 * file's flags). */
#ifndef SPARK_TARGETS_X86_ATTENTION_H
#define SPARK_TARGETS_X86_ATTENTION_H

#include "attention_job.h"
#include "avx2_support.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* e^x for x <= 0 (the softmax's arguments), relative error about 2e-7:
 * x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its degree-6 Taylor series,
 * 2^n through the exponent bits; below -87 the result is 0. */
static inline __m256 exp_nonpositive(__m256 x) {
  const __m256 tiny = _mm256_set1_ps(-87.0f);
  const __m256 underflow = _mm256_cmp_ps(x, tiny, _CMP_LT_OQ);
  x = _mm256_max_ps(x, tiny);
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow,
                          _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

/* Requests key or value row m + SPARK_ATTENTION_AHEAD into the cache level
 * SPARK_ATTENTION_HINT names (the including file may set both; by default
 * 8 rows into L2): the rows of one head are a strided stream (the cache
 * interleaves the heads) that a task reads row by row. Into L1 (until
 * 2026-12-06) each request held one of the core's few fill buffers until its
 * line arrived: the avx2 variant's kernel on an AMD EPYC Zen 4,
 * spark-kernelbench --variant avx2, f32 caches, % of the stream at 1 / 2
 * threads: full layer at 32704 positions 16% / 34% into L1, 23% / 60% into
 * L2; at 4096 18% / 34% -> 27% / 59%; the sliding ring 23% / 35% -> 32% /
 * 62%. */
#ifndef SPARK_ATTENTION_AHEAD
#define SPARK_ATTENTION_AHEAD 8
#define SPARK_ATTENTION_HINT _MM_HINT_T1
#endif
static inline void prefetch_row(const attention_job *j, int cache_key, int g,
                                int m, int keys) {
  if (m + SPARK_ATTENTION_AHEAD >= keys)
    return;
  int type;
  const char *row =
      (const char *)slot_row(j, cache_key, g, m + SPARK_ATTENTION_AHEAD, &type);
  const int bytes = j->hd * (type == kCacheF32 ? 4 : 2);
  for (int b = 0; b < bytes; b += 64)
    _mm_prefetch(row + b, SPARK_ATTENTION_HINT);
}

/* Key or value row m of head g as f32: the row itself, or a 16-bit cache
 * row widened into `wide` (hd floats, 32-byte aligned): bf16 by a shift,
 * f16 by vcvtph2ps (F16C). */
static inline const float *f32_row(const attention_job *j, int cache_key, int g,
                                   int m, float *wide) {
  int type;
  const void *row = slot_row(j, cache_key, g, m, &type);
  if (type == kCacheF32)
    return (const float *)row;
  const uint16_t *h = (const uint16_t *)row;
  for (int d = 0; d < j->hd; d += 8) {
    const __m128i x = _mm_loadu_si128((const __m128i *)(h + d));
    _mm256_store_ps(wide + d, type == kCacheBF16
                                  ? _mm256_castsi256_ps(_mm256_slli_epi32(
                                        _mm256_cvtepu16_epi32(x), 16))
                                  : _mm256_cvtph_ps(x));
  }
  return wide;
}

static int attention_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const attention_job *j = (const attention_job *)closure;
  const int g = task % j->kv_heads, t = task / j->kv_heads;
  const int hd = j->hd, group = j->group, keys = j->cached + j->n;
  const int32_t query = j->pos0 + t;
  /* scores [group][keys], then the head accumulators [group][hd] and a
   * 16-bit cache row widened to f32 */
  float *scores =
      (float *)spark_scratch_alloc(sizeof(float) * ((size_t)group * keys + 8));
  float *acc = NULL;
  if (!scores ||
      spark_scratch_get((void **)&acc, sizeof(float) * (group + 1) * hd) != 0) {
    spark_scratch_put(scores);
    return -1;
  }
  const float lowest = -3.0e38f;
  float largest[16];
  for (int h = 0; h < group; ++h)
    largest[h] = lowest;
  float *wide = acc + (size_t)group * hd;
  for (int m = 0; m < keys; ++m) {
    prefetch_row(j, 1, g, m, keys);
    const int seen = key_seen(j, m, query);
    const float *key = seen ? f32_row(j, 1, g, m, wide) : NULL;
    for (int h = 0; h < group; ++h) {
      if (!seen) {
        scores[(size_t)h * keys + m] = lowest;
        continue;
      }
      const float *qh = at3(j->q, g * group + h, t);
      __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
      int d = 0;
      for (; d + 16 <= hd; d += 16) {
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), _mm256_loadu_ps(key + d),
                            a);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d + 8),
                            _mm256_loadu_ps(key + d + 8), b);
      }
      for (; d < hd; d += 8)
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), _mm256_loadu_ps(key + d),
                            a);
      const float s = spark_hsum_ps(_mm256_add_ps(a, b)) * j->scale;
      scores[(size_t)h * keys + m] = s;
      if (s > largest[h])
        largest[h] = s;
    }
  }
  float denominator[16];
  for (int h = 0; h < group; ++h) {
    float *row = scores + (size_t)h * keys;
    const __m256 top = _mm256_set1_ps(largest[h]),
                 hidden = _mm256_set1_ps(-1.0e38f);
    __m256 sum = _mm256_setzero_ps();
    int m = 0;
    for (; m + 8 <= keys; m += 8) {
      const __m256 s = _mm256_loadu_ps(row + m);
      const __m256 w = _mm256_and_ps(_mm256_cmp_ps(s, hidden, _CMP_GT_OQ),
                                     exp_nonpositive(_mm256_sub_ps(s, top)));
      _mm256_storeu_ps(row + m, w);
      sum = _mm256_add_ps(sum, w);
    }
    float tail = 0.0f;
    for (; m < keys; ++m) {
      const float w = row[m] > -1.0e38f ? expf(row[m] - largest[h]) : 0.0f;
      row[m] = w;
      tail += w;
    }
    denominator[h] = spark_hsum_ps(sum) + tail;
    for (int d = 0; d < hd; ++d)
      acc[h * hd + d] = 0.0f;
  }
  for (int m = 0; m < keys; ++m) {
    prefetch_row(j, 0, g, m, keys);
    const float *value = NULL;
    for (int h = 0; h < group; ++h) {
      const float w = scores[(size_t)h * keys + m];
      if (w == 0.0f)
        continue;
      if (!value)
        value = f32_row(j, 0, g, m, wide);
      const __m256 wv = _mm256_set1_ps(w);
      float *a = acc + h * hd;
      for (int d = 0; d < hd; d += 8)
        _mm256_store_ps(a + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(value + d),
                                               _mm256_load_ps(a + d)));
    }
  }
  for (int h = 0; h < group; ++h) {
    const int head = g * group + h;
    spark_attention_store(j, head, t, acc + h * hd, 1, denominator[h]);
  }
  spark_scratch_put(scores);
  spark_scratch_put(acc);
  return 0;
}

#endif
