/* neon_attention.c - attention for the arm64 `dotprod` variant (every
 * recent phone core); the `neon` floor keeps Halide's kernel.
 *
 * The function and its job: attention_job.h (targets/common/lib). Halide's
 * kernel runs one task per query head and token, and each task reads every
 * key and value of its key / value head: with Spark's groups of 4 query
 * heads a key / value head, each cached row was read 4 times a token. Here
 * one task per token and range of keys takes every head, so each cache slot
 * (its key / value heads next to each other) is read once a token, in slot
 * order:
 *   scores: kKeyRun keys against 4 query heads at a time (16 independent
 *           sums, each key and query vector loaded once), stored a key's 4
 *           heads side by side;
 *   softmax: against the range's largest score, 4 query heads at a time;
 *   values: blocks of kValueBlock keys, 16 dimensions x 4 query heads of
 *           accumulators in registers, a key's 4 weights one vector whose
 *           lanes the FMAs take.
 * The ranges of a token are then combined, each rescaled by e^(its largest -
 * the token's largest). Ranges of at least kMinPartKeys keys and at most
 * kMaxParts a token, so that a long context's decode runs on every thread;
 * a chunk of kWholeKeysTokens tokens or more reads all its keys in one
 * range per token.
 * A token's keys stop at its own row (the chunk's later rows are causal
 * misses). The caches hold f32, bf16 or f16 (each element widened to f32).
 * Needs hd % 16 == 0 and at most kMaxRows query rows (the heads, each
 * key / value head's group rounded up to 4); attentionFits() in
 * Arm64Target.cpp checks the same. Base ARMv8-A NEON. */
#include "attention_job.h"

#include <arm_neon.h>
#include <stdlib.h>
#include <string.h>

enum {
  kHeadRun = 4,  /* query heads a score or value pass computes together */
  kMaxRows = 64, /* key / value heads x query heads rounded up to 4 */
  kMaxParts = 32,
  kMinPartKeys = 128,
  kWholeKeysTokens = 4,
  kValueBlock = 16,
  kKeyRun = 4,    /* keys a score pass computes together */
  kSlotsAhead = 4 /* cache slots requested ahead of the score pass */
};

/* e^x for x <= 0, as x86_attention.h's exp_nonpositive: x = n ln 2 + r,
 * e^r by its degree-6 Taylor series, 2^n through the exponent bits; below
 * -87 the result is 0. */
static inline float32x4_t exp4_nonpositive(float32x4_t x) {
  const float32x4_t tiny = vdupq_n_f32(-87.0f);
  const uint32x4_t underflow = vcltq_f32(x, tiny);
  x = vmaxq_f32(x, tiny);
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145752f));
  r = vfmsq_f32(r, n, vdupq_n_f32(1.42860677e-6f));
  float32x4_t p = vdupq_n_f32(1.0f / 720.0f);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
  const int32x4_t bits =
      vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
  const float32x4_t e = vmulq_f32(p, vreinterpretq_f32_s32(bits));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(e), underflow));
}

/* Elements d..d+3 of a row of `type`, as f32. */
static inline __attribute__((always_inline)) float32x4_t
load4(const void *row, const int type, int d) {
  if (type == kCacheBF16)
    return vreinterpretq_f32_u32(
        vshll_n_u16(vld1_u16((const uint16_t *)row + d), 16));
  if (type == kCacheF16)
    return vcvt_f32_f16(
        vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + d)));
  return vld1q_f32((const float *)row + d);
}

/* The scores of the kKeyRun key rows key[] (of `type`) for the kHeadRun
 * query rows at q ([kHeadRun][hd], scaled): out[k] holds key k's, one lane a
 * query row. kKeyRun x kHeadRun independent sums, each query and key vector
 * loaded once. */
