/* avx512_attention.c - attention for the AVX-512 variants.
 *
 * The function of x86_attention.h (the Halide attention kernel's). Decode
 * and chunks of fewer than kTiledTokens tokens run one task per key / value
 * head and token (token_task: AVX-512, up to 4 query heads a key / value
 * head; more: x86_attention.h's task). Longer chunks (prefill) run one task per
 * key / value head and tile of kQueries queries (tokens x the query heads that
 * share the head), which reads each cached key and value once per tile
 * instead of once per token, in blocks of kKeyBlock keys with an online
 * softmax (each query's running largest score and sum, the sums so far
 * rescaled when the largest grows):
 *   scores: the tile's queries, scaled and transposed to [hd][kQueries]
 *           once, times each key's value at d broadcast: 16 queries per
 *           FMA, 4 keys x 64 queries of accumulators, hd in chunks of 64 so
 *           that the queries' chunk stays in L1;
 *   values: [hd][kQueries] sums, each key's weights (16 queries) times its
 *           value at d broadcast, 4 d x 64 queries of accumulators.
 * A key block that no query of the tile sees (beyond the causal edge or
 * the window) is skipped. Needs hd % 64 == 0 and a query-head group that
 * divides kQueries (Spark: hd 256, 4 query heads per key / value head);
 * other shapes run x86_attention.h's task. Compiled with -mavx512f -mavx2 -mfma
 * -mf16c. */
/* Rows requested 16 ahead into L2 (8 into L1 before: at depth 16384, 1.7b
 * w4a8, 2 threads, the full layers' attention took 29.4 ms a token before
 * and 26.6 after, one run each). A prefetch into L1 holds one of its few
 * fill buffers until the line arrives. */
#define SPARK_ATTENTION_AHEAD 16
#define SPARK_ATTENTION_HINT _MM_HINT_T1

#include "avx512_sums.h"
#include "x86_attention.h"

#include <string.h>

enum { kQueries = 64, kKeyBlock = 64, kDepthChunk = 64, kTiledTokens = 8 };

/* e^x for x <= 0, as exp_nonpositive (x86_attention.h), 16 lanes. */
static inline __m512 exp16_nonpositive(__m512 x) {
  const __m512 tiny = _mm512_set1_ps(-87.0f);
  const __mmask16 underflow = _mm512_cmp_ps_mask(x, tiny, _CMP_LT_OQ);
  x = _mm512_max_ps(x, tiny);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps((__mmask16)~underflow, p,
                             _mm512_castsi512_ps(bits));
}

enum { kVectors = kQueries / 16 };

/* The scores of keys b..b+3 of the block (rows `key`) for the tile's
 * queries over depths d0..d0+kDepthChunk-1, added to p[b..b+3][*] (set when
 * d0 == 0). */
static inline __attribute__((always_inline)) void
score_keys(const float *qt, const float *const *key, int d0, float *p) {
  __m512 s[4][kVectors];
  for (int c = 0; c < 4; ++c)
    for (int v = 0; v < kVectors; ++v)
      s[c][v] = d0 == 0 ? _mm512_setzero_ps()
                        : _mm512_load_ps(p + c * kQueries + 16 * v);
  for (int d = d0; d < d0 + kDepthChunk; ++d) {
    __m512 q[kVectors];
    for (int v = 0; v < kVectors; ++v)
      q[v] = _mm512_load_ps(qt + (size_t)d * kQueries + 16 * v);
    for (int c = 0; c < 4; ++c) {
      const __m512 kd = _mm512_set1_ps(key[c][d]);
      for (int v = 0; v < kVectors; ++v)
        s[c][v] = _mm512_fmadd_ps(q[v], kd, s[c][v]);
    }
  }
  for (int c = 0; c < 4; ++c)
    for (int v = 0; v < kVectors; ++v)
      _mm512_store_ps(p + c * kQueries + 16 * v, s[c][v]);
}

/* ot[d][*] = ot[d][*] * alpha + sum over the block's keys b of
 * p[b][*] * value[b][d], for d = d0..d0+3. */
