/* avx2_linear.c - AVX2 kernels for the quantized and bf16 matrix products of
 * the avx2 variant (CPUs without AVX-512: the variant that serves every
 * x86-64 CPU with AVX2, FMA and F16C).
 *
 * Same interface as the Halide linear kernels (x f32 [K, T], out f32 [N, T]):
 *   w8a8:  (x, w s8 [K, N], scales f32 [N], input_scale, out)
 *   w4a8:  (x, w u8 [K/2, N], scales f16 [K/G, N], input_scale, out)
 *   w4a16: (x, w u8 [K/2, N], scales f16 [K/G, N], zeros f16 [K/G, N], out)
 *   w8a16: (x, w s8 [K, N], scales f32 [N], out)
 *   bf16:  (x, w bf16 [K, N], out)
 * 4-bit weights hold two codes a byte, low nibble first, in groups of G = 64
 * or 128 along K (the group size is K over the scales' extent). Integer inputs
 * (a8) are quantized per call with the rule of the Halide kernels
 * (microkernel_support.h); 16-bit inputs are rounded to the build's activation
 * type (x86_inputs.h): bf16 and f16 ones are then multiplied as int16 (see the
 * int16 blocks), f32 ones in f32.
 *
 * Int8 products use vpmaddubsw (u8 x s8 pairs into int16) and vpmaddwd
 * (int16 pairs into int32):
 *   w8a8: |x| is the unsigned side and the weights carry the sign of x
 *         (vpsignb); |x w| <= 127 * 127, so no pair saturates.
 *   w4a8: the codes 0..15 are the unsigned side; a group's int16 partial
 *         sums stay below 4 * 2 * 15 * 127; the -8 of (code - 8) * scale
 *         comes off as 8 * scale * the group's sum of input codes.
 * f32 products (f32 inputs, bf16 weights) widen the weights to f32 (4-bit:
 * the zero point comes off as scale * zero * the group's input sum) and
 * accumulate with FMAs.
 *
 * Each parallel task takes kRowsPerTask consecutive rows, one row at a time,
 * so the weights are read as one linear stream; one token (decode) requests
 * each line kSparkPrefetchAvx2 ahead of its use (the 4-bit schemes: a row
 * function with G constant, eight groups' factors at a time). More tokens
 * run 4 at a time against each row (int8 inputs: against 2 rows at a time),
 * so every weight load feeds 4 tokens while the task's rows stay in cache.
 * Blocks keep several independent accumulators so that no FMA latency chain
 * limits a row. Compiled with -mavx2 -mfma -mf16c. */
#include "HalideRuntime.h"
#include "avx2_support.h"
#include "microkernel_support.h"
#include "x86_inputs.h"
#include "x86_inputs_avx2.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

enum { kRowsPerTask = 64, kInputGroup = 128 };

/* The group size of a 4-bit product from its scales, or 0 if not one this
 * file takes (SPARK_MK_SMALL_GROUP, SPARK_MK_GROUP). */
static inline int group_of(const halide_buffer_t *x,
                           const halide_buffer_t *scales) {
  const int K = x->dim[0].extent, groups = scales->dim[0].extent;
  if (groups <= 0 || K % groups != 0)
    return 0;
  const int group = K / groups;
  return group == SPARK_MK_SMALL_GROUP || group == SPARK_MK_GROUP ? group : 0;
}

/* One token reads each row once, from memory (microkernel_support.h). */
static inline void prefetch_line(const void *line) {
  spark_prefetch_ahead(line, kSparkPrefetchAvx2);
}

#define SPARK_BLOCK static inline __attribute__((always_inline)) void

/* The 64 codes of 32 packed bytes at p: the low nibbles (even indices) and
 * the high ones (odd), a byte each. */
static inline void spark_nibbles(const uint8_t *p, __m256i *even,
                                 __m256i *odd) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i bytes = _mm256_loadu_si256((const __m256i *)p);
  *even = _mm256_and_si256(bytes, low);
  *odd = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low);
}

/* One token: group g's line of a 4-bit row (G / 2 bytes), requested ahead
 * once per 64 bytes. */
static inline void prefetch_group(const uint8_t *line, int g, int G) {
  if (G == 128 || g % 2 == 0)
    prefetch_line(line);
}

typedef struct avx2_job {
  const uint8_t *w;           /* [N][row bytes] (4-bit: [N][w_stride]) */
  const float *row_scales;    /* w8a8, w8a16: [N] */
  const uint16_t *scales;     /* 4-bit: f16 [N][s_stride], K/G a row */
  const uint16_t *zeros;      /* w4a16: f16 [N][s_stride], K/G a row */
  const int8_t *codes;        /* a8: [T][K] (w4a8: reordered per group) */
  const int8_t *magnitudes;   /* w8a8: |codes| */
  const float *token_scales;  /* a8: [T] */
  const float *inputs;        /* a16: [T][K] (w4a16: reordered per group) */
  const float *sums;          /* 4-bit: [T][K/G] input (code) sums */
  const int16_t *inputs16;    /* 16-bit inputs as int16: [T][K] (w4a16:
                                 reordered per group) */
  const float *input_scales;  /* their scale per token and group [T][K/G] */
  const uint8_t *input_bytes; /* w4a16: the int16 inputs of each token and
                                 group as 4 x G/2 bytes: low bytes of the even-
                                 and odd-index inputs, then high bytes */
  float *out;                 /* [T][out_stride] */
  int K, N, T, out_stride;
  int group; /* 4-bit: G; w8a16 int16 inputs: their scaling group (128) */
  /* 4-bit: bytes from one row of codes to the next, f16 from one row of
   * scales (zero points) to the next: dense rows, or grouped rows whose
   * scales and zero points follow each row's codes (spark_grouped_rows_fit) */
  int w_stride, s_stride;
  int narrow; /* one token: the 128-bit rows (narrow_rows()) */
} avx2_job;

/* One token, grouped rows: the lines of row `row` after its K/2 code bytes
 * (its scales and zero points), requested as far ahead as its codes. */
static inline void prefetch_sides(const avx2_job *j, const uint8_t *row) {
  for (int b = j->K / 2; b < j->w_stride; b += 64)
    prefetch_line(row + b);
}

/* ---- int8 inputs ------------------------------------------------------- */

/* Row n times tokens t0..t0+TB-1 (TB constant after inlining; one token:
 * prefill runs w8a8_tile). */