static inline __attribute__((always_inline)) void
score_keys(const float *q, const void *const *key, const int type, int hd,
           float *out) {
  float32x4_t a[kKeyRun][kHeadRun];
  for (int k = 0; k < kKeyRun; ++k)
    for (int h = 0; h < kHeadRun; ++h)
      a[k][h] = vdupq_n_f32(0.0f);
  for (int d = 0; d < hd; d += 4) {
    float32x4_t kd[kKeyRun];
    for (int k = 0; k < kKeyRun; ++k)
      kd[k] = load4(key[k], type, d);
    for (int h = 0; h < kHeadRun; ++h) {
      const float32x4_t qh = vld1q_f32(q + (size_t)h * hd + d);
      for (int k = 0; k < kKeyRun; ++k)
        a[k][h] = vfmaq_f32(a[k][h], qh, kd[k]);
    }
  }
  for (int k = 0; k < kKeyRun; ++k)
    vst1q_f32(out + 4 * k, vpaddq_f32(vpaddq_f32(a[k][0], a[k][1]),
                                      vpaddq_f32(a[k][2], a[k][3])));
}

/* acc[h][d] += w[b][h] * value[b][d] for the `block` rows value[] (of
 * `type`) and the kHeadRun query rows of acc ([kHeadRun][hd]); w holds a
 * key's kHeadRun weights side by side. */
static inline __attribute__((always_inline)) void
add_value_rows(float *acc, const float *w, const void *const *value, int block,
               const int type, int hd) {
  for (int d0 = 0; d0 < hd; d0 += 16) {
    float32x4_t a[kHeadRun][4];
    for (int h = 0; h < kHeadRun; ++h)
      for (int e = 0; e < 4; ++e)
        a[h][e] = vld1q_f32(acc + (size_t)h * hd + d0 + 4 * e);
    for (int b = 0; b < block; ++b) {
      float32x4_t v[4];
      for (int e = 0; e < 4; ++e)
        v[e] = load4(value[b], type, d0 + 4 * e);
      const float32x4_t wb = vld1q_f32(w + 4 * b);
      for (int e = 0; e < 4; ++e) {
        a[0][e] = vfmaq_laneq_f32(a[0][e], v[e], wb, 0);
        a[1][e] = vfmaq_laneq_f32(a[1][e], v[e], wb, 1);
        a[2][e] = vfmaq_laneq_f32(a[2][e], v[e], wb, 2);
        a[3][e] = vfmaq_laneq_f32(a[3][e], v[e], wb, 3);
      }
    }
    for (int h = 0; h < kHeadRun; ++h)
      for (int e = 0; e < 4; ++e)
        vst1q_f32(acc + (size_t)h * hd + d0 + 4 * e, a[h][e]);
  }
}

/* Requests the rows of every key / value head of slot (or chunk row) m. */
static inline void prefetch_slot(const attention_job *j, int cache_key, int m) {
  for (int g = 0; g < j->kv_heads; ++g) {
    int type;
    const char *row = (const char *)slot_row(j, cache_key, g, m, &type);
    const int bytes = j->hd * (type == kCacheF32 ? 4 : 2);
    for (int l = 0; l < bytes; l += 64)
      __builtin_prefetch(row + l, 0, 2);
  }
}

typedef struct token_job {
  attention_job a;
  int parts, part_keys, runs; /* runs: ceil(group / kHeadRun) */
  size_t part_floats;
  float *partial; /* [n][parts][part_floats]: sums [rows][hd], largest
                     [rows], total [rows] */
} token_job;

/* Token task / parts against its range of keys task % parts: the range's
 * weighted value sums, largest score and sum of weights of every query row
 * into the token's part of `partial`. The query rows of key / value head g,
 * run c, are rows (g * runs + c) * kHeadRun on: query head g * group + h is
 * row g * runs * kHeadRun + h, and the rows past a group are zero queries
 * whose sums are never read. */
