/* avx512_attention.c - attention for the AVX-512 variants.
 *
 * The function of x86_attention.h (the Halide attention kernel's). Decode
 * and chunks of fewer than kTiledTokens tokens run one task per token and
 * range of keys, all heads together (token_part_task; the ranges of a token
 * combined after). Longer chunks (prefill) run one task per
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
/* Every decode row is requested ahead into L2 (SPARK_ATTENTION_HINT), not
 * L1: a request into L1 holds one of the core's few fill buffers until its
 * line arrives. AMD EPYC Zen 4 (2026-12-06), spark-kernelbench, the 1.7b's
 * full layer at 32704 positions, % of the stream at 1 / 2 threads: bf16
 * caches 25% / 45% into L1, 51% / 79% into L2; f32 32% / 58% -> 52% / 74%;
 * f16 25% / 44% -> 49% / 83% (at 4096 positions and the sliding ring alike).
 * x86_attention.h's task (the shapes the others do not take) requests rows
 * 16 ahead. */
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

/* Elements d..d+15 of a row of `type`, as f32. */
static inline __attribute__((always_inline)) __m512
load16(const void *row, const int type, int d) {
  if (type == kCacheBF16)
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                              (const __m256i *)((const uint16_t *)row + d))),
                          16));
  if (type == kCacheF16)
    return _mm512_cvtph_ps(
        _mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)));
  return _mm512_loadu_ps((const float *)row + d);
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
  /* qt, ot and p; with 16-bit caches, a block's cached keys and values
   * widened to f32 */
  const size_t widened = j->cache_type == kCacheF32 ? 0 : 2 * kKeyBlock;
  if (spark_scratch_get(
          (void **)&buffer,
          sizeof(float) *
              (((size_t)2 * hd + kKeyBlock) * kQueries + widened * hd)) != 0)
    return -1;
  float *wide = buffer + ((size_t)2 * hd + kKeyBlock) * kQueries;
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
      if (widened && m0 + b < j->cached) { /* widened below */
        at[b] = key_position(j, m0 + b);
      } else {
        key[b] = key_row(j, 1, g, m0 + b, &at[b]);
        value[b] = key_row(j, 0, g, m0 + b, &unused);
      }
      any |= at[b] <= last && (j->window <= 0 || at[b] > first - j->window);
    }
    if (!any)
      continue;
    /* 16-bit cache rows: widened to f32 once for the whole tile */
    for (int b = 0; widened && b < count && m0 + b < j->cached; ++b) {
      int type;
      const void *rows[2] = {slot_row(j, 1, g, m0 + b, &type),
                             slot_row(j, 0, g, m0 + b, &type)};
      float *to[2] = {wide + (size_t)b * hd,
                      wide + (size_t)(kKeyBlock + b) * hd};
      for (int r = 0; r < 2; ++r)
        for (int d = 0; d < hd; d += 16)
          _mm512_store_ps(to[r] + d, type == kCacheBF16
                                         ? load16(rows[r], kCacheBF16, d)
                                         : load16(rows[r], kCacheF16, d));
      key[b] = to[0];
      value[b] = to[1];
    }
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
  spark_scratch_put(buffer);
  return 0;
}

/* Decode and short chunks: one task per token and range of keys
 * ("part"), all key / value heads and their query heads together, so that
 * a task reads whole cache slots (every head's row of a position, which lie
 * next to each other) in slot order: one stream per thread, as the
 * thread pool gives each thread a contiguous range of tasks. (One task per
 * key / value head read every other kilobyte of each slot: 12-15 GB/s on a
 * core that streams 34.) A part computes its keys' scores, their softmax
 * against its own largest score and the weighted sums of its values, in
 * blocks of kValueBlock keys (64 dimensions x 4 query heads of
 * accumulators at a time, the block's rows from L1); the parts of a token
 * are then combined, each rescaled by e^(its largest - the token's largest).
 * hd % 64 == 0. */
enum {
  kTokenHeads = 4, /* query heads a pass computes together */
  kMaxParts = 32,  /* key ranges per token */
  /* a sliding layer's 511 keys in 4 ranges: with 2 (256 keys) the ring ran
   * 5-8% faster alone (spark-kernelbench), no faster in the 1.7b's step;
   * more ranges than threads keep the pool's stealing */
  kMinPartKeys = 128,
  kValueBlock = 16,
  kMaxRows = 64, /* key / value heads x query heads rounded up to 4 */
  /* rows requested ahead: key slots, blocks of values (1.7b at 32704
   * positions, Zen 5, 1 and 2 threads, into L1: 3-10% over none; Zen 4, into
   * L2: 16 and 32 key slots, 4 value blocks no faster) */
  kKeysAhead = 8,
  /* keys score_key_run computes together: 4 x kTokenHeads sums in registers
   * (one key at a time: each FMA waited on the one before it) */
  kKeyRun = 4, /* spark_hsum4_ps's four sums */
  kValueBlocksAhead = 2
};