SPARK_BLOCK w8a8_block(const avx2_job *j, int n, int t0, const int TB) {
  const int K = j->K;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[4];
  for (int t = 0; t < TB; ++t)
    acc[t] = _mm256_setzero_si256();
  const uint8_t *row = j->w + (size_t)n * K;
  for (int k = 0; k < K; k += 32) {
    if (TB == 1 && k % 64 == 0)
      prefetch_line(row + k);
    const __m256i wv = _mm256_loadu_si256((const __m256i *)(row + k));
    for (int t = 0; t < TB; ++t) {
      const size_t at = (size_t)(t0 + t) * K + k;
      const __m256i xv = _mm256_load_si256((const __m256i *)(j->codes + at));
      const __m256i ax =
          _mm256_load_si256((const __m256i *)(j->magnitudes + at));
      const __m256i pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv, xv));
      acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pairs, ones));
    }
  }
  for (int t = 0; t < TB; ++t)
    j->out[(size_t)(t0 + t) * j->out_stride + n] =
        (float)spark_hsum_epi32(acc[t]) * j->row_scales[n] *
        j->token_scales[t0 + t];
}

/* ---- 16-bit inputs, f32 products --------------------------------------- */

/* 8 weights of `row` from column k as f32: int8 codes (w8a16) or bf16. */
static inline __m256 widen8(const uint8_t *row, int bf16, int k) {
  if (bf16) {
    const __m128i h = _mm_loadu_si128((const __m128i *)(row + 2 * (size_t)k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  const __m128i b = _mm_loadl_epi64((const __m128i *)(row + k));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

/* w8a16 and bf16 (`bf16` constant after inlining). One token keeps 4 partial
 * sums, 4 tokens 2 each: independent FMA chains. */
SPARK_BLOCK wide_block(const avx2_job *j, int bf16, int n, int t0,
                       const int TB) {
  /* 4 chains for one token where K allows (K is a multiple of 16). */
  const int K = j->K, H = TB == 1 && K % 32 == 0 ? 4 : 2, bytes = bf16 ? 2 : 1;
  __m256 acc[4][4];
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < TB; ++t)
      acc[h][t] = _mm256_setzero_ps();
  const uint8_t *row = j->w + (size_t)n * K * bytes;
  for (int k = 0; k < K; k += 8 * H) {
    /* a step covers 32 (int8) or 64 (bf16) bytes: one request a line */
    if (TB == 1 && ((size_t)k * bytes) % 64 == 0)
      prefetch_line(row + (size_t)k * bytes);
    for (int h = 0; h < H; ++h) {
      const __m256 wv = widen8(row, bf16, k + 8 * h);
      for (int t = 0; t < TB; ++t)
        acc[h][t] = _mm256_fmadd_ps(
            wv, _mm256_load_ps(j->inputs + (size_t)(t0 + t) * K + k + 8 * h),
            acc[h][t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    __m256 sum = acc[0][t];
    for (int h = 1; h < H; ++h)
      sum = _mm256_add_ps(sum, acc[h][t]);
    float v = spark_hsum_ps(sum);
    if (!bf16)
      v *= j->row_scales[n];
    j->out[(size_t)(t0 + t) * j->out_stride + n] = v;
  }
}

/* One token keeps 4 chains for the even and 4 for the odd codes of a group,
 * 4 tokens one each. */
SPARK_BLOCK w4a16_block(const avx2_job *j, int n, int t0, const int TB) {
  const int K = j->K, G = j->group, groups = K / G, C = TB == 1 ? 4 : 1;
  const __m256i low = _mm256_set1_epi32(15);
  __m256 acc[4];
  float offset[4];
  for (int t = 0; t < TB; ++t) {
    acc[t] = _mm256_setzero_ps();
    offset[t] = 0.0f;
  }
  const uint8_t *row = j->w + (size_t)n * j->w_stride;
  if (TB == 1)
    prefetch_sides(j, row);
  for (int g = 0; g < groups; ++g) {
    const uint8_t *line = row + (size_t)g * (G / 2);
    if (TB == 1)
      prefetch_group(line, g, G);
    __m256 even[4][4], odd[4][4]; /* [chain][token] */
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < TB; ++t)
        even[c][t] = odd[c][t] = _mm256_setzero_ps();
    for (int q = 0; q < G / 16; ++q) { /* 8 bytes: 8 even + 8 odd codes */
      const __m256i bytes = _mm256_cvtepu8_epi32(
          _mm_loadl_epi64((const __m128i *)(line + 8 * q)));
      const __m256 e = _mm256_cvtepi32_ps(_mm256_and_si256(bytes, low));
      const __m256 o = _mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4));
      const int c = q % C;
      for (int t = 0; t < TB; ++t) {
        const float *x =
            j->inputs + (size_t)(t0 + t) * K + (size_t)g * G + 8 * q;
        even[c][t] = _mm256_fmadd_ps(e, _mm256_load_ps(x), even[c][t]);
        odd[c][t] = _mm256_fmadd_ps(o, _mm256_load_ps(x + G / 2), odd[c][t]);
      }
    }
    const size_t at = (size_t)n * j->s_stride + g;
    const float scale = _cvtsh_ss(j->scales[at]);
    const float zero = _cvtsh_ss(j->zeros[at]);
    for (int t = 0; t < TB; ++t) {
      __m256 dot = _mm256_add_ps(even[0][t], odd[0][t]);
      for (int c = 1; c < C; ++c)
        dot = _mm256_add_ps(dot, _mm256_add_ps(even[c][t], odd[c][t]));
      acc[t] = _mm256_fmadd_ps(dot, _mm256_set1_ps(scale), acc[t]);
      offset[t] += scale * zero * j->sums[(size_t)(t0 + t) * groups + g];
    }
  }
  for (int t = 0; t < TB; ++t)
    j->out[(size_t)(t0 + t) * j->out_stride + n] =
        spark_hsum_ps(acc[t]) - offset[t];
}

/* ---- bf16 / f16 inputs, int16 products --------------------------------- */

/* The inputs rounded to bf16 or f16 are taken as int16 multiples of a power
 * of two per token and group (the weights' group G, or 128 for w8a16; see
 * spark_int16_group in x86_inputs.h). The products are vpmaddwd of int16
 * weights (codes widened with vpmovzxbw / vpmovsxbw) and these inputs into
 * exact int32 sums, scaled once per group. */

/* The f32 factors of 8 groups from group g on (fewer at the end): each
 * group's weight scale times its input scale, into factor[0..8), and the
 * zero-point term of those groups, sum of scale * zero * input sum. */
static inline float group_factors(const avx2_job *j, int n, int t, int g,
                                  float *factor) {
  const int groups = j->K / j->group, count = groups - g < 8 ? groups - g : 8;
  const size_t at = (size_t)n * j->s_stride + g, tg = (size_t)t * groups + g;
  float offset = 0.0f;
  if (count == 8) {
    const __m256 scale =
        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(j->scales + at)));
    const __m256 zero =
        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(j->zeros + at)));
    _mm256_storeu_ps(
        factor, _mm256_mul_ps(scale, _mm256_loadu_ps(j->input_scales + tg)));
    offset = spark_hsum_ps(_mm256_mul_ps(_mm256_mul_ps(scale, zero),
                                         _mm256_loadu_ps(j->sums + tg)));
    return offset;
  }
  for (int i = 0; i < count; ++i) {
    const float scale = _cvtsh_ss(j->scales[at + i]);
    factor[i] = scale * j->input_scales[tg + i];
    offset += scale * _cvtsh_ss(j->zeros[at + i]) * j->sums[tg + i];
  }
  return offset;
}