static int token_part_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const token_job *tj = (const token_job *)closure;
  const attention_job *j = &tj->a;
  const int t = task / tj->parts, part = task % tj->parts;
  const int hd = j->hd, kv = j->kv_heads, runs = tj->runs;
  const int rows = kv * runs * kHeadRun;
  const int32_t query = j->pos0 + t;
  /* the token's keys end at its own row */
  const int keys = j->cached + t + 1;
  const int m0 = part * tj->part_keys;
  const int m1 = keys < m0 + tj->part_keys ? keys : m0 + tj->part_keys;
  float *sums = tj->partial + ((size_t)t * tj->parts + part) * tj->part_floats;
  float *largest = sums + (size_t)rows * hd, *total = largest + rows;
  memset(sums, 0, sizeof(float) * (size_t)rows * hd);
  for (int r = 0; r < rows; ++r) {
    largest[r] = -3.0e38f;
    total[r] = 0.0f;
  }
  if (m0 >= m1)
    return 0;
  const int count = m1 - m0;
  /* the scores, then weights, of run R = g * runs + c: [R][key][kHeadRun] */
  const size_t run_floats = (size_t)count * kHeadRun;
  float *buffer = NULL;
  /* queries [rows][hd] (absent heads 0), scores [rows / kHeadRun][count]
   * [kHeadRun] */
  if (spark_scratch_get((void **)&buffer, sizeof(float) * (size_t)rows *
                                              ((size_t)hd + count)) != 0)
    return -1;
  float *qs = buffer, *scores = qs + (size_t)rows * hd;
  spark_attention_queries(j, t, runs * kHeadRun, qs);

  const float32x4_t lowest = vdupq_n_f32(-3.0e38f);
  /* keys before seen_end: a run of cache keys the query sees (no position
   * checks: for a ring each took a division) */
  int seen_end = m0;
  for (int m = m0; m < m1;) {
    if (m >= seen_end) {
      if (!key_seen(j, m, query)) {
        for (int R = 0; R < kv * runs; ++R)
          vst1q_f32(scores + R * run_floats + (size_t)(m - m0) * kHeadRun,
                    lowest);
        ++m;
        continue;
      }
      seen_end = spark_attention_seen_run(j, m, m1, query);
    }
    const int run = seen_end - m >= kKeyRun
                        ? kKeyRun
                        : spark_attention_key_run(j, m, m1, query, kKeyRun);
    for (int i = 0; i < run; ++i)
      if (m + i + kSlotsAhead < m1)
        prefetch_slot(j, 1, m + i + kSlotsAhead);
    for (int g = 0; g < kv; ++g) {
      int type;
      const void *key[kKeyRun];
      for (int i = 0; i < run; ++i)
        key[i] = slot_row(j, 1, g, m + i, &type);
      for (int i = run; i < kKeyRun; ++i) /* one key: the rest repeat it */
        key[i] = key[0];
      for (int c = 0; c < runs; ++c) {
        const size_t r0 = (size_t)(g * runs + c) * kHeadRun;
        const float *q = qs + r0 * hd;
        float out[kKeyRun * kHeadRun];
        if (type == kCacheBF16)
          score_keys(q, key, kCacheBF16, hd, out);
        else if (type == kCacheF16)
          score_keys(q, key, kCacheF16, hd, out);
        else
          score_keys(q, key, kCacheF32, hd, out);
        memcpy(scores + (g * runs + c) * run_floats +
                   (size_t)(m - m0) * kHeadRun,
               out, sizeof(float) * (size_t)run * kHeadRun);
      }
    }
    m += run;
  }
  /* each query row's softmax against its largest score, 4 rows at a time;
   * a row that sees no key of the range gets weights 0 and total 0 */
  const float32x4_t hidden = vdupq_n_f32(-1.0e38f);
  for (int R = 0; R < kv * runs; ++R) {
    float *run_scores = scores + R * run_floats;
    float32x4_t top = lowest;
    for (int m = 0; m < count; ++m)
      top = vmaxq_f32(top, vld1q_f32(run_scores + (size_t)m * kHeadRun));
    float32x4_t sum = vdupq_n_f32(0.0f);
    for (int m = 0; m < count; ++m) {
      const float32x4_t score = vld1q_f32(run_scores + (size_t)m * kHeadRun);
      const float32x4_t w = vreinterpretq_f32_u32(vandq_u32(
          vcgtq_f32(score, hidden),
          vreinterpretq_u32_f32(exp4_nonpositive(vsubq_f32(score, top)))));
      vst1q_f32(run_scores + (size_t)m * kHeadRun, w);
      sum = vaddq_f32(sum, w);
    }
    vst1q_f32(largest + (size_t)R * kHeadRun, top);
    vst1q_f32(total + (size_t)R * kHeadRun, sum);
  }
  /* blocks of kValueBlock keys, split where the cache's rows end and the
   * chunk's begin (their types differ) */
  for (int b0 = 0; b0 < count;) {
    const int block =
        spark_attention_value_block(j, m0 + b0, count - b0, kValueBlock);
    for (int b = 0; b < block; ++b)
      if (m0 + b0 + block + b < m1)
        prefetch_slot(j, 0, m0 + b0 + block + b);
    for (int g = 0; g < kv; ++g) {
      const void *value[kValueBlock];
      int type = kCacheF32;
      for (int b = 0; b < block; ++b)
        value[b] = slot_row(j, 0, g, m0 + b0 + b, &type);
      for (int c = 0; c < runs; ++c) {
        const size_t r0 = (size_t)(g * runs + c) * kHeadRun;
        float *acc = sums + r0 * hd;
        const float *w =
            scores + (g * runs + c) * run_floats + (size_t)b0 * kHeadRun;
        if (type == kCacheBF16)
          add_value_rows(acc, w, value, block, kCacheBF16, hd);
        else if (type == kCacheF16)
          add_value_rows(acc, w, value, block, kCacheF16, hd);
        else
          add_value_rows(acc, w, value, block, kCacheF32, hd);
      }
    }
    b0 += block;
  }
  spark_scratch_put(buffer);
  return 0;
}