typedef struct token_job {
  attention_job a;
  int parts, part_keys, chunks; /* chunks: ceil(group / kTokenHeads) */
  size_t part_floats;
  float *partial; /* [n][parts][part_floats]: sums [heads][hd], largest
                     [heads], total [heads] */
} token_job;

/* The scores of one key (a row of `type`) for the query heads of its key /
 * value head: `chunks` x kTokenHeads queries at q ([..][hd]), each score
 * to out[row * stride]. */
static inline __attribute__((always_inline)) void
score_key(const float *q, const void *key, const int type, int hd, int chunks,
          size_t stride, float *out) {
  for (int c = 0; c < chunks; ++c) {
    const float *qc = q + (size_t)c * kTokenHeads * hd;
    __m512 a[kTokenHeads];
    for (int h = 0; h < kTokenHeads; ++h)
      a[h] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
      const __m512 kd = load16(key, type, d);
      for (int h = 0; h < kTokenHeads; ++h)
        a[h] =
            _mm512_fmadd_ps(_mm512_load_ps(qc + (size_t)h * hd + d), kd, a[h]);
    }
    float s[4];
    _mm_storeu_ps(s, spark_hsum4_ps(a[0], a[1], a[2], a[3]));
    for (int h = 0; h < kTokenHeads; ++h)
      out[(size_t)(c * kTokenHeads + h) * stride] = s[h];
  }
}

/* score_key for kKeyRun keys at once (rows key[0..kKeyRun-1] of one
 * `type`), score c of a query to out[row * stride + c]: kKeyRun x
 * kTokenHeads independent sums, so that the FMAs do not wait on each other,
 * and each query vector loaded once for the run. */
static inline __attribute__((always_inline)) void
score_key_run(const float *q, const void *const *key, const int type, int hd,
              int chunks, size_t stride, float *out) {
  for (int c = 0; c < chunks; ++c) {
    const float *qc = q + (size_t)c * kTokenHeads * hd;
    __m512 a[kKeyRun][kTokenHeads];
    for (int k = 0; k < kKeyRun; ++k)
      for (int h = 0; h < kTokenHeads; ++h)
        a[k][h] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d += 16) {
      __m512 kd[kKeyRun];
      for (int k = 0; k < kKeyRun; ++k)
        kd[k] = load16(key[k], type, d);
      for (int h = 0; h < kTokenHeads; ++h) {
        const __m512 qh = _mm512_load_ps(qc + (size_t)h * hd + d);
        for (int k = 0; k < kKeyRun; ++k)
          a[k][h] = _mm512_fmadd_ps(qh, kd[k], a[k][h]);
      }
    }
    /* a query's kKeyRun scores, one store */
    for (int h = 0; h < kTokenHeads; ++h)
      _mm_storeu_ps(out + (size_t)(c * kTokenHeads + h) * stride,
                    spark_hsum4_ps(a[0][h], a[1][h], a[2][h], a[3][h]));
  }
}

/* acc[row][d] += w[row][b] * value[b][d] for the `block` rows value[] (of
 * `type`) of one key / value head, its chunks x kTokenHeads query rows
 * (weights w[row * stride + b]); rows of later[] (if not NULL) are
 * requested on the way. */
static inline __attribute__((always_inline)) void
add_value_rows(float *acc, const float *w, size_t stride,
               const void *const *value, const void *const *later, int block,
               const int type, int hd, int chunks) {
  const int size = type == kCacheF32 ? 4 : 2;
  for (int c = 0; c < chunks; ++c) {
    float *ac = acc + (size_t)c * kTokenHeads * hd;
    const float *wc = w + (size_t)c * kTokenHeads * stride;
    for (int d0 = 0; d0 < hd; d0 += 64) {
      __m512 a[kTokenHeads][4];
      for (int h = 0; h < kTokenHeads; ++h)
        for (int e = 0; e < 4; ++e)
          a[h][e] = _mm512_load_ps(ac + (size_t)h * hd + d0 + 16 * e);
      for (int b = 0; b < block; ++b) {
        if (later[b] && c == 0)
          for (int l = 0; l < 64 * size; l += 64)
            _mm_prefetch((const char *)later[b] + d0 * size + l,
                         SPARK_ATTENTION_HINT);
        __m512 v[4];
        for (int e = 0; e < 4; ++e)
          v[e] = load16(value[b], type, d0 + 16 * e);
        for (int h = 0; h < kTokenHeads; ++h) {
          const __m512 wh = _mm512_set1_ps(wc[(size_t)h * stride + b]);
          for (int e = 0; e < 4; ++e)
            a[h][e] = _mm512_fmadd_ps(wh, v[e], a[h][e]);
        }
      }
      for (int h = 0; h < kTokenHeads; ++h)
        for (int e = 0; e < 4; ++e)
          _mm512_store_ps(ac + (size_t)h * hd + d0 + 16 * e, a[h][e]);
    }
  }
}