/* w4a16: (code - zero) * scale per group. Each int16 input is split into
 * its high byte (signed) and low byte (unsigned), so that vpmaddubsw
 * multiplies the nibbles with both, 32 bytes of weights at a time: pair
 * sums stay below 2 x 15 x 255, a group's below 2^15. Four tokens here (one
 * token: four_bit_row). */
SPARK_BLOCK w4a16_int16_block(const avx2_job *j, int n, int t0, const int TB,
                              const int G) {
  const int K = j->K, groups = K / G;
  const __m256i ones = _mm256_set1_epi16(1), high = _mm256_set1_epi16(256);
  __m256 acc[4];
  float offset[4], factor[4][8];
  for (int t = 0; t < TB; ++t) {
    acc[t] = _mm256_setzero_ps();
    offset[t] = 0.0f;
  }
  const uint8_t *row = j->w + (size_t)n * j->w_stride;
  for (int g = 0; g < groups; ++g) {
    if (g % 8 == 0)
      for (int t = 0; t < TB; ++t)
        offset[t] += group_factors(j, n, t0 + t, g, factor[t]);
    const uint8_t *line = row + (size_t)g * (G / 2);
    __m256i hi[4], lo[4]; /* int16 pair sums with the high and low bytes */
    for (int t = 0; t < TB; ++t)
      hi[t] = lo[t] = _mm256_setzero_si256();
    for (int q = 0; q < G / 64; ++q) { /* 32 bytes: 32 even + 32 odd codes */
      __m256i even, odd;
      spark_nibbles(line + 32 * q, &even, &odd);
      for (int t = 0; t < TB; ++t) {
        /* per group: low bytes of the even, then the odd inputs; high bytes
         * of the even, then the odd ones */
        const uint8_t *x =
            j->input_bytes + ((size_t)(t0 + t) * groups + g) * (2 * G) + 32 * q;
        const __m256i le = _mm256_load_si256((const __m256i *)x);
        const __m256i lodd = _mm256_load_si256((const __m256i *)(x + G / 2));
        const __m256i he = _mm256_load_si256((const __m256i *)(x + G));
        const __m256i ho = _mm256_load_si256((const __m256i *)(x + 3 * G / 2));
        hi[t] = _mm256_add_epi16(
            hi[t], _mm256_add_epi16(_mm256_maddubs_epi16(even, he),
                                    _mm256_maddubs_epi16(odd, ho)));
        lo[t] = _mm256_add_epi16(
            lo[t], _mm256_add_epi16(_mm256_maddubs_epi16(le, even),
                                    _mm256_maddubs_epi16(lodd, odd)));
      }
    }
    for (int t = 0; t < TB; ++t) {
      const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(hi[t], high),
                                           _mm256_madd_epi16(lo[t], ones));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                               _mm256_set1_ps(factor[t][g % 8]), acc[t]);
    }
  }
  for (int t = 0; t < TB; ++t)
    j->out[(size_t)(t0 + t) * j->out_stride + n] =
        spark_hsum_ps(acc[t]) - offset[t];
}

/* w8a16: int8 codes, one scale per row. */
SPARK_BLOCK w8a16_int16_block(const avx2_job *j, int n, int t0, const int TB) {
  const int K = j->K, G = kInputGroup, groups = K / G;
  __m256 acc[4];
  for (int t = 0; t < TB; ++t)
    acc[t] = _mm256_setzero_ps();
  const uint8_t *row = j->w + (size_t)n * K;
  for (int g = 0; g < groups; ++g) {
    __m256i dot[4];
    for (int t = 0; t < TB; ++t)
      dot[t] = _mm256_setzero_si256();
    for (int q = 0; q < G / 16; ++q) { /* 16 codes */
      const uint8_t *line = row + (size_t)g * G + 16 * q;
      if (TB == 1 && q % 4 == 0)
        prefetch_line(line);
      const __m256i w16 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)line));
      for (int t = 0; t < TB; ++t) {
        const int16_t *x =
            j->inputs16 + (size_t)(t0 + t) * K + (size_t)g * G + 16 * q;
        dot[t] = _mm256_add_epi32(
            dot[t],
            _mm256_madd_epi16(w16, _mm256_load_si256((const __m256i *)x)));
      }
    }
    for (int t = 0; t < TB; ++t)
      acc[t] = _mm256_fmadd_ps(
          _mm256_cvtepi32_ps(dot[t]),
          _mm256_set1_ps(j->input_scales[(size_t)(t0 + t) * groups + g]),
          acc[t]);
  }
  for (int t = 0; t < TB; ++t)
    j->out[(size_t)(t0 + t) * j->out_stride + n] =
        spark_hsum_ps(acc[t]) * j->row_scales[n];
}

/* ---- decode rows ------------------------------------------------------- */

/* The decode rows run in 256-bit vectors, or in 128-bit ones on CPUs whose
 * vector units are 128 bits wide: AMD Zen 1 and Zen+ (narrow_rows()). There
 * a 256-bit instruction runs as two 128-bit halves and one of the four
 * vector pipes multiplies integers; the 128-bit rows issue fewer
 * instructions for the same multiplies and cross no lanes (AMD EPYC 7001
 * guest, spark-kernelbench, one thread, from memory: w8a16 12.2-12.5 ->
 * 13.7-14.0 GB/s, w4a16 5.8 -> 6.8-7.1, w4a8 7.1-9.3 -> 7.0-11.6 (noisy);
 * a harness of one 2048-code w8a16 row from L1: 12.7 GB/s with the 256-bit
 * vpmovsxbw, which crosses lanes, 15.9 with this one). The 4-bit prefill
 * blocks and tiles follow the rows (w4a16_int16_block_128, w4a8_tile_128:
 * in a harness of K = N = 2048, 64 tokens, one thread, three alternating
 * rounds, w4a16 12.0-12.1 -> 13.3-13.4 GMAC/s, w4a8 20.8-20.9 -> 24.0-24.3). On
 * CPUs with 256-bit units the 256-bit rows measured 80-99% of the stream (AMD
 * EPYC Zen 3, 2026-12-02, docs/performance.md).
 *
 * One token against an int8 row (w8a16) in 128-bit vectors: 8 codes
 * widened by one vpmovsxbw from memory, two int32 chains per group. */