/* Token t's output from its ranges' sums (`out`: hd floats of scratch). */
static void token_combine(const token_job *tj, int t, float *out) {
  const attention_job *j = &tj->a;
  const int hd = j->hd, group = j->group, runs = tj->runs;
  const int rows = j->kv_heads * runs * kHeadRun;
  for (int head = 0; head < j->heads; ++head) {
    const int r = head / group * runs * kHeadRun + head % group;
    float top = -3.0e38f;
    for (int p = 0; p < tj->parts; ++p) {
      const float *sums =
          tj->partial + ((size_t)t * tj->parts + p) * tj->part_floats;
      const float *total = sums + (size_t)rows * hd + rows;
      if (total[r] > 0.0f && sums[(size_t)rows * hd + r] > top)
        top = sums[(size_t)rows * hd + r];
    }
    memset(out, 0, sizeof(float) * (size_t)hd);
    float all = 0.0f;
    for (int p = 0; p < tj->parts; ++p) {
      const float *sums =
          tj->partial + ((size_t)t * tj->parts + p) * tj->part_floats;
      const float largest = sums[(size_t)rows * hd + r],
                  total = sums[(size_t)rows * hd + rows + r];
      if (total <= 0.0f)
        continue;
      const float factor = expf(largest - top);
      all += total * factor;
      const float *s = sums + (size_t)r * hd;
      for (int d = 0; d < hd; d += 4)
        vst1q_f32(out + d,
                  vfmaq_n_f32(vld1q_f32(out + d), vld1q_f32(s + d), factor));
    }
    spark_attention_store(j, head, t, out, 1, all);
  }
}

int spark_neon_attention(halide_buffer_t *q, halide_buffer_t *k,
                         halide_buffer_t *v, halide_buffer_t *k_cache,
                         halide_buffer_t *v_cache, halide_buffer_t *gate,
                         int32_t pos0, int32_t cached, halide_buffer_t *out,
                         float scale, int32_t window, int32_t ring) {
  token_job tj;
  if (spark_attention_job(&tj.a, q, k, v, k_cache, v_cache, gate, pos0, cached,
                          out, scale, window, ring) != 0)
    return -1;
  const attention_job *job = &tj.a;
  tj.runs = (job->group + kHeadRun - 1) / kHeadRun;
  const int rows = job->kv_heads * tj.runs * kHeadRun;
  if (job->hd % 16 != 0 || rows > kMaxRows)
    return -1;
  const int keys = job->cached + job->n;
  /* ranges of at least kMinPartKeys keys (a multiple of kValueBlock), at
   * most kMaxParts a token; chunks of kWholeKeysTokens tokens or more take
   * every key in one range (their tokens are tasks enough, and the ranges'
   * partial sums, n x parts x rows x hd floats, would take 17 MiB a call for
   * a chunk of 64 tokens of the 1.7b at 4096 positions) */
  int part_keys = (keys + kMaxParts - 1) / kMaxParts;
  if (part_keys < kMinPartKeys)
    part_keys = kMinPartKeys;
  if (job->n >= kWholeKeysTokens)
    part_keys = keys;
  part_keys = (part_keys + kValueBlock - 1) / kValueBlock * kValueBlock;
  tj.part_keys = part_keys;
  tj.parts = (keys + part_keys - 1) / part_keys;
  tj.part_floats = (size_t)rows * job->hd + 2 * (size_t)rows;
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