/* Scores of the cached keys m..end-1 (end - m a multiple of kKeyRun) in
 * consecutive slots of a cache of `type` (spark_attention_seen_run's run:
 * every query of the token sees them), kKeyRun at a time, each key / value
 * head's row kKeysAhead keys on (before `end`) requested: the rows'
 * addresses stepped, no position checks (the keys from `end` on take the
 * caller's loop, which requests its own). From memory, one thread: a full
 * layer of the 1.7b at 32704 bf16 positions 23.0 -> 29.0 GB/s against
 * checking each key as the other keys are (Zen 5); its sliding ring of 511
 * f32 slots 55% -> 67% of the stream (Zen 5, spark-kernelbench), where
 * each key's ring position took a division. */
static inline __attribute__((always_inline)) void
score_seen_keys(const attention_job *j, const float *qs, float *scores,
                size_t stride, int chunks, int m0, int m, int end,
                const int type) {
  const int hd = j->hd, kv = j->kv_heads;
  const size_t size = type == kCacheF32 ? 4 : 2;
  const size_t slot_bytes = (size_t)j->kc->dim[2].stride * size,
               head_bytes = (size_t)j->kc->dim[1].stride * size;
  const char *cache = (const char *)j->kc->host;
  for (; m < end; m += kKeyRun)
    for (int g = 0; g < kv; ++g) {
      const char *row = cache + (size_t)g * head_bytes + (size_t)m * slot_bytes;
      for (int i = 0; i < kKeyRun; ++i)
        if (m + i + kKeysAhead < end)
          for (size_t l = 0; l < (size_t)hd * size; l += 64)
            _mm_prefetch(row + (size_t)(i + kKeysAhead) * slot_bytes + l,
                         SPARK_ATTENTION_HINT);
      const void *key[kKeyRun];
      for (int i = 0; i < kKeyRun; ++i)
        key[i] = row + (size_t)i * slot_bytes;
      score_key_run(qs + (size_t)g * chunks * kTokenHeads * hd, key, type, hd,
                    chunks, stride,
                    scores + (size_t)g * chunks * kTokenHeads * stride +
                        (m - m0));
    }
}