static inline __attribute__((always_inline)) void
w8a16_row_128(const avx2_job *j, int n, int t) {
  const int K = j->K, G = kInputGroup, groups = K / G;
  const int8_t *row = (const int8_t *)j->w + (size_t)n * K;
  const int16_t *x = j->inputs16 + (size_t)t * K;
  const float *input_scales = j->input_scales + (size_t)t * groups;
  __m128 acc = _mm_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    const int8_t *line = row + (size_t)g * G;
    const int16_t *xg = x + (size_t)g * G;
    __m128i even = _mm_setzero_si128(), odd = even;
    for (int q = 0; q < G / 8; q += 2) { /* 16 codes */
      if (q % 8 == 0)
        prefetch_line(line + 8 * q);
      even = _mm_add_epi32(
          even, _mm_madd_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64(
                                   (const __m128i *)(line + 8 * q))),
                               _mm_load_si128((const __m128i *)(xg + 8 * q))));
      odd = _mm_add_epi32(
          odd,
          _mm_madd_epi16(_mm_cvtepi8_epi16(_mm_loadl_epi64(
                             (const __m128i *)(line + 8 * q + 8))),
                         _mm_load_si128((const __m128i *)(xg + 8 * q + 8))));
    }
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_add_epi32(even, odd)),
                       _mm_set1_ps(input_scales[g]), acc);
  }
  j->out[(size_t)t * j->out_stride + n] =
      spark_hsum128_ps(acc) * j->row_scales[n];
}

/* One group of a 4-bit row against int16 inputs split into bytes: the
 * exact int32 dot product as f32. */
static inline __attribute__((always_inline)) __m256
w4a16_group(const uint8_t *row, const uint8_t *x, int g, const int G) {
  const __m256i ones = _mm256_set1_epi16(1), high = _mm256_set1_epi16(256);
  const uint8_t *line = row + (size_t)g * (G / 2);
  prefetch_group(line, g, G);
  const uint8_t *xg = x + (size_t)g * (2 * G);
  __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
  for (int q = 0; q < G / 64; ++q) {
    __m256i even, odd;
    spark_nibbles(line + 32 * q, &even, &odd);
    const uint8_t *xq = xg + 32 * q;
    hi = _mm256_add_epi16(
        hi,
        _mm256_add_epi16(
            _mm256_maddubs_epi16(even,
                                 _mm256_load_si256((const __m256i *)(xq + G))),
            _mm256_maddubs_epi16(
                odd, _mm256_load_si256((const __m256i *)(xq + 3 * G / 2)))));
    lo = _mm256_add_epi16(
        lo,
        _mm256_add_epi16(
            _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)xq), even),
            _mm256_maddubs_epi16(
                _mm256_load_si256((const __m256i *)(xq + G / 2)), odd)));
  }
  return _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(hi, high),
                                             _mm256_madd_epi16(lo, ones)));
}

/* One group of a 4-bit row against int8 codes reordered into nibble order:
 * the exact int32 dot product as f32. */
static inline __attribute__((always_inline)) __m256
w4a8_group(const uint8_t *row, const int8_t *x, int g, const int G) {
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t *line = row + (size_t)g * (G / 2);
  prefetch_group(line, g, G);
  const int8_t *xg = x + (size_t)g * G;
  __m256i part = _mm256_setzero_si256();
  for (int q = 0; q < G / 64; ++q) {
    __m256i even, odd;
    spark_nibbles(line + 32 * q, &even, &odd);
    const int8_t *c = xg + 32 * q;
    part = _mm256_add_epi16(
        part,
        _mm256_add_epi16(
            _mm256_maddubs_epi16(even, _mm256_load_si256((const __m256i *)c)),
            _mm256_maddubs_epi16(
                odd, _mm256_load_si256((const __m256i *)(c + G / 2)))));
  }
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(part, ones));
}

/* One token against one 4-bit row, G and a8 (w4a8, else w4a16) constant
 * after inlining. Eight groups at a time: their factors as one vector (lane
 * i broadcast with vpermps) and the terms that come off (w4a16: scale x zero
 * x input sum; w4a8: 8 x scale x code sum) as vector FMAs; two accumulators
 * in registers. */
SPARK_BLOCK four_bit_row(const avx2_job *j, int n, int t, const int G,
                         const int a8) {
  const int K = j->K, groups = K / G;
  const uint8_t *row = j->w + (size_t)n * j->w_stride;
  const uint16_t *scales = j->scales + (size_t)n * j->s_stride,
                 *zeros = a8 ? NULL : j->zeros + (size_t)n * j->s_stride;
  prefetch_sides(j, row);
  const float *sums = j->sums + (size_t)t * groups,
              *input_scales = a8 ? NULL : j->input_scales + (size_t)t * groups;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 offset = _mm256_setzero_ps();
  float tail_offset = 0.0f;
  for (int g0 = 0; g0 < groups; g0 += 8) {
    const int count = groups - g0 < 8 ? groups - g0 : 8;
    __m256 factor;
    if (count == 8) {
      const __m256 scale =
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + g0)));
      const __m256 term =
          a8 ? scale
             : _mm256_mul_ps(scale, _mm256_cvtph_ps(_mm_loadu_si128(
                                        (const __m128i *)(zeros + g0))));
      factor =
          a8 ? scale : _mm256_mul_ps(scale, _mm256_loadu_ps(input_scales + g0));
      offset = _mm256_fmadd_ps(term, _mm256_loadu_ps(sums + g0), offset);
    } else {
      float f[8] = {0};
      for (int i = 0; i < count; ++i) {
        const float scale = _cvtsh_ss(scales[g0 + i]);
        f[i] = a8 ? scale : scale * input_scales[g0 + i];
        tail_offset +=
            (a8 ? scale : scale * _cvtsh_ss(zeros[g0 + i])) * sums[g0 + i];
      }
      factor = _mm256_loadu_ps(f);
    }
#define SPARK_GROUP_DOT(g)                                                     \
  (a8 ? w4a8_group(row, j->codes + (size_t)t * K, g, G)                        \
      : w4a16_group(row, j->input_bytes + (size_t)t * groups * (2 * G), g, G))
    if (count == 8) {
      for (int i = 0; i < 8; i += 2) {
        acc0 = _mm256_fmadd_ps(
            SPARK_GROUP_DOT(g0 + i),
            _mm256_permutevar8x32_ps(factor, _mm256_set1_epi32(i)), acc0);
        acc1 = _mm256_fmadd_ps(
            SPARK_GROUP_DOT(g0 + i + 1),
            _mm256_permutevar8x32_ps(factor, _mm256_set1_epi32(i + 1)), acc1);
      }
    } else {
      for (int i = 0; i < count; ++i)
        acc0 = _mm256_fmadd_ps(
            SPARK_GROUP_DOT(g0 + i),
            _mm256_permutevar8x32_ps(factor, _mm256_set1_epi32(i)), acc0);
    }
#undef SPARK_GROUP_DOT
  }
  const float dot = spark_hsum_ps(_mm256_add_ps(acc0, acc1)),
              off = spark_hsum_ps(offset) + tail_offset;
  j->out[(size_t)t * j->out_stride + n] =
      a8 ? (dot - 8.0f * off) * j->token_scales[t] : dot - off;
}