static inline __attribute__((always_inline)) void
add_values(float *ot, const float *p, const float *const *value, int keys,
           const __m512 *alpha, int d0) {
  __m512 a[4][kVectors];
  for (int e = 0; e < 4; ++e)
    for (int v = 0; v < kVectors; ++v)
      a[e][v] = _mm512_mul_ps(
          _mm512_load_ps(ot + (size_t)(d0 + e) * kQueries + 16 * v), alpha[v]);
  for (int b = 0; b < keys; ++b) {
    __m512 w[kVectors];
    for (int v = 0; v < kVectors; ++v)
      w[v] = _mm512_load_ps(p + (size_t)b * kQueries + 16 * v);
    for (int e = 0; e < 4; ++e) {
      const __m512 x = _mm512_set1_ps(value[b][d0 + e]);
      for (int v = 0; v < kVectors; ++v)
        a[e][v] = _mm512_fmadd_ps(w[v], x, a[e][v]);
    }
  }
  for (int e = 0; e < 4; ++e)
    for (int v = 0; v < kVectors; ++v)
      _mm512_store_ps(ot + (size_t)(d0 + e) * kQueries + 16 * v, a[e][v]);
}

static int tile_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const attention_job *j = (const attention_job *)closure;
  const int hd = j->hd, group = j->group, keys = j->cached + j->n;
  const int tokens = kQueries / group; /* a tile's tokens */
  const int g = task % j->kv_heads, t0 = task / j->kv_heads * tokens;
  float *buffer = NULL;
  if (posix_memalign((void **)&buffer, 64,
                     sizeof(float) * ((size_t)2 * hd + kKeyBlock) * kQueries) !=
      0)
    return -1;
  float *qt = buffer, *ot = buffer + (size_t)hd * kQueries,
        *p = ot + (size_t)hd * kQueries;
  /* Query i is token t0 + i / group (the last one again past the chunk's
   * end: computed, not stored) of head g * group + i % group. */
  int32_t position[kQueries];
  for (int i = 0; i < kQueries; ++i) {
    const int t = t0 + i / group < j->n ? t0 + i / group : j->n - 1;
    const float *row = at3(j->q, g * group + i % group, t);
    for (int d = 0; d < hd; ++d)
      qt[(size_t)d * kQueries + i] = row[d] * j->scale;
    position[i] = j->pos0 + t;
  }
  memset(ot, 0, sizeof(float) * (size_t)hd * kQueries);
  const int32_t first = position[0], last = position[kQueries - 1];
  __m512i seen_to[kVectors], seen_after[kVectors];
  __m512 largest[kVectors], sum[kVectors];
  for (int v = 0; v < kVectors; ++v) {
    seen_to[v] = _mm512_loadu_si512(position + 16 * v);
    /* keys > position - window; no window: every earlier key */
    seen_after[v] =
        j->window > 0
            ? _mm512_sub_epi32(seen_to[v], _mm512_set1_epi32(j->window))
            : _mm512_set1_epi32(INT32_MIN);
    largest[v] = _mm512_set1_ps(-3.0e38f);
    sum[v] = _mm512_setzero_ps();
  }
  for (int m0 = 0; m0 < keys; m0 += kKeyBlock) {
    const int count = keys - m0 < kKeyBlock ? keys - m0 : kKeyBlock;
    const float *key[kKeyBlock + 3], *value[kKeyBlock + 3];
    int32_t at[kKeyBlock + 3];
    int any = 0;
    for (int b = 0; b < count; ++b) {
      int32_t unused;
      key[b] = key_row(j, 1, g, m0 + b, &at[b]);
      value[b] = key_row(j, 0, g, m0 + b, &unused);
      any |= at[b] <= last && (j->window <= 0 || at[b] > first - j->window);
    }
    if (!any)
      continue;
    const int padded = (count + 3) / 4 * 4;
    for (int b = count; b < padded; ++b) { /* seen by no query */
      key[b] = key[0];
      value[b] = value[0];
      at[b] = INT32_MAX;
    }
    for (int d0 = 0; d0 < hd; d0 += kDepthChunk)
      for (int b = 0; b < padded; b += 4)
        score_keys(qt, key + b, d0, p + (size_t)b * kQueries);
    /* the scores of keys a query does not see: -3e38; the block's largest */
    __m512 top[kVectors], alpha[kVectors];
    for (int v = 0; v < kVectors; ++v)
      top[v] = largest[v];
    for (int b = 0; b < padded; ++b) {
      const __m512i where = _mm512_set1_epi32(at[b]);
      for (int v = 0; v < kVectors; ++v) {
        const __mmask16 seen =
            _mm512_cmp_epi32_mask(where, seen_to[v], _MM_CMPINT_LE) &
            _mm512_cmp_epi32_mask(where, seen_after[v], _MM_CMPINT_NLE);
        float *s = p + (size_t)b * kQueries + 16 * v;
        const __m512 score = _mm512_mask_mov_ps(_mm512_set1_ps(-3.0e38f), seen,
                                                _mm512_load_ps(s));
        _mm512_store_ps(s, score);
        top[v] = _mm512_max_ps(top[v], score);
      }
    }
    for (int v = 0; v < kVectors; ++v) {
      alpha[v] = exp16_nonpositive(_mm512_sub_ps(largest[v], top[v]));
      sum[v] = _mm512_mul_ps(sum[v], alpha[v]);
      largest[v] = top[v];
    }
    const __m512 hidden = _mm512_set1_ps(-1.0e38f);
    for (int b = 0; b < padded; ++b)
      for (int v = 0; v < kVectors; ++v) {
        float *s = p + (size_t)b * kQueries + 16 * v;
        const __m512 score = _mm512_load_ps(s);
        const __m512 w = _mm512_maskz_mov_ps(
            _mm512_cmp_ps_mask(score, hidden, _CMP_GT_OQ),
            exp16_nonpositive(_mm512_sub_ps(score, largest[v])));
        _mm512_store_ps(s, w);
        sum[v] = _mm512_add_ps(sum[v], w);
      }
    for (int d0 = 0; d0 < hd; d0 += 4)
      add_values(ot, p, value, padded, alpha, d0);
  }
  float total[kQueries];
  for (int v = 0; v < kVectors; ++v)
    _mm512_storeu_ps(total + 16 * v, sum[v]);
  for (int i = 0; i < kQueries && t0 + i / group < j->n; ++i) {
    const int head = g * group + i % group, t = t0 + i / group;
    spark_attention_store(j, head, t, ot + i, kQueries, total[i]);
  }
  free(buffer);
  return 0;
}