static int token_part_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const token_job *tj = (const token_job *)closure;
  const attention_job *j = &tj->a;
  const int t = task / tj->parts, part = task % tj->parts;
  const int hd = j->hd, group = j->group, kv = j->kv_heads, heads = j->heads;
  const int chunks = tj->chunks, rows = kv * chunks * kTokenHeads;
  const int keys = j->cached + j->n;
  const int m0 = part * tj->part_keys;
  const int m1 = keys < m0 + tj->part_keys ? keys : m0 + tj->part_keys;
  float *sums = tj->partial + ((size_t)t * tj->parts + part) * tj->part_floats;
  float *largest = sums + (size_t)heads * hd, *total = largest + heads;
  for (int h = 0; h < heads; ++h) {
    largest[h] = -3.0e38f;
    total[h] = 0.0f;
  }
  memset(sums, 0, sizeof(float) * (size_t)heads * hd);
  if (m0 >= m1)
    return 0;
  const int count = m1 - m0;
  const size_t stride = (size_t)count + 16; /* a score row, padded */
  float *buffer = NULL;
  /* queries [kv][chunks][kTokenHeads][hd] (absent heads 0), sums of the
   * same shape, scores [kv][chunks][kTokenHeads][stride] */
  if (spark_scratch_get((void **)&buffer, sizeof(float) * (size_t)rows *
                                              (2 * (size_t)hd + stride)) != 0)
    return -1;
  float *qs = buffer, *acc = qs + (size_t)rows * hd,
        *scores = acc + (size_t)rows * hd;
  spark_attention_queries(j, t, chunks * kTokenHeads, qs);

  memset(acc, 0, sizeof(float) * (size_t)rows * hd);
  const int32_t query = j->pos0 + t;
  float top[kMaxRows]; /* per row: the part's largest score */
  int m = m0;
  while (m < m1) {
    if (!key_seen(j, m, query)) {
      for (int r = 0; r < rows; ++r)
        scores[(size_t)r * stride + (m - m0)] = -3.0e38f;
      ++m;
      continue;
    }
    /* a run of cache keys that the query sees: their rows' addresses
     * stepped, no position checks */
    const int seen_end = spark_attention_seen_run(j, m, m1, query);
    const int end = m + (seen_end - m) / kKeyRun * kKeyRun;
    if (end > m) {
      if (j->cache_type == kCacheBF16)
        score_seen_keys(j, qs, scores, stride, chunks, m0, m, end, kCacheBF16);
      else if (j->cache_type == kCacheF16)
        score_seen_keys(j, qs, scores, stride, chunks, m0, m, end, kCacheF16);
      else
        score_seen_keys(j, qs, scores, stride, chunks, m0, m, end, kCacheF32);
      m = end;
      continue;
    }
    const int run = spark_attention_key_run(j, m, m1, query, kKeyRun);
    for (int i = 0; i < run; ++i)
      if (m + i + kKeysAhead < m1)
        for (int g = 0; g < kv; ++g) {
          int type;
          const char *ahead =
              (const char *)slot_row(j, 1, g, m + i + kKeysAhead, &type);
          const int bytes = hd * (type == kCacheF32 ? 4 : 2);
          for (int l = 0; l < bytes; l += 64)
            _mm_prefetch(ahead + l, SPARK_ATTENTION_HINT);
        }
    for (int g = 0; g < kv; ++g) {
      int type;
      const void *key[kKeyRun];
      for (int i = 0; i < run; ++i)
        key[i] = slot_row(j, 1, g, m + i, &type);
      float *out =
          scores + (size_t)g * chunks * kTokenHeads * stride + (m - m0);
      const float *q = qs + (size_t)g * chunks * kTokenHeads * hd;
      if (run == kKeyRun) {
        if (type == kCacheBF16)
          score_key_run(q, key, kCacheBF16, hd, chunks, stride, out);
        else if (type == kCacheF16)
          score_key_run(q, key, kCacheF16, hd, chunks, stride, out);
        else
          score_key_run(q, key, kCacheF32, hd, chunks, stride, out);
      } else if (type == kCacheBF16) {
        score_key(q, key[0], kCacheBF16, hd, chunks, stride, out);
      } else if (type == kCacheF16) {
        score_key(q, key[0], kCacheF16, hd, chunks, stride, out);
      } else {
        score_key(q, key[0], kCacheF32, hd, chunks, stride, out);
      }
    }
    m += run;
  }
  const __m512 hidden = _mm512_set1_ps(-1.0e38f);
  float sum_of[kMaxRows];
  for (int r = 0; r < rows; ++r) {
    float *row = scores + (size_t)r * stride;
    for (int m = count; m < count + 16; ++m) /* padding: weight 0 */
      row[m] = -3.0e38f;
    __m512 high = _mm512_set1_ps(-3.0e38f);
    for (int m = 0; m < count; m += 16)
      high = _mm512_max_ps(high, _mm512_loadu_ps(row + m));
    top[r] = _mm512_reduce_max_ps(high);
    const __m512 largest16 = _mm512_set1_ps(top[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int m = 0; m < count; m += 16) {
      const __m512 score = _mm512_loadu_ps(row + m);
      const __m512 w = _mm512_maskz_mov_ps(
          _mm512_cmp_ps_mask(score, hidden, _CMP_GT_OQ),
          exp16_nonpositive(_mm512_sub_ps(score, largest16)));
      _mm512_storeu_ps(row + m, w);
      sum = _mm512_add_ps(sum, w);
    }
    sum_of[r] = _mm512_reduce_add_ps(sum);
  }
  /* blocks of kValueBlock keys, split where the cache's rows end and the
   * chunk's begin (their types differ) */
  for (int b0 = 0; b0 < count;) {
    const int block =
        spark_attention_value_block(j, m0 + b0, count - b0, kValueBlock);
    for (int g = 0; g < kv; ++g) {
      const void *value[kValueBlock], *later[kValueBlock];
      int type = kCacheF32, unused;
      for (int b = 0; b < block; ++b) {
        value[b] = slot_row(j, 0, g, m0 + b0 + b, &type);
        const int m = m0 + b0 + b + kValueBlocksAhead * kValueBlock;
        later[b] = m < m1 ? slot_row(j, 0, g, m, &unused) : NULL;
      }
      const size_t row0 = (size_t)g * chunks * kTokenHeads;
      float *ag = acc + row0 * hd;
      const float *wg = scores + row0 * stride + b0;
      if (type == kCacheBF16)
        add_value_rows(ag, wg, stride, value, later, block, kCacheBF16, hd,
                       chunks);
      else if (type == kCacheF16)
        add_value_rows(ag, wg, stride, value, later, block, kCacheF16, hd,
                       chunks);
      else
        add_value_rows(ag, wg, stride, value, later, block, kCacheF32, hd,
                       chunks);
    }
    b0 += block;
  }
  for (int r = 0; r < rows; ++r) {
    const int g = r / (chunks * kTokenHeads), h = r % (chunks * kTokenHeads);
    if (h >= group)
      continue;
    const int head = g * group + h;
    memcpy(sums + (size_t)head * hd, acc + (size_t)r * hd,
           sizeof(float) * (size_t)hd);
    largest[head] = top[r];
    total[head] = sum_of[r];
  }
  spark_scratch_put(buffer);
  return 0;
}