/* The same rows in 128-bit vectors (w8a16_row_128 above too), for CPUs
 * whose vector units are 128 bits wide (narrow_rows()). */

/* The 32 codes of 16 packed bytes at p: the low nibbles (even indices) and
 * the high ones (odd), a byte each. */
static inline __attribute__((always_inline)) void
nibbles16(const uint8_t *p, __m128i *even, __m128i *odd) {
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i bytes = _mm_loadu_si128((const __m128i *)p);
  *even = _mm_and_si128(bytes, low);
  *odd = _mm_and_si128(_mm_srli_epi16(bytes, 4), low);
}

/* One group of a 4-bit row against int16 inputs split into bytes: the
 * exact int32 dot product as f32. A lane of `hi` sums up to 8 pair sums of
 * 2 x 15 x 128 (G = 128), below 2^15. */
static inline __attribute__((always_inline)) __m128
w4a16_group_128(const uint8_t *row, const uint8_t *x, int g, const int G) {
  const __m128i ones = _mm_set1_epi16(1), high = _mm_set1_epi16(256);
  const uint8_t *line = row + (size_t)g * (G / 2);
  prefetch_group(line, g, G);
  const uint8_t *xg = x + (size_t)g * (2 * G);
  __m128i hi = _mm_setzero_si128(), lo = _mm_setzero_si128();
  for (int q = 0; q < G / 32; ++q) {
    __m128i even, odd;
    nibbles16(line + 16 * q, &even, &odd);
    const uint8_t *xq = xg + 16 * q;
    hi = _mm_add_epi16(
        hi,
        _mm_add_epi16(
            _mm_maddubs_epi16(even, _mm_load_si128((const __m128i *)(xq + G))),
            _mm_maddubs_epi16(
                odd, _mm_load_si128((const __m128i *)(xq + 3 * G / 2)))));
    lo = _mm_add_epi16(
        lo, _mm_add_epi16(
                _mm_maddubs_epi16(_mm_load_si128((const __m128i *)xq), even),
                _mm_maddubs_epi16(_mm_load_si128((const __m128i *)(xq + G / 2)),
                                  odd)));
  }
  /* The low bytes' pair sums are non-negative and their sum in a lane (up
   * to 8 x 2 x 255 x 15 = 61200) fills 16 bits: taken as signed with
   * 0x8000 flipped, each pair of lanes sums 65536 too little. */
  const __m128i flipped = _mm_xor_si128(lo, _mm_set1_epi16((short)0x8000));
  return _mm_cvtepi32_ps(_mm_add_epi32(
      _mm_add_epi32(_mm_madd_epi16(hi, high), _mm_madd_epi16(flipped, ones)),
      _mm_set1_epi32(65536)));
}

/* One group of a 4-bit row against int8 codes reordered into nibble order:
 * the exact int32 dot product as f32. */
static inline __attribute__((always_inline)) __m128
w4a8_group_128(const uint8_t *row, const int8_t *x, int g, const int G) {
  const __m128i ones = _mm_set1_epi16(1);
  const uint8_t *line = row + (size_t)g * (G / 2);
  prefetch_group(line, g, G);
  const int8_t *xg = x + (size_t)g * G;
  /* two chains, each lane up to 4 pair sums of 2 x 15 x 127 */
  __m128i part_even = _mm_setzero_si128(), part_odd = part_even;
  for (int q = 0; q < G / 32; ++q) {
    __m128i even, odd;
    nibbles16(line + 16 * q, &even, &odd);
    const int8_t *c = xg + 16 * q;
    part_even = _mm_add_epi16(
        part_even, _mm_maddubs_epi16(even, _mm_load_si128((const __m128i *)c)));
    part_odd = _mm_add_epi16(
        part_odd,
        _mm_maddubs_epi16(odd, _mm_load_si128((const __m128i *)(c + G / 2))));
  }
  return _mm_cvtepi32_ps(
      _mm_madd_epi16(_mm_add_epi16(part_even, part_odd), ones));
}

/* One token against one 4-bit row, G and a8 (w4a8, else w4a16) constant
 * after inlining. Eight groups at a time: their factors computed as one
 * vector (each then broadcast from memory) and the terms that come off
 * (w4a16: scale x zero x input sum; w4a8: 8 x scale x code sum) as vector
 * FMAs; two accumulators in registers. */
SPARK_BLOCK four_bit_row_128(const avx2_job *j, int n, int t, const int G,
                             const int a8) {
  const int K = j->K, groups = K / G;
  const uint8_t *row = j->w + (size_t)n * j->w_stride;
  const uint16_t *scales = j->scales + (size_t)n * j->s_stride,
                 *zeros = a8 ? NULL : j->zeros + (size_t)n * j->s_stride;
  prefetch_sides(j, row);
  const float *sums = j->sums + (size_t)t * groups,
              *input_scales = a8 ? NULL : j->input_scales + (size_t)t * groups;
  __m128 acc0 = _mm_setzero_ps(), acc1 = _mm_setzero_ps();
  __m256 offset = _mm256_setzero_ps();
  float tail_offset = 0.0f;
  float factor[8];
  for (int g0 = 0; g0 < groups; g0 += 8) {
    const int count = groups - g0 < 8 ? groups - g0 : 8;
    if (count == 8) {
      const __m256 scale =
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + g0)));
      const __m256 term =
          a8 ? scale
             : _mm256_mul_ps(scale, _mm256_cvtph_ps(_mm_loadu_si128(
                                        (const __m128i *)(zeros + g0))));
      _mm256_storeu_ps(
          factor,
          a8 ? scale
             : _mm256_mul_ps(scale, _mm256_loadu_ps(input_scales + g0)));
      offset = _mm256_fmadd_ps(term, _mm256_loadu_ps(sums + g0), offset);
    } else {
      for (int i = 0; i < count; ++i) {
        const float scale = _cvtsh_ss(scales[g0 + i]);
        factor[i] = a8 ? scale : scale * input_scales[g0 + i];
        tail_offset +=
            (a8 ? scale : scale * _cvtsh_ss(zeros[g0 + i])) * sums[g0 + i];
      }
    }
#define SPARK_GROUP_DOT(g)                                                     \
  (a8 ? w4a8_group_128(row, j->codes + (size_t)t * K, g, G)                    \
      : w4a16_group_128(row, j->input_bytes + (size_t)t * groups * (2 * G), g, \
                        G))
    if (count == 8) {
      for (int i = 0; i < 8; i += 2) {
        acc0 = _mm_fmadd_ps(SPARK_GROUP_DOT(g0 + i),
                            _mm_broadcast_ss(factor + i), acc0);
        acc1 = _mm_fmadd_ps(SPARK_GROUP_DOT(g0 + i + 1),
                            _mm_broadcast_ss(factor + i + 1), acc1);
      }
    } else {
      for (int i = 0; i < count; ++i)
        acc0 = _mm_fmadd_ps(SPARK_GROUP_DOT(g0 + i),
                            _mm_broadcast_ss(factor + i), acc0);
    }