/* One token of one key / value head (decode and short chunks), its query
 * heads (at most kTokenHeads) together, in three passes over the keys it
 * sees: the scores, 16 dimensions per FMA and the heads' sums reduced
 * together; the softmax; the values in blocks of kKeyBlock keys, 64
 * dimensions x 4 heads of accumulators at a time, so each value row is
 * read from memory once and its block again from L2. Rows are requested
 * kAhead keys ahead. hd % 64 == 0. */
enum { kTokenHeads = 4 };

static int token_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const attention_job *j = (const attention_job *)closure;
  const int g = task % j->kv_heads, t = task / j->kv_heads;
  const int hd = j->hd, group = j->group, keys = j->cached + j->n;
  const int32_t query = j->pos0 + t;
  float *buffer = NULL;
  if (posix_memalign((void **)&buffer, 64,
                     sizeof(float) * ((size_t)2 * kTokenHeads * hd +
                                      (size_t)kTokenHeads * (keys + 16))) != 0)
    return -1;
  float *qs = buffer, *acc = qs + (size_t)kTokenHeads * hd,
        *scores = acc + (size_t)kTokenHeads * hd; /* [head][keys] */
  const size_t stride = (size_t)keys + 16;
  for (int h = 0; h < kTokenHeads; ++h) {
    const float *row = at3(j->q, g * group + (h < group ? h : 0), t);
    for (int d = 0; d < hd; ++d)
      qs[(size_t)h * hd + d] = row[d] * j->scale;
  }
  memset(acc, 0, sizeof(float) * (size_t)kTokenHeads * hd);
  /* the keys it sees: [lo, hi) in key order, others masked */
  float largest[kTokenHeads];
  for (int h = 0; h < kTokenHeads; ++h)
    largest[h] = -3.0e38f;
  for (int m = 0; m < keys; ++m) {
    int32_t position;
    const float *key = key_row(j, 1, g, m, &position);
    prefetch_row(j, 1, g, m, keys);
    const int seen =
        position <= query && (j->window <= 0 || position > query - j->window);
    if (!seen) {
      for (int h = 0; h < kTokenHeads; ++h)
        scores[(size_t)h * stride + m] = -3.0e38f;
      continue;
    }
    __m512 a[kTokenHeads];
    for (int h = 0; h < kTokenHeads; ++h)
      a[h] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
      const __m512 kd = _mm512_loadu_ps(key + d);
      for (int h = 0; h < kTokenHeads; ++h)
        a[h] =
            _mm512_fmadd_ps(_mm512_load_ps(qs + (size_t)h * hd + d), kd, a[h]);
    }
    float s[4];
    _mm_storeu_ps(s, spark_hsum4_ps(a[0], a[1], a[2], a[3]));
    for (int h = 0; h < kTokenHeads; ++h) {
      scores[(size_t)h * stride + m] = s[h];
      if (s[h] > largest[h])
        largest[h] = s[h];
    }
  }
  float total[kTokenHeads];
  const __m512 hidden = _mm512_set1_ps(-1.0e38f);
  for (int h = 0; h < kTokenHeads; ++h) {
    float *row = scores + (size_t)h * stride;
    for (int m = keys; m < keys + 16; ++m) /* padding: weight 0 */
      row[m] = -3.0e38f;
    const __m512 top = _mm512_set1_ps(largest[h]);
    __m512 sum = _mm512_setzero_ps();
    for (int m = 0; m < keys; m += 16) {
      const __m512 score = _mm512_loadu_ps(row + m);
      const __m512 w =
          _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(score, hidden, _CMP_GT_OQ),
                              exp16_nonpositive(_mm512_sub_ps(score, top)));
      _mm512_storeu_ps(row + m, w);
      sum = _mm512_add_ps(sum, w);
    }
    total[h] = _mm512_reduce_add_ps(sum);
  }
  for (int m0 = 0; m0 < keys; m0 += kKeyBlock) {
    const int count = keys - m0 < kKeyBlock ? keys - m0 : kKeyBlock;
    const float *value[kKeyBlock];
    for (int b = 0; b < count; ++b) {
      int32_t unused;
      value[b] = key_row(j, 0, g, m0 + b, &unused);
      prefetch_row(j, 0, g, m0 + b, keys);
    }
    for (int d0 = 0; d0 < hd; d0 += 64) {
      __m512 a[kTokenHeads][4];
      for (int h = 0; h < kTokenHeads; ++h)
        for (int e = 0; e < 4; ++e)
          a[h][e] = _mm512_load_ps(acc + (size_t)h * hd + d0 + 16 * e);
      for (int b = 0; b < count; ++b) {
        __m512 v[4];
        for (int e = 0; e < 4; ++e)
          v[e] = _mm512_loadu_ps(value[b] + d0 + 16 * e);
        for (int h = 0; h < kTokenHeads; ++h) {
          const __m512 w = _mm512_set1_ps(scores[(size_t)h * stride + m0 + b]);
          for (int e = 0; e < 4; ++e)
            a[h][e] = _mm512_fmadd_ps(w, v[e], a[h][e]);
        }
      }
      for (int h = 0; h < kTokenHeads; ++h)
        for (int e = 0; e < 4; ++e)
          _mm512_store_ps(acc + (size_t)h * hd + d0 + 16 * e, a[h][e]);
    }
  }
  for (int h = 0; h < group; ++h) {
    const int head = g * group + h;
    spark_attention_store(j, head, t, acc + (size_t)h * hd, 1, total[h]);
  }
  free(buffer);
  return 0;
}

int spark_avx512_attention(halide_buffer_t *q, halide_buffer_t *k,
                           halide_buffer_t *v, halide_buffer_t *k_cache,
                           halide_buffer_t *v_cache, halide_buffer_t *gate,
                           int32_t pos0, int32_t cached, halide_buffer_t *out,
                           float scale, int32_t window, int32_t ring) {
  attention_job job;
  if (spark_attention_job(&job, q, k, v, k_cache, v_cache, gate, pos0, cached,
                          out, scale, window, ring) != 0)
    return -1;
  if (job.hd % kDepthChunk != 0 || kQueries % job.group != 0)
    return halide_do_par_for(NULL, attention_task, 0, job.kv_heads * job.n,
                             (uint8_t *)&job);
  if (job.n < kTiledTokens)
    return halide_do_par_for(
        NULL, job.group <= kTokenHeads ? token_task : attention_task, 0,
        job.kv_heads * job.n, (uint8_t *)&job);
  const int tokens = kQueries / job.group;
  return halide_do_par_for(NULL, tile_task, 0,
                           job.kv_heads * ((job.n + tokens - 1) / tokens),
                           (uint8_t *)&job);
}