/* Token t's output from its parts' sums. */
static void token_combine(const token_job *tj, int t, float *out) {
  const attention_job *j = &tj->a;
  const int hd = j->hd, heads = j->heads;
  for (int head = 0; head < heads; ++head) {
    float top = -3.0e38f;
    for (int p = 0; p < tj->parts; ++p) {
      const float *largest = tj->partial +
                             ((size_t)t * tj->parts + p) * tj->part_floats +
                             (size_t)heads * hd;
      if (largest[head] > top)
        top = largest[head];
    }
    float total = 0.0f;
    memset(out, 0, sizeof(float) * (size_t)hd);
    for (int p = 0; p < tj->parts; ++p) {
      const float *sums =
          tj->partial + ((size_t)t * tj->parts + p) * tj->part_floats;
      const float *largest = sums + (size_t)heads * hd,
                  *totals = largest + heads;
      if (totals[head] == 0.0f)
        continue;
      const float factor = expf(largest[head] - top);
      total += totals[head] * factor;
      const __m512 f = _mm512_set1_ps(factor);
      const float *s = sums + (size_t)head * hd;
      for (int d = 0; d < hd; d += 16)
        _mm512_store_ps(out + d, _mm512_fmadd_ps(f, _mm512_load_ps(s + d),
                                                 _mm512_load_ps(out + d)));
    }
    spark_attention_store(j, head, t, out, 1, total);
  }
}

static int token_attention(const attention_job *job) {
  token_job tj;
  tj.a = *job;
  const int keys = job->cached + job->n;
  /* parts of at least kMinPartKeys keys (a multiple of kValueBlock), at
   * most kMaxParts a token */
  int part_keys = (keys + kMaxParts - 1) / kMaxParts;
  if (part_keys < kMinPartKeys)
    part_keys = kMinPartKeys;
  part_keys = (part_keys + kValueBlock - 1) / kValueBlock * kValueBlock;
  tj.part_keys = part_keys;
  tj.parts = (keys + part_keys - 1) / part_keys;
  tj.chunks = (job->group + kTokenHeads - 1) / kTokenHeads;
  tj.part_floats =
      (size_t)job->heads * job->hd + ((size_t)2 * job->heads + 15) / 16 * 16;
  if (job->kv_heads * tj.chunks * kTokenHeads > kMaxRows)
    return job->cache_type != kCacheF32
               ? -1
               : halide_do_par_for(NULL, attention_task, 0,
                                   job->kv_heads * job->n, (uint8_t *)job);
  const size_t floats = (size_t)job->n * tj.parts * tj.part_floats + job->hd;
  if (spark_scratch_get((void **)&tj.partial, sizeof(float) * floats) != 0)
    return -1;
  int rc = halide_do_par_for(NULL, token_part_task, 0, job->n * tj.parts,
                             (uint8_t *)&tj);
  if (rc == 0)
    for (int t = 0; t < job->n; ++t)
      token_combine(&tj, t, tj.partial + floats - job->hd);
  spark_scratch_put(tj.partial);
  return rc;
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
    return job.cache_type != kCacheF32
               ? -1
               : halide_do_par_for(NULL, attention_task, 0,
                                   job.kv_heads * job.n, (uint8_t *)&job);
  if (job.n < kTiledTokens)
    return token_attention(&job);
  const int tokens = kQueries / job.group;
  return halide_do_par_for(NULL, tile_task, 0,
                           job.kv_heads * ((job.n + tokens - 1) / tokens),
                           (uint8_t *)&job);
}