#undef SPARK_GROUP_DOT
  }
  const float dot = spark_hsum128_ps(_mm_add_ps(acc0, acc1)),
              off = spark_hsum_ps(offset) + tail_offset;
  j->out[(size_t)t * j->out_stride + n] =
      a8 ? (dot - 8.0f * off) * j->token_scales[t] : dot - off;
}

/* ---- prefill tiles ----------------------------------------------------- */

/* R rows x TB tokens (2 x 4 in prefill: measured against 1 x 4, 2 x 3,
 * 3 x 2 and 4 x 2 on AMD EPYC Zen 3, 1.24x (w8a8) and 1.45x (w4a8) the
 * single-row blocks at K = 2048): each weight load feeds TB tokens and each
 * input load R rows. w8a8: */
SPARK_BLOCK w8a8_tile(const avx2_job *j, int n0, int t0, const int R,
                      const int TB) {
  const int K = j->K;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[4][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm256_setzero_si256();
  for (int k = 0; k < K; k += 32) {
    __m256i wv[4];
    for (int r = 0; r < R; ++r)
      wv[r] = _mm256_loadu_si256(
          (const __m256i *)(j->w + (size_t)(n0 + r) * K + k));
    for (int t = 0; t < TB; ++t) {
      const size_t at = (size_t)(t0 + t) * K + k;
      const __m256i xv = _mm256_load_si256((const __m256i *)(j->codes + at));
      const __m256i ax =
          _mm256_load_si256((const __m256i *)(j->magnitudes + at));
      for (int r = 0; r < R; ++r)
        acc[r][t] = _mm256_add_epi32(
            acc[r][t],
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(ax, _mm256_sign_epi8(wv[r], xv)), ones));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t)
      j->out[(size_t)(t0 + t) * j->out_stride + n0 + r] =
          (float)spark_hsum_epi32(acc[r][t]) * j->row_scales[n0 + r] *
          j->token_scales[t0 + t];
}

/* sum over the groups of row n's scales times token t's code sums */
static inline float scaled_sums(const avx2_job *j, int n, int t) {
  const int groups = j->K / j->group;
  const uint16_t *scales = j->scales + (size_t)n * j->s_stride;
  const float *sums = j->sums + (size_t)t * groups;
  __m256 acc = _mm256_setzero_ps();
  int g = 0;
  for (; g + 8 <= groups; g += 8)
    acc = _mm256_fmadd_ps(
        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + g))),
        _mm256_loadu_ps(sums + g), acc);
  float total = spark_hsum_ps(acc);
  for (; g < groups; ++g)
    total += _cvtsh_ss(scales[g]) * sums[g];
  return total;
}

/* w4a8: the -8 of the codes comes off once per row and token, as 8 times
 * the sum over groups of scale x code sum. */
SPARK_BLOCK w4a8_tile(const avx2_job *j, int n0, int t0, const int R,
                      const int TB, const int G) {
  const int K = j->K, groups = K / G;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[4][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm256_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m256i part[4][4];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TB; ++t)
        part[r][t] = _mm256_setzero_si256();
    for (int q = 0; q < G / 64; ++q) {
      __m256i even[4], odd[4];
      for (int r = 0; r < R; ++r) {
        spark_nibbles(j->w + (size_t)(n0 + r) * j->w_stride +
                          (size_t)g * (G / 2) + 32 * q,
                      &even[r], &odd[r]);
      }
      for (int t = 0; t < TB; ++t) {
        const int8_t *c =
            j->codes + (size_t)(t0 + t) * K + (size_t)g * G + 32 * q;
        const __m256i xe = _mm256_load_si256((const __m256i *)c);
        const __m256i xo = _mm256_load_si256((const __m256i *)(c + G / 2));
        for (int r = 0; r < R; ++r)
          part[r][t] = _mm256_add_epi16(
              part[r][t], _mm256_add_epi16(_mm256_maddubs_epi16(even[r], xe),
                                           _mm256_maddubs_epi16(odd[r], xo)));
      }
    }
    for (int r = 0; r < R; ++r) {
      const float scale =
          _cvtsh_ss(j->scales[(size_t)(n0 + r) * j->s_stride + g]);
      for (int t = 0; t < TB; ++t) {
        acc[r][t] = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(_mm256_madd_epi16(part[r][t], ones)),
            _mm256_set1_ps(scale), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t)
      j->out[(size_t)(t0 + t) * j->out_stride + n0 + r] =
          (spark_hsum_ps(acc[r][t]) - 8.0f * scaled_sums(j, n0 + r, t0 + t)) *
          j->token_scales[t0 + t];
}

/* w4a16_int16_block in 128-bit vectors (narrow_rows()): 16 bytes a step, so
 * a lane of `lo` gathers up to 8 pair sums of 2 x 255 x 15, past 2^15: taken
 * as signed with the top bit flipped, 65536 added back per int32 lane. */
SPARK_BLOCK w4a16_int16_block_128(const avx2_job *j, int n, int t0,
                                  const int TB, const int G) {
  const int K = j->K, groups = K / G;
  const __m128i ones = _mm_set1_epi16(1), high = _mm_set1_epi16(256);
  const __m128i flip = _mm_set1_epi16((short)0x8000);
  __m128 acc[4];
  float offset[4], factor[4][8];
  for (int t = 0; t < TB; ++t) {
    acc[t] = _mm_setzero_ps();
    offset[t] = 0.0f;
  }
  const uint8_t *row = j->w + (size_t)n * j->w_stride;
  for (int g = 0; g < groups; ++g) {
    if (g % 8 == 0)
      for (int t = 0; t < TB; ++t)
        offset[t] += group_factors(j, n, t0 + t, g, factor[t]);
    const uint8_t *line = row + (size_t)g * (G / 2);
    __m128i hi[4], lo[4];
    for (int t = 0; t < TB; ++t)
      hi[t] = lo[t] = _mm_setzero_si128();
    for (int q = 0; q < G / 32; ++q) { /* 16 bytes: 16 even + 16 odd codes */
      __m128i even, odd;
      nibbles16(line + 16 * q, &even, &odd);
      for (int t = 0; t < TB; ++t) {
        const uint8_t *x =
            j->input_bytes + ((size_t)(t0 + t) * groups + g) * (2 * G) + 16 * q;
        hi[t] = _mm_add_epi16(
            hi[t],
            _mm_add_epi16(
                _mm_maddubs_epi16(even,
                                  _mm_load_si128((const __m128i *)(x + G))),
                _mm_maddubs_epi16(
                    odd, _mm_load_si128((const __m128i *)(x + 3 * G / 2)))));
        lo[t] = _mm_add_epi16(
            lo[t],
            _mm_add_epi16(
                _mm_maddubs_epi16(_mm_load_si128((const __m128i *)x), even),
                _mm_maddubs_epi16(_mm_load_si128((const __m128i *)(x + G / 2)),
                                  odd)));
      }
    }
    for (int t = 0; t < TB; ++t) {
      const __m128i dot = _mm_add_epi32(
          _mm_add_epi32(_mm_madd_epi16(hi[t], high),
                        _mm_madd_epi16(_mm_xor_si128(lo[t], flip), ones)),
          _mm_set1_epi32(65536));
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(dot), _mm_set1_ps(factor[t][g % 8]),
                            acc[t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    j->out[(size_t)(t0 + t) * j->out_stride + n] =
        spark_hsum128_ps(acc[t]) - offset[t];
  }
}

/* w4a8_tile in 128-bit vectors (narrow_rows()): a lane of `part` gathers up
 * to 8 pair sums of 2 x 15 x 127 (G = 128), below 2^15. */
SPARK_BLOCK w4a8_tile_128(const avx2_job *j, int n0, int t0, const int R,
                          const int TB, const int G) {
  const int K = j->K, groups = K / G;
  const __m128i ones = _mm_set1_epi16(1);
  __m128 acc[2][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m128i part[2][4];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < TB; ++t)
        part[r][t] = _mm_setzero_si128();
    for (int q = 0; q < G / 32; ++q) {
      __m128i even[2], odd[2];
      for (int r = 0; r < R; ++r)
        nibbles16(j->w + (size_t)(n0 + r) * j->w_stride + (size_t)g * (G / 2) +
                      16 * q,
                  &even[r], &odd[r]);
      for (int t = 0; t < TB; ++t) {
        const int8_t *c =
            j->codes + (size_t)(t0 + t) * K + (size_t)g * G + 16 * q;
        const __m128i xe = _mm_load_si128((const __m128i *)c);
        const __m128i xo = _mm_load_si128((const __m128i *)(c + G / 2));
        for (int r = 0; r < R; ++r)
          part[r][t] = _mm_add_epi16(
              part[r][t], _mm_add_epi16(_mm_maddubs_epi16(even[r], xe),
                                        _mm_maddubs_epi16(odd[r], xo)));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m128 scale =
          _mm_set1_ps(_cvtsh_ss(j->scales[(size_t)(n0 + r) * j->s_stride + g]));
      for (int t = 0; t < TB; ++t)
        acc[r][t] =
            _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(part[r][t], ones)),
                         scale, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TB; ++t) {
      j->out[(size_t)(t0 + t) * j->out_stride + n0 + r] =
          (spark_hsum128_ps(acc[r][t]) -
           8.0f * scaled_sums(j, n0 + r, t0 + t)) *
          j->token_scales[t0 + t];
    }
}

/* ---- tasks -------------------------------------------------------------- */

enum { kW8A8, kW4A8, kW4A16, kW8A16, kBF16, kW4A16Int16, kW8A16Int16 };

/* One block shape of one kind (all constants after inlining). */
SPARK_BLOCK block(const avx2_job *j, const int kind, int n, int t0,
                  const int TB) {
  switch (kind) {
  case kW8A8:
    w8a8_block(j, n, t0, TB);
    break;
  case kW4A8: /* one token: prefill runs w4a8_tile */
    if (j->narrow)
      j->group == 128 ? four_bit_row_128(j, n, t0, 128, 1)
                      : four_bit_row_128(j, n, t0, 64, 1);
    else
      j->group == 128 ? four_bit_row(j, n, t0, 128, 1)
                      : four_bit_row(j, n, t0, 64, 1);
    break;
  case kW4A16:
    w4a16_block(j, n, t0, TB);
    break;
  case kW8A16:
    wide_block(j, 0, n, t0, TB);
    break;
  case kBF16:
    wide_block(j, 1, n, t0, TB);
    break;
  case kW4A16Int16:
    if (TB == 1 && j->narrow)
      j->group == 128 ? four_bit_row_128(j, n, t0, 128, 0)
                      : four_bit_row_128(j, n, t0, 64, 0);
    else if (TB == 1)
      j->group == 128 ? four_bit_row(j, n, t0, 128, 0)
                      : four_bit_row(j, n, t0, 64, 0);
    else if (j->narrow && j->group == 128)
      w4a16_int16_block_128(j, n, t0, TB, 128);
    else if (j->narrow)
      w4a16_int16_block_128(j, n, t0, TB, 64);
    else if (j->group == 128) /* G constant: 1.4x at K = 2048, 4 tokens */
      w4a16_int16_block(j, n, t0, TB, 128);
    else
      w4a16_int16_block(j, n, t0, TB, 64);
    break;
  case kW8A16Int16:
    if (TB == 1 && j->narrow)
      w8a16_row_128(j, n, t0);
    else
      w8a16_int16_block(j, n, t0, TB);
    break;
  }
}

/* The rows of `task`: 4 tokens at a time against each row, then the tokens
 * left over one at a time. */
static inline __attribute__((always_inline)) int
run_task(int task, const avx2_job *j, const int kind) {
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < j->N ? n0 + kRowsPerTask : j->N;
  int t0 = 0;
  for (; t0 + 4 <= j->T; t0 += 4) {
    if (kind == kW8A8 || kind == kW4A8) { /* rows: a multiple of 4 */
      for (int n = n0; n < n1; n += 2)
        if (kind == kW8A8)
          w8a8_tile(j, n, t0, 2, 4);
        else if (j->narrow && j->group == 128)
          w4a8_tile_128(j, n, t0, 2, 4, 128);
        else if (j->narrow)
          w4a8_tile_128(j, n, t0, 2, 4, 64);
        else if (j->group == 128)
          w4a8_tile(j, n, t0, 2, 4, 128);
        else
          w4a8_tile(j, n, t0, 2, 4, 64);
      continue;
    }
    for (int n = n0; n < n1; ++n)
      block(j, kind, n, t0, 4);
  }
  for (; t0 < j->T; ++t0)
    for (int n = n0; n < n1; ++n)
      block(j, kind, n, t0, 1);
  return 0;
}

#define SPARK_TASK(name, kind)                                                 \
  static int name(void *user_context, int task, uint8_t *closure) {            \
    (void)user_context;                                                        \
    return run_task(task, (const avx2_job *)closure, kind);                    \
  }
SPARK_TASK(w8a8_task, kW8A8)
SPARK_TASK(w4a8_task, kW4A8)
SPARK_TASK(w4a16_task, kW4A16)
SPARK_TASK(w8a16_task, kW8A16)
SPARK_TASK(bf16_task, kBF16)
SPARK_TASK(w4a16_int16_task, kW4A16Int16)
SPARK_TASK(w8a16_int16_task, kW8A16Int16)

static int run_rows(avx2_job *job, int (*task)(void *, int, uint8_t *)) {
  return halide_do_par_for(NULL, task, 0,
                           (job->N + kRowsPerTask - 1) / kRowsPerTask,
                           (uint8_t *)job);
}

/* ---- entry points ------------------------------------------------------- */

/* Whether the decode rows run in 128-bit vectors: on AMD Zen 1 and Zen+
 * (family 0x17 before Zen 2), whose vector units are 128 bits wide.
 * SPARK_AVX2_OTHER_ROWS (the copy in test/unit/X86Avx2Other.c) takes the
 * other rows, so that the tests check both on every CPU. */
static int narrow_rows(void) {
  __builtin_cpu_init();
  const int narrow = __builtin_cpu_is("znver1");
#ifdef SPARK_AVX2_OTHER_ROWS
  return !narrow;
#else
  return narrow;
#endif
}

static avx2_job job_of(halide_buffer_t *x, halide_buffer_t *w,
                       halide_buffer_t *out) {
  avx2_job job = {0};
  job.narrow = narrow_rows();
  job.w = (const uint8_t *)w->host;
  job.out = (float *)out->host;
  job.K = x->dim[0].extent;
  job.T = x->dim[1].extent;
  job.N = w->dim[1].extent;
  job.out_stride = out->dim[1].stride;
  return job;
}

/* int8 inputs: quantized per call (w4a8: each group's code sum, then its
 * codes reordered into nibble order; w8a8: the magnitudes beside them). */
static int run_int8(halide_buffer_t *x, float input_scale, avx2_job *job,
                    int four_bit, int (*task)(void *, int, uint8_t *)) {
  const int K = job->K, T = job->T, G = job->group,
            groups = four_bit ? K / G : 0;
  int8_t *codes, *magnitudes = NULL;
  float *token_scales, *sums = NULL;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  int rc = -1;
  if (four_bit)
    sums = (float *)spark_scratch_alloc(
        sizeof(float) * (size_t)(T > 0 ? T : 1) * (groups > 0 ? groups : 1));
  else if (spark_scratch_get((void **)&magnitudes,
                             (size_t)(T > 0 ? T : 1) * K) != 0)
    magnitudes = NULL;
  if (four_bit ? sums != NULL : magnitudes != NULL) {
    for (int t = 0; t < T; ++t) {
      int8_t *row = codes + (size_t)t * K;
      if (!four_bit) {
        for (int k = 0; k < K; ++k)
          magnitudes[(size_t)t * K + k] =
              (int8_t)(row[k] < 0 ? -row[k] : row[k]);
        continue;
      }
      spark_group_code_sums(row, K, G, sums + (size_t)t * groups);
      spark_split_even_odd(row, K, G);
    }
    job->codes = codes;
    job->magnitudes = magnitudes;
    job->token_scales = token_scales;
    job->sums = sums;
    rc = run_rows(job, task);
  }
  spark_scratch_put(codes);
  spark_scratch_put(magnitudes);
  spark_scratch_put(token_scales);
  spark_scratch_put(sums);
  return rc;
}

int spark_avx2_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_AVX2_INT8_DEPTH, SPARK_MK_ROWS))
    return -1;
  avx2_job job = job_of(x, w, out);
  job.row_scales = (const float *)scales->host;
  return run_int8(x, input_scale, &job, 0, w8a8_task);
}

int spark_avx2_linear_w4a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  const int group = group_of(x, scales);
  if (!group ||
      !spark_grouped_rows_fit(x, w, scales, NULL, out, group, SPARK_MK_ROWS))
    return -1;
  avx2_job job = job_of(x, w, out);
  job.scales = (const uint16_t *)scales->host;
  job.group = group;
  job.w_stride = w->dim[1].stride;
  job.s_stride = scales->dim[1].stride;
  return run_int8(x, input_scale, &job, 1, w4a8_task);
}

/* 16-bit inputs: rounded (and for 4-bit weights reordered) per call. */
static int run_wide(halide_buffer_t *x, int rounding, int group, avx2_job *job,
                    int (*task)(void *, int, uint8_t *)) {
  float *inputs, *sums = NULL;
  if (spark_prepare_inputs(x, rounding, group, &inputs, &sums) != 0)
    return -1;
  job->inputs = inputs;
  job->sums = sums;
  int rc = run_rows(job, task);
  spark_scratch_put(inputs);
  spark_scratch_put(sums);
  return rc;
}

/* bf16 / f16 inputs as int16 (see the int16 blocks; spark_prepare_int16). */
static int run_int16(halide_buffer_t *x, int rounding, int four_bit,
                     avx2_job *job, int (*task)(void *, int, uint8_t *)) {
  spark_int16_inputs in;
  if (spark_prepare_int16_avx2(x, rounding, job->group, four_bit, &in) != 0)
    return -1;
  job->inputs16 = in.values;
  job->input_scales = in.scales;
  job->sums = in.sums;
  job->input_bytes = in.bytes;
  const int rc = run_rows(job, task);
  spark_free_int16(&in);
  return rc;
}

static int w4a16(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *zeros,
                 halide_buffer_t *out, int rounding) {
  const int group = group_of(x, scales);
  if (!group ||
      !spark_grouped_rows_fit(x, w, scales, zeros, out, group, SPARK_MK_ROWS))
    return -1;
  avx2_job job = job_of(x, w, out);
  job.scales = (const uint16_t *)scales->host;
  job.zeros = (const uint16_t *)zeros->host;
  job.group = group;
  job.w_stride = w->dim[1].stride;
  job.s_stride = scales->dim[1].stride;
  if (rounding != kSparkF32Inputs)
    return run_int16(x, rounding, 1, &job, w4a16_int16_task);
  return run_wide(x, rounding, group, &job, w4a16_task);
}

int spark_avx2_linear_w4a16(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, halide_buffer_t *zeros,
                            halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkF32Inputs);
}

int spark_avx2_linear_w4a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkBF16Inputs);
}

int spark_avx2_linear_w4a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *zeros, halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkF16Inputs);
}

static int w8a16(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *out, int rounding) {
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_AVX2_DEPTH, SPARK_MK_ROWS))
    return -1;
  avx2_job job = job_of(x, w, out);
  job.row_scales = (const float *)scales->host;
  job.group = kInputGroup;
  if (rounding != kSparkF32Inputs && job.K % kInputGroup == 0)
    return run_int16(x, rounding, 0, &job, w8a16_int16_task);
  return run_wide(x, rounding, 0, &job, w8a16_task);
}

int spark_avx2_linear_w8a16(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, halide_buffer_t *out) {
  return w8a16(x, w, scales, out, kSparkF32Inputs);
}

int spark_avx2_linear_w8a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *out) {
  return w8a16(x, w, scales, out, kSparkBF16Inputs);
}

int spark_avx2_linear_w8a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *out) {
  return w8a16(x, w, scales, out, kSparkF16Inputs);
}

int spark_avx2_linear_bf16(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *out) {
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_AVX2_DEPTH, SPARK_MK_ROWS))
    return -1;
  avx2_job job = job_of(x, w, out);
  return run_wide(x, kSparkF32Inputs, 0, &job, bf16_task);
}
