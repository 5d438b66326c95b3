/* int8_linear.c - AVX-512 VNNI kernels for int8-activation builds (w8a8,
 * w4a8) and for w4a16 with bf16 or f16 activations taken as int16.
 *
 * Same interface as the Halide linear kernels:
 *   w8a8: (x f32 [K, T], w s8 [K, N], scales f32 [N], out f32 [N, T])
 *   w4a8: (x f32 [K, T], w u8 [K/2, N] two 4-bit codes a byte, low nibble
 *          first, scales f16 [K/128, N], out f32 [N, T])
 *   w4a16: as w4a8, plus zeros f16 [K/128, N]
 *   w6a8, w6a16: 6-bit codes, w u8 [3K/4, N] (each row's K/2 bytes of low
 *          nibbles, then K/4 of top bits, spark_six_bit_top in
 *          model_abi.h), scales and zeros f16 [K/128, N] (w6a8 takes the
 *          input scale as w4a8 does, after the zeros)
 * Each call quantizes every input row to symmetric int8 codes with its own
 * scale, max |x| / 127 (round to nearest even, as the Halide kernels do), or
 * (w4a16) to int16 multiples of a power of two per group, then every
 * vpdpbusd multiplies 64 byte pairs and sums them into int32 lanes.
 * vpdpbusd takes one unsigned operand:
 *   w8a8: the codes are stored + 128 (u8); 128 * sum(w) is taken off again
 *         (decode: a second vpdpbusd of the same weight vector by 0x80
 *         bytes; prefill: each row's sum once per task).
 *   w4a8: the weight codes 0..15 are the unsigned side; the -8 of
 *         (code - 8) * scale comes off as 8 * the group's sum of input codes.
 *   w6a8: the same with codes 0..63 and each group's zero point for the 8.
 *   w6a16: w4a16's products with codes 0..63 (six_bit_codes).
 * Each task takes a block of rows. One token (decode) reads them one row at
 * a time (w8a8, w4a8, and w4a16 on Intel cores) or, w4a16 on AMD cores, 4
 * rows at a time (its four vpdpbusd per 64 weight bytes need four 64-byte
 * input loads: 4 rows share them; w4a16_decode_rows()), each
 * line requested into L2 ahead: the rows' spark_prefetch_avx512_rows() on in
 * memory order, the w4a16 tiles' the same line of a later tile
 * (w4a16_tile_ahead); more
 * tokens (prefill) run register tiles of 4 rows x 6 (w8a8), 4 (w4a8 under
 * kLaneMinTokens tokens) or 3 (w4a16) tokens, so every weight vector loaded
 * feeds the tile's tokens (the two orders add the same products, the f32
 * group terms in another order). From kLaneMinTokens tokens w4a8 lays
 * blocks of 32 rows out with one row a lane (w4a8_lanes) and sums each
 * group in int32 before its scale.
 * Needs K % 64 == 0 (w8a8) or K % 128 == 0 (4-bit), and N % 4 == 0 (w8a8,
 * w4a8). Compiled with -mavx512f -mavx512bw -mavx512vnni -mf16c; entered only
 * when CPUID reports AVX512_VNNI. */
#include "HalideRuntime.h"

#include "avx512_sums.h"
#include "microkernel_support.h"
#include "x86_inputs.h"
#include "x86_inputs_avx512.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { kRowsPerTask = 64, kGroup = SPARK_MK_GROUP };

/* One token reads each row once, from memory (microkernel_support.h): the
 * rows of w4a16 past its tiles kSparkPrefetchAvx512 ahead, the w8a8 and
 * w4a8 rows `ahead`. */
static inline void prefetch_line(const void *line) {
  spark_prefetch_l2_ahead(line, kSparkPrefetchAvx512);
}
static inline void prefetch_row_line(const void *line, int ahead) {
  spark_prefetch_l2_ahead(line, ahead);
}

/* And the f16 scales (zero points) of the 4-bit rows as far ahead: 2 bytes
 * per 64 code bytes. Without it every line of scales, one per two rows of
 * the 1.7b, is a demand miss: w4a8 went from 72% to 84% of a same-process
 * stream at one thread, 73% to 82% at two (a 131072 x 2048 matrix). */
static inline void prefetch_scales(const uint16_t *row_scales) {
  spark_prefetch_l2_ahead(row_scales, kSparkPrefetchAvx512 / 32);
}

/* The high nibble of every byte of v, as a byte 0..15. With `gfni` (a
 * constant after inlining; the CPU reports GFNI) one GF(2) affine transform,
 * vgf2p8affineqb with the matrix of a right shift by 4, else a shift and a
 * mask. A w4a8 decode line's ALU instructions (the two nibbles, two
 * vpdpbusd, a conversion, an FMA) run on two ports; this takes one of seven
 * off. Intel Xeon (Emerald Rapids), one thread, a 2048 x 512 matrix read
 * again and again from L2: 16.5 us a call before, 14.5 with GFNI, 14.1 with
 * the scales broadcast from memory (w4a8_group), 12.9 with both. The w4a16
 * decode tiles (four vpdpbusd a line) gained 3% there and decoded the 1.7b
 * no faster, so they keep the shift. Written in asm so that the file is not
 * compiled with -mgfni, which would let the compiler use GFNI where the CPU
 * may lack it (Cascade Lake and Cooper Lake have AVX512_VNNI without it). */
static inline __attribute__((always_inline)) __m512i
high_nibbles(__m512i v, const int gfni) {
  if (gfni) {
    const __m512i shift4 = _mm512_set1_epi64(0x1020408000000000ll);
    __m512i r;
    __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(v), "v"(shift4));
    return r;
  }
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0f));
}

/* Whether high_nibbles may take its GFNI form on this CPU. SPARK_NO_GFNI:
 * never (the kernel tests' second copy of this file, X86NoGfni.c, runs the
 * path of CPUs without it). */
static inline int cpu_gfni(void) {
#ifdef SPARK_NO_GFNI
  return 0;
#else
  __builtin_cpu_init();
  return __builtin_cpu_supports("gfni");
#endif
}

typedef struct int8_job {
  const int8_t *w8;             /* w8a8: [N][K] */
  const uint8_t *w4;            /* 4-bit: [N][w_stride], K/2 codes a row */
  const float *scales;          /* w8a8: [N] */
  const uint16_t *group_scales; /* 4-bit: f16 [N][s_stride], K/128 a row */
  const uint8_t *codes;         /* [TP][K]: w8a8 code + 128; w4a8 per 128-group:
                                   64 even-index codes, then 64 odd-index codes */
  const float *token_scales;    /* [TP] */
  const int32_t *group_sums;    /* w4a8: [TP][K/128] sums of the input codes */
  const uint16_t *group_zeros;  /* w4a16: f16 [N][K/128] */
  const spark_int16_inputs *x16; /* w4a16: the inputs as int16 */
  float *out;                    /* [T][out_stride] */
  int K, N, T, out_stride;
  int ahead; /* w8a8, w4a8 decode: spark_prefetch_avx512_rows() */
  int gfni;  /* w4a8 decode: cpu_gfni() */
  /* w4a16 decode: from a tile's line to the line requested with it, the
   * same line of a later tile (w4a16_tile_ahead) */
  size_t tile_ahead;
  /* w4a16 decode: one row at a time (w4a16_rows) rather than tiles of 4
   * (w4a16_decode_rows()) */
  int rows;
  /* 4-bit: bytes from one row of codes to the next, f16 from one row of
   * scales (and zero points) to the next; grouped rows (the scales and zero
   * points after each row's codes, SPARK_LAYOUT_GROUPED_ROWS) have
   * w_stride > K/2, and the rest of each row is read as part of the code
   * stream. */
  int w_stride, s_stride;
} int8_job;

/* The lines after a row's codes (grouped rows: its scales and zero points),
 * or after a block of rows' codes, requested `ahead` as the code lines are:
 * `first` the first such line, `end` past the block. Dense rows: none. */
static inline void prefetch_rest(const uint8_t *first, const uint8_t *end,
                                 int ahead) {
  for (; first < end; first += 64)
    spark_prefetch_l2_ahead(first, ahead);
}

static inline int32_t hsum(__m512i v) { return _mm512_reduce_add_epi32(v); }

/* Prefill tiles: kTileRows rows times up to kTileTokens (w8a8),
 * kTileTokens4 (w4a8) or kTileTokens16 (w4a16) tokens in registers (the
 * sizes measured best on an Intel Xeon with AMX). A task walks its tokens a
 * tile at a time and, within each, its rows 4 at a time, so that the tile's
 * inputs stay in L1 while the task's rows (at most 64 x K bytes) come from
 * L2. */
enum { kTileRows = 4, kTileTokens = 6, kTileTokens4 = 4, kTileTokens16 = 3 };

/* acc and correction (w8a8) after the 64 codes at `line`. */
static inline __attribute__((always_inline)) void
w8a8_line(const int8_t *line, const uint8_t *codes, int ahead, __m512i *acc,
          __m512i *correction) {
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  prefetch_row_line(line, ahead);
  const __m512i wv = _mm512_loadu_si512(line);
  *acc = _mm512_dpbusd_epi32(*acc, _mm512_loadu_si512(codes), wv);
  *correction = _mm512_dpbusd_epi32(*correction, bias, wv);
}

/* Row n against one token (w8a8): two chains of vpdpbusd, even and odd
 * lines, held in registers (an array indexed by k / 64 % 2 went through the
 * stack on every line); lanes summing to the row's exact int32 dot product,
 * the bias's products taken off. */
static inline __attribute__((always_inline)) __m512i
w8a8_row(const int8_job *job, int n, const int ahead) {
  const int K = job->K;
  const int8_t *row = job->w8 + (size_t)n * K;
  __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0;
  __m512i correction0 = acc0, correction1 = acc0;
  int k = 0;
  for (; k + 128 <= K; k += 128) {
    w8a8_line(row + k, job->codes + k, ahead, &acc0, &correction0);
    w8a8_line(row + k + 64, job->codes + k + 64, ahead, &acc1, &correction1);
  }
  if (k < K)
    w8a8_line(row + k, job->codes + k, ahead, &acc0, &correction0);
  return _mm512_sub_epi32(_mm512_add_epi32(acc0, acc1),
                          _mm512_add_epi32(correction0, correction1));
}

/* One token against rows n0..n1-1 (w8a8): one row at a time, as one stream,
 * the lane sums of 4 rows taken at once (as w4a8_token). Summing each row's
 * two vectors on its own (two reductions and a scalar product a row) read
 * the 1.7b's K = 2048 matrices from memory at 87-90% of a stream where the
 * rows of K = 6656 read 100-102% (spark-kernelbench, an Intel Xeon guest
 * with AMX). */
static inline __attribute__((always_inline)) void
w8a8_token(const int8_job *job, int n0, int n1, const int ahead) {
  const __m128 token_scale = _mm_set1_ps(job->token_scales[0]);
  int n = n0;
  for (; n + 4 <= n1; n += 4) {
    const __m512i a = w8a8_row(job, n, ahead), b = w8a8_row(job, n + 1, ahead);
    const __m512i c = w8a8_row(job, n + 2, ahead),
                  d = w8a8_row(job, n + 3, ahead);
    _mm_storeu_ps(
        job->out + n,
        _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(spark_hsum4_epi32(a, b, c, d)),
                              _mm_loadu_ps(job->scales + n)),
                   token_scale));
  }
  for (; n < n1; ++n)
    job->out[n] = (float)hsum(w8a8_row(job, n, ahead)) * job->scales[n] *
                  job->token_scales[0];
}

/* w8a8 prefill: rows n..n+3 times tokens t0..t0+TB-1 (TB a constant after
 * inlining): each 64 columns' 4 weight vectors in registers, each token's
 * codes loaded once for the 4 of them; `correction`: 128 * each row's sum.
 * The int32 sums are exact, so the outputs are the decode path's. */
static inline __attribute__((always_inline)) void
w8a8_tile(const int8_job *job, int n, int t0, const int32_t *correction,
          const int TB) {
  const int K = job->K;
  __m512i acc[kTileRows][kTileTokens];
  for (int r = 0; r < kTileRows; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm512_setzero_si512();
  const int8_t *w = job->w8 + (size_t)n * K;
  const uint8_t *x = job->codes + (size_t)t0 * K;
  for (int k = 0; k < K; k += 64) {
    __m512i wv[kTileRows];
    for (int r = 0; r < kTileRows; ++r)
      wv[r] = _mm512_loadu_si512(w + (size_t)r * K + k);
    for (int t = 0; t < TB; ++t) {
      const __m512i xv = _mm512_loadu_si512(x + (size_t)t * K + k);
      for (int r = 0; r < kTileRows; ++r)
        acc[r][t] = _mm512_dpbusd_epi32(acc[r][t], xv, wv[r]);
    }
  }
  const __m128i c = _mm_loadu_si128((const __m128i *)correction);
  const __m128 scale = _mm_loadu_ps(job->scales + n);
  for (int t = 0; t < TB; ++t) {
    const __m128i sum = _mm_sub_epi32(
        spark_hsum4_epi32(acc[0][t], acc[1][t], acc[2][t], acc[3][t]), c);
    _mm_storeu_ps(job->out + (size_t)(t0 + t) * job->out_stride + n,
                  _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(sum), scale),
                             _mm_set1_ps(job->token_scales[t0 + t])));
  }
}

static int w8a8_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const int8_job *job = (const int8_job *)closure;
  const int K = job->K;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  const __m512i bias = _mm512_set1_epi8((char)0x80);
  if (job->T == 1) {
    /* a constant in the loop */
    if (job->ahead == kSparkPrefetchW8a8Zen4)
      w8a8_token(job, n0, n1, kSparkPrefetchW8a8Zen4);
    else if (job->ahead == kSparkPrefetchAvx512Amd)
      w8a8_token(job, n0, n1, kSparkPrefetchAvx512Amd);
    else
      w8a8_token(job, n0, n1, kSparkPrefetchAvx512);
    return 0;
  }
  /* 128 * each row's sum, taken off every token's sum */
  int32_t correction[kRowsPerTask];
  for (int n = n0; n < n1; ++n) {
    __m512i c = _mm512_setzero_si512();
    for (int k = 0; k < K; k += 64)
      c = _mm512_dpbusd_epi32(c, bias,
                              _mm512_loadu_si512(job->w8 + (size_t)n * K + k));
    correction[n - n0] = hsum(c);
  }
  for (int t0 = 0; t0 < job->T; t0 += kTileTokens) {
    const int tokens = job->T - t0 < kTileTokens ? job->T - t0 : kTileTokens;
    for (int n = n0; n < n1; n += kTileRows) {
      const int32_t *c = correction + (n - n0);
      switch (tokens) {
      case 6:
        w8a8_tile(job, n, t0, c, 6);
        break;
      case 5:
        w8a8_tile(job, n, t0, c, 5);
        break;
      case 4:
        w8a8_tile(job, n, t0, c, 4);
        break;
      case 3:
        w8a8_tile(job, n, t0, c, 3);
        break;
      case 2:
        w8a8_tile(job, n, t0, c, 2);
        break;
      default:
        w8a8_tile(job, n, t0, c, 1);
        break;
      }
    }
  }
  return 0;
}

/* The f32 group scales of row n's groups g..g+15 (fewer at the end) times
 * `by` (each group's input factor), into factor[0..16); returns the mask of
 * the groups there are. */
static inline __mmask16 group_factors(const uint16_t *scales, const float *by,
                                      int g, int groups, float *factor) {
  const int count = groups - g < 16 ? groups - g : 16;
  const __mmask16 mask = (__mmask16)((1u << count) - 1u);
  const __m512 scale = _mm512_cvtph_ps(_mm512_castsi512_si256(
      _mm512_maskz_loadu_epi16((__mmask32)mask, scales + g)));
  _mm512_storeu_ps(factor,
                   _mm512_mul_ps(scale, _mm512_maskz_loadu_ps(mask, by + g)));
  return mask;
}

/* acc after one group of a w4a8 row: `line` its 64 code bytes, `codes` its
 * 128 input codes, `scale` the group's scale, broadcast from memory (a
 * vpermps from a register of 16 scales took a second port's slot). */
static inline __attribute__((always_inline)) __m512
w4a8_group(const uint8_t *line, const uint8_t *codes, int ahead,
           const float *scale, __m512 acc, const int gfni) {
  prefetch_row_line(line, ahead);
  const __m512i bytes = _mm512_loadu_si512(line);
  const __m512i even = _mm512_and_si512(bytes, _mm512_set1_epi8(0x0f));
  const __m512i odd = high_nibbles(bytes, gfni);
  __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even,
                                    _mm512_load_si512(codes));
  dot = _mm512_dpbusd_epi32(dot, odd, _mm512_load_si512(codes + 64));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(*scale), acc);
}

/* Row n against one token (w4a8), as a vector whose lane sum is the row's
 * output before the token's scale: 16 groups at a time, their scales
 * converted at once into 16 floats on the stack, each broadcast from there
 * into three accumulators in turn; the -8 of every code comes off in a fourth,
 * as scale * 8 * the group's sum of input codes (`sums8`). */
static inline __attribute__((always_inline)) __m512
w4a8_row(const int8_job *job, int n, const float *sums8, const int ahead,
         const int gfni) {
  const int K = job->K, groups = K / kGroup;
  const uint8_t *row = job->w4 + (size_t)n * job->w_stride;
  const uint16_t *scales = job->group_scales + (size_t)n * job->s_stride;
  if (job->w_stride == K / 2)
    prefetch_scales(scales);
  else
    prefetch_rest(row + K / 2, row + job->w_stride, ahead);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int g0 = 0; g0 < groups; g0 += 16) {
    const int count = groups - g0 < 16 ? groups - g0 : 16;
    const __mmask16 mask = (__mmask16)((1u << count) - 1u);
    const __m512 scale = _mm512_cvtph_ps(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi16((__mmask32)mask, scales + g0)));
    acc3 =
        _mm512_fnmadd_ps(scale, _mm512_maskz_loadu_ps(mask, sums8 + g0), acc3);
    float scales16[16];
    _mm512_storeu_ps(scales16, scale);
    const uint8_t *line = row + (size_t)g0 * (kGroup / 2);
    const uint8_t *codes = job->codes + (size_t)g0 * kGroup;
#define SPARK_W4A8_GROUP(i, acc)                                               \
  acc = w4a8_group(line + (kGroup / 2) * (i), codes + kGroup * (i), ahead,     \
                   scales16 + (i), acc, gfni)
    if (count == 16) {
      for (int i = 0; i < 15; i += 3) {
        SPARK_W4A8_GROUP(i, acc0);
        SPARK_W4A8_GROUP(i + 1, acc1);
        SPARK_W4A8_GROUP(i + 2, acc2);
      }
      SPARK_W4A8_GROUP(15, acc0);
    } else {
      for (int g = 0; g < count; ++g)
        SPARK_W4A8_GROUP(g, acc0);
    }
#undef SPARK_W4A8_GROUP
  }
  return _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
}

/* One token against rows n0..n1-1 (w4a8): one row at a time, as one
 * stream, the lane sums of 4 rows taken at once (`sums8`: 8 * each group's
 * sum of input codes, groups + 16 floats). */
static inline __attribute__((always_inline)) void
w4a8_token(const int8_job *job, int n0, int n1, const float *sums8,
           const int ahead, const int gfni) {
  const float token_scale = job->token_scales[0];
  int n = n0;
  for (; n + 4 <= n1; n += 4) {
    const __m512 a = w4a8_row(job, n, sums8, ahead, gfni),
                 b = w4a8_row(job, n + 1, sums8, ahead, gfni);
    const __m512 c = w4a8_row(job, n + 2, sums8, ahead, gfni),
                 d = w4a8_row(job, n + 3, sums8, ahead, gfni);
    _mm_storeu_ps(job->out + n, _mm_mul_ps(spark_hsum4_ps(a, b, c, d),
                                           _mm_set1_ps(token_scale)));
  }
  for (; n < n1; ++n)
    job->out[n] = _mm512_reduce_add_ps(w4a8_row(job, n, sums8, ahead, gfni)) *
                  token_scale;
}

/* The f32 scales of rows n..n+3, groups g..g+15 (fewer at the end: the
 * rest 0), into scale[r][0..16). */
static inline __attribute__((always_inline)) __mmask16
tile_scales(const uint16_t *scales, int groups, int stride, int g,
            float scale[kTileRows][16]) {
  const int count = groups - g < 16 ? groups - g : 16;
  const __mmask16 mask = (__mmask16)((1u << count) - 1u);
  for (int r = 0; r < kTileRows; ++r)
    _mm512_storeu_ps(
        scale[r],
        _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16(
            (__mmask32)mask, scales + (size_t)r * stride + g))));
  return mask;
}

/* w4a8 prefill: rows n..n+3 times tokens t0..t0+TB-1 (TB a constant after
 * inlining). Each group's nibbles are unpacked once for the TB tokens; each
 * token's codes are loaded once for the 4 rows. The -8 of the codes comes
 * off afterwards as 8 * sum over groups of scale * input code sum. */
static inline __attribute__((always_inline)) void
w4a8_tile(const int8_job *job, int n, int t0, const int TB) {
  const int K = job->K, groups = K / kGroup;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const uint8_t *w = job->w4 + (size_t)n * job->w_stride;
  const uint16_t *scales = job->group_scales + (size_t)n * job->s_stride;
  const uint8_t *x = job->codes + (size_t)t0 * K;
  __m512 acc[kTileRows][kTileTokens4];
  for (int r = 0; r < kTileRows; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int g0 = 0; g0 < groups; g0 += 16) {
    float scale[kTileRows][16];
    tile_scales(scales, groups, job->s_stride, g0, scale);
    const int g1 = g0 + 16 < groups ? g0 + 16 : groups;
    for (int g = g0; g < g1; ++g) {
      __m512i even[kTileRows], odd[kTileRows];
      for (int r = 0; r < kTileRows; ++r) {
        const __m512i bytes = _mm512_loadu_si512(w + (size_t)r * job->w_stride +
                                                 (size_t)g * (kGroup / 2));
        even[r] = _mm512_and_si512(bytes, low);
        odd[r] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low);
      }
      for (int t = 0; t < TB; ++t) {
        const uint8_t *c = x + (size_t)t * K + (size_t)g * kGroup;
        for (int r = 0; r < kTileRows; ++r) {
          __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even[r],
                                            _mm512_loadu_si512(c));
          dot = _mm512_dpbusd_epi32(dot, odd[r], _mm512_loadu_si512(c + 64));
          acc[r][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                              _mm512_set1_ps(scale[r][g - g0]), acc[r][t]);
        }
      }
    }
  }
  /* 8 * sum over groups of scale * the group's sum of input codes */
  __m512 offset[kTileRows][kTileTokens4];
  for (int r = 0; r < kTileRows; ++r)
    for (int t = 0; t < TB; ++t)
      offset[r][t] = _mm512_setzero_ps();
  for (int g0 = 0; g0 < groups; g0 += 16) {
    float scale[kTileRows][16];
    const __mmask16 mask =
        tile_scales(scales, groups, job->s_stride, g0, scale);
    for (int t = 0; t < TB; ++t) {
      const __m512 sums = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(
          mask, job->group_sums + (size_t)(t0 + t) * groups + g0));
      for (int r = 0; r < kTileRows; ++r)
        offset[r][t] =
            _mm512_fmadd_ps(_mm512_loadu_ps(scale[r]), sums, offset[r][t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    const __m128 dot =
        spark_hsum4_ps(acc[0][t], acc[1][t], acc[2][t], acc[3][t]);
    const __m128 off =
        spark_hsum4_ps(offset[0][t], offset[1][t], offset[2][t], offset[3][t]);
    _mm_storeu_ps(
        job->out + (size_t)(t0 + t) * job->out_stride + n,
        _mm_mul_ps(_mm_sub_ps(dot, _mm_mul_ps(_mm_set1_ps(8.0f), off)),
                   _mm_set1_ps(job->token_scales[t0 + t])));
  }
}

/* w4a8 prefill with rows in lanes: a block of kLaneBlock rows is first laid
 * out (lane_block) so that one 64-byte vector holds the same four code
 * bytes of 16 rows, one row a lane; each vpdpbusd then multiplies 16 rows'
 * four codes by one token's four input codes, broadcast from memory, and
 * sums a whole group in int32 lanes before its one conversion and FMA. The
 * rows-along-K tile above pays a conversion and an FMA for every two
 * vpdpbusd; this one, one for every 32. */
enum {
  kLaneRows = 16,
  kLaneVectors = 2,
  kLaneBlock = kLaneRows * kLaneVectors,
  kLaneTokens = 6,
  kLaneMinTokens = 8
};

typedef struct lane_block {
  /* [groups][16][kLaneVectors][16 lanes]: dword p of a row's group, its
   * code bytes 4p..4p+3 (low nibbles: inputs 8p, 8p+2, 8p+4, 8p+6 of the
   * group; high nibbles: the odd inputs after them) */
  uint32_t *codes;
  float *scales; /* [groups][kLaneVectors][16 lanes], 0 past the rows */
} lane_block;

/* The 16 x 16 dwords of `m` transposed in place: m[p] lane r becomes the
 * old m[r] lane p. */
static inline __attribute__((always_inline)) void
transpose16_epi32(__m512i m[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(m[i], m[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(m[i], m[i + 1]);
  }
  /* u[4i + j], 128-bit lane L: rows 4i..4i+3 of column 4L + j */
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    /* 128-bit lanes 0, 2 (even) and 1, 3 (odd) of rows 0..7, 8..15 */
    const __m512i even0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i odd0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
    const __m512i even1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i odd1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    m[j] = _mm512_shuffle_i32x4(even0, even1, 0x88);
    m[8 + j] = _mm512_shuffle_i32x4(even0, even1, 0xdd);
    m[4 + j] = _mm512_shuffle_i32x4(odd0, odd1, 0x88);
    m[12 + j] = _mm512_shuffle_i32x4(odd0, odd1, 0xdd);
  }
}

/* Lays rows n..n+rows-1 (rows <= kLaneBlock) out as lane_block reads them,
 * 16 rows' 64 code bytes of a group at a time (a 16 x 16 dword transpose);
 * the lanes past `rows` hold zero codes and scales. */
static void lane_layout(const int8_job *job, int n, int rows,
                        lane_block *block) {
  const int groups = job->K / kGroup;
  for (int v = 0; v < kLaneVectors; ++v) {
    const int r0 = v * kLaneRows;
    const int count =
        rows - r0 >= kLaneRows ? kLaneRows : (rows > r0 ? rows - r0 : 0);
    for (int g = 0; g < groups; ++g) {
      __m512i m[16];
      float scale[16];
      for (int l = 0; l < 16; ++l) {
        const size_t row = (size_t)(n + r0 + l);
        m[l] = l < count ? _mm512_loadu_si512(job->w4 + row * job->w_stride +
                                              (size_t)g * (kGroup / 2))
                         : _mm512_setzero_si512();
        scale[l] = l < count
                       ? _cvtsh_ss(job->group_scales[row * job->s_stride + g])
                       : 0.0f;
      }
      transpose16_epi32(m);
      for (int p = 0; p < 16; ++p)
        _mm512_store_si512(block->codes +
                               (((size_t)g * 16 + p) * kLaneVectors + v) *
                                   kLaneRows,
                           m[p]);
      _mm512_store_ps(block->scales +
                          ((size_t)g * kLaneVectors + v) * kLaneRows,
                      _mm512_loadu_ps(scale));
    }
  }
}

/* Rows n..n+rows-1 of a laid-out block times tokens t0..t0+TB-1 (TB a
 * constant after inlining): int32 lanes per group, started at -8 * the
 * group's sum of input codes (the -8 of every code), then scaled into f32. */
static inline __attribute__((always_inline)) void
w4a8_lane_tile(const int8_job *job, const lane_block *block, int n, int rows,
               int t0, const int TB) {
  const int K = job->K, groups = K / kGroup;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const uint8_t *x = job->codes + (size_t)t0 * K;
  const int32_t *sums = job->group_sums + (size_t)t0 * groups;
  __m512 acc[kLaneVectors][kLaneTokens];
  for (int v = 0; v < kLaneVectors; ++v)
    for (int t = 0; t < TB; ++t)
      acc[v][t] = _mm512_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m512i dot[kLaneVectors][kLaneTokens];
    for (int t = 0; t < TB; ++t) {
      const __m512i start =
          _mm512_set1_epi32(-8 * sums[(size_t)t * groups + g]);
      for (int v = 0; v < kLaneVectors; ++v)
        dot[v][t] = start;
    }
    const uint32_t *codes = block->codes + (size_t)g * 16 * kLaneBlock;
    const uint8_t *xg = x + (size_t)g * kGroup;
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      /* the even inputs 4p..4p+3 against the low nibbles, the odd ones
       * against the high nibbles */
      __m512i even[kLaneVectors], odd[kLaneVectors];
      for (int v = 0; v < kLaneVectors; ++v) {
        const __m512i bytes =
            _mm512_load_si512(codes + ((size_t)p * kLaneVectors + v) * 16);
        even[v] = _mm512_and_si512(bytes, low);
        odd[v] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low);
      }
      for (int t = 0; t < TB; ++t) {
        int32_t e, o;
        memcpy(&e, xg + (size_t)t * K + 4 * p, 4);
        memcpy(&o, xg + (size_t)t * K + 64 + 4 * p, 4);
        const __m512i xe = _mm512_set1_epi32(e), xo = _mm512_set1_epi32(o);
        for (int v = 0; v < kLaneVectors; ++v) {
          dot[v][t] = _mm512_dpbusd_epi32(dot[v][t], even[v], xe);
          dot[v][t] = _mm512_dpbusd_epi32(dot[v][t], odd[v], xo);
        }
      }
    }
    for (int v = 0; v < kLaneVectors; ++v) {
      const __m512 scale = _mm512_load_ps(
          block->scales + ((size_t)g * kLaneVectors + v) * kLaneRows);
      for (int t = 0; t < TB; ++t)
        acc[v][t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[v][t]), scale, acc[v][t]);
    }
  }
  for (int v = 0; v < kLaneVectors; ++v) {
    const int left = rows - v * kLaneRows;
    if (left <= 0)
      break;
    const __mmask16 mask =
        left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
    for (int t = 0; t < TB; ++t)
      _mm512_mask_storeu_ps(
          job->out + (size_t)(t0 + t) * job->out_stride + n + v * kLaneRows,
          mask,
          _mm512_mul_ps(acc[v][t], _mm512_set1_ps(job->token_scales[t0 + t])));
  }
}

/* Rows n0..n1-1 against every token, kLaneBlock rows at a time, each block
 * laid out once for all the tokens. */
static int w4a8_lanes(const int8_job *job, int n0, int n1) {
  const size_t groups = (size_t)(job->K / kGroup);
  lane_block block;
  block.codes = (uint32_t *)spark_scratch_alloc(
      groups * 16 * kLaneBlock * sizeof(uint32_t) +
      groups * kLaneBlock * sizeof(float));
  if (!block.codes)
    return -1;
  block.scales = (float *)(block.codes + groups * 16 * kLaneBlock);
  for (int n = n0; n < n1; n += kLaneBlock) {
    const int rows = n1 - n < kLaneBlock ? n1 - n : kLaneBlock;
    lane_layout(job, n, rows, &block);
    /* The next block's codes and scales into L2 while this one's tiles
     * run: the layout reads 16 rows a line at a time, which the hardware
     * prefetchers do not foresee. */
    for (int r = n + kLaneBlock; r < n + 2 * kLaneBlock && r < job->N; ++r) {
      /* the row (grouped rows: with their scales), then dense rows' scales */
      const uint8_t *row = job->w4 + (size_t)r * job->w_stride;
      prefetch_rest(row, row + job->w_stride, 0);
      if (job->w_stride == job->K / 2) {
        const uint8_t *scales =
            (const uint8_t *)(job->group_scales + (size_t)r * job->s_stride);
        prefetch_rest(scales, scales + 2 * (job->K / kGroup), 0);
      }
    }
    int t0 = 0;
    for (; t0 + kLaneTokens <= job->T; t0 += kLaneTokens)
      w4a8_lane_tile(job, &block, n, rows, t0, kLaneTokens);
    switch (job->T - t0) {
    case 5:
      w4a8_lane_tile(job, &block, n, rows, t0, 5);
      break;
    case 4:
      w4a8_lane_tile(job, &block, n, rows, t0, 4);
      break;
    case 3:
      w4a8_lane_tile(job, &block, n, rows, t0, 3);
      break;
    case 2:
      w4a8_lane_tile(job, &block, n, rows, t0, 2);
      break;
    case 1:
      w4a8_lane_tile(job, &block, n, rows, t0, 1);
      break;
    default:
      break;
    }
  }
  spark_scratch_put(block.codes);
  return 0;
}

static int w4a8_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const int8_job *job = (const int8_job *)closure;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  if (job->T == 1) {
    const int groups = job->K / kGroup;
    float *sums8 = (float *)__builtin_alloca(sizeof(float) * (groups + 16));
    for (int g = 0; g < groups; ++g)
      sums8[g] = 8.0f * (float)job->group_sums[g];
    /* constants in the loop; the CPUs with AVX512_VNNI but no GFNI are
     * Intel's */
    if (job->ahead == kSparkPrefetchAvx512Amd && job->gfni)
      w4a8_token(job, n0, n1, sums8, kSparkPrefetchAvx512Amd, 1);
    else if (job->gfni)
      w4a8_token(job, n0, n1, sums8, kSparkPrefetchAvx512, 1);
    else
      w4a8_token(job, n0, n1, sums8, kSparkPrefetchAvx512, 0);
    return 0;
  }
  if (job->T >= kLaneMinTokens)
    return w4a8_lanes(job, n0, n1);
  for (int t0 = 0; t0 < job->T; t0 += kTileTokens4) {
    const int tokens = job->T - t0 < kTileTokens4 ? job->T - t0 : kTileTokens4;
    for (int n = n0; n < n1; n += kTileRows) {
      switch (tokens) {
      case 4:
        w4a8_tile(job, n, t0, 4);
        break;
      case 3:
        w4a8_tile(job, n, t0, 3);
        break;
      case 2:
        w4a8_tile(job, n, t0, 2);
        break;
      default:
        w4a8_tile(job, n, t0, 1);
        break;
      }
    }
  }
  return 0;
}

/* ---- 6-bit codes (spark_six_bit_top in model_abi.h) ------------------ */

/* The 64 even-index and the 64 odd-index codes of group g (128 codes) of a
 * 6-bit row of K codes, as bytes 0..63 in the lanes where the group's 4-bit
 * codes would be: its 64 nibble bytes, plus 16 x the top two bits from the
 * group's 32 bytes of them, loaded into both halves of a vector. A byte of
 * the first half keeps its nibble byte's tops in bits 0-3 (even, odd), of
 * the second half in bits 4-7; a rotate of each 32-bit lane (by 4 or 0 for
 * the even codes, 2 or 30 for the odd ones) brings them to bits 4-5, and one
 * vpternlogd puts them beside the nibble: four instructions more than a
 * 4-bit group for 32 bytes more. `ahead`: request the lines that far ahead
 * into L2 (the tops' line with every other group), 0 none. */
static inline __attribute__((always_inline)) void
six_bit_codes(const uint8_t *row, int K, int g, int ahead, __m512i *even,
              __m512i *odd, const int gfni) {
  const uint8_t *line = row + (size_t)g * (kGroup / 2);
  const uint8_t *tops = row + K / 2 + (size_t)g * (kGroup / 4);
  if (ahead) {
    prefetch_row_line(line, ahead);
    if (g % 2 == 0)
      prefetch_row_line(tops, ahead);
  }
  const __m512i bytes = _mm512_loadu_si512(line);
  const __m512i both =
      _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)tops));
  const __m512i top_even = _mm512_rolv_epi32(
      both, _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
  const __m512i top_odd =
      _mm512_rolv_epi32(both, _mm512_set_epi32(30, 30, 30, 30, 30, 30, 30, 30,
                                               2, 2, 2, 2, 2, 2, 2, 2));
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  /* a | (b & c) */
  *even = _mm512_ternarylogic_epi32(
      _mm512_and_si512(bytes, _mm512_set1_epi8(0x0f)), top_even, bits45, 0xf8);
  *odd = _mm512_ternarylogic_epi32(high_nibbles(bytes, gfni), top_odd, bits45,
                                   0xf8);
}

/* A 6-bit row's f16 scales (or zero points), requested into L2 as far
 * ahead as its code lines: 2 bytes per 96 code bytes. */
static inline void prefetch_six_bit_sides(const uint16_t *row_sides,
                                          int ahead) {
  spark_prefetch_l2_ahead(row_sides, ahead / 48);
}

/* acc after group g of a w6a8 row: its 64 even- and 64 odd-index codes
 * against the group's input codes (the w4a8 order), times its scale. */
static inline __attribute__((always_inline)) __m512
w6a8_group(const uint8_t *row, int K, int g, const uint8_t *codes, int ahead,
           const float *scale, __m512 acc, const int gfni) {
  __m512i even, odd;
  six_bit_codes(row, K, g, ahead, &even, &odd, gfni);
  __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even,
                                    _mm512_load_si512(codes));
  dot = _mm512_dpbusd_epi32(dot, odd, _mm512_load_si512(codes + 64));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(*scale), acc);
}

/* Row n against token t (w6a8: 6-bit asymmetric groups, int8 inputs), as a
 * vector whose lane sum is the row's output before the token's scale: as
 * w4a8_row, with each group's zero point in place of 8 (`sums`: each
 * group's sum of input codes, groups + 16 floats). */
static inline __attribute__((always_inline)) __m512
w6a8_row(const int8_job *job, int n, int t, const float *sums, int ahead,
         const int gfni) {
  const int K = job->K, groups = K / kGroup;
  const uint8_t *row = job->w4 + (size_t)n * job->w_stride;
  const uint16_t *scales = job->group_scales + (size_t)n * job->s_stride;
  const uint16_t *zeros = job->group_zeros + (size_t)n * job->s_stride;
  const uint8_t *codes = job->codes + (size_t)t * K;
  if (ahead) {
    prefetch_six_bit_sides(scales, ahead);
    prefetch_six_bit_sides(zeros, ahead);
  }
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int g0 = 0; g0 < groups; g0 += 16) {
    const int count = groups - g0 < 16 ? groups - g0 : 16;
    const __mmask16 mask = (__mmask16)((1u << count) - 1u);
    const __m512 scale = _mm512_cvtph_ps(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi16((__mmask32)mask, scales + g0)));
    const __m512 zero = _mm512_cvtph_ps(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi16((__mmask32)mask, zeros + g0)));
    acc3 = _mm512_fnmadd_ps(_mm512_mul_ps(scale, zero),
                            _mm512_maskz_loadu_ps(mask, sums + g0), acc3);
    float scales16[16];
    _mm512_storeu_ps(scales16, scale);
    int i = 0;
    for (; i + 3 <= count; i += 3) {
      acc0 = w6a8_group(row, K, g0 + i, codes + (size_t)(g0 + i) * kGroup,
                        ahead, scales16 + i, acc0, gfni);
      acc1 =
          w6a8_group(row, K, g0 + i + 1, codes + (size_t)(g0 + i + 1) * kGroup,
                     ahead, scales16 + i + 1, acc1, gfni);
      acc2 =
          w6a8_group(row, K, g0 + i + 2, codes + (size_t)(g0 + i + 2) * kGroup,
                     ahead, scales16 + i + 2, acc2, gfni);
    }
    for (; i < count; ++i)
      acc0 = w6a8_group(row, K, g0 + i, codes + (size_t)(g0 + i) * kGroup,
                        ahead, scales16 + i, acc0, gfni);
  }
  return _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
}

/* w6a8: one token reads its rows one at a time as one stream (the lane
 * sums of 4 rows taken at once), each line requested `ahead` into L2; more
 * tokens take each task's rows (at most 64 x 3K/4 bytes, from L2 after the
 * first token) token by token. */
static inline __attribute__((always_inline)) void
w6a8_rows(const int8_job *job, int n0, int n1, int t, const float *sums,
          int ahead, const int gfni) {
  const float token_scale = job->token_scales[t];
  float *out = job->out + (size_t)t * job->out_stride;
  int n = n0;
  for (; n + 4 <= n1; n += 4) {
    const __m512 a = w6a8_row(job, n, t, sums, ahead, gfni),
                 b = w6a8_row(job, n + 1, t, sums, ahead, gfni);
    const __m512 c = w6a8_row(job, n + 2, t, sums, ahead, gfni),
                 d = w6a8_row(job, n + 3, t, sums, ahead, gfni);
    _mm_storeu_ps(out + n, _mm_mul_ps(spark_hsum4_ps(a, b, c, d),
                                      _mm_set1_ps(token_scale)));
  }
  for (; n < n1; ++n)
    out[n] = _mm512_reduce_add_ps(w6a8_row(job, n, t, sums, ahead, gfni)) *
             token_scale;
}

static int w6a8_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const int8_job *job = (const int8_job *)closure;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  const int groups = job->K / kGroup;
  float *sums = (float *)__builtin_alloca(sizeof(float) * (groups + 16));
  for (int t = 0; t < job->T; ++t) {
    for (int g = 0; g < groups; ++g)
      sums[g] = (float)job->group_sums[(size_t)t * groups + g];
    const int ahead = job->T == 1 ? job->ahead : 0;
    if (job->gfni)
      w6a8_rows(job, n0, n1, t, sums, ahead, 1);
    else
      w6a8_rows(job, n0, n1, t, sums, ahead, 0);
  }
  return 0;
}

/* ---- w4a16: 4-bit codes, bf16 or f16 inputs as int16 ----------------- */

/* acc after group g of a w4a16 row (`factor`: the group's scale times its
 * input power of two): the high bytes against the nibbles, shifted up 8
 * bits, then the low bytes accumulated on top, exact in int32. */
static inline __attribute__((always_inline)) __m512
w4a16_group(const uint8_t *row, const uint8_t *bytes, int g, float factor,
            int prefetch, __m512 acc, const int K6, int ahead) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const uint8_t *line = row + (size_t)g * (kGroup / 2);
  __m512i even, odd;
  if (K6) {
    six_bit_codes(row, K6, g, prefetch ? ahead : 0, &even, &odd, 0);
  } else {
    if (prefetch)
      prefetch_line(line);
    const __m512i w = _mm512_loadu_si512(line);
    even = _mm512_and_si512(w, low);
    odd = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
  }
  /* low bytes of the even-index inputs, of the odd ones, high bytes of the
   * even ones, of the odd ones */
  const uint8_t *x = bytes + (size_t)g * (2 * kGroup);
  __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even,
                                   _mm512_load_si512(x + 128));
  hi = _mm512_dpbusd_epi32(hi, odd, _mm512_load_si512(x + 192));
  __m512i dot = _mm512_slli_epi32(hi, 8);
  dot = _mm512_dpbusd_epi32(dot, _mm512_load_si512(x), even);
  dot = _mm512_dpbusd_epi32(dot, _mm512_load_si512(x + 64), odd);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(factor), acc);
}

/* Row n times token t (w4a16; K6 = K: 6-bit codes, spark_six_bit_top, with
 * dense scales and zero points): the int16 inputs (spark_prepare_int16) split
 * into their high bytes (signed), multiplied with the nibbles (unsigned),
 * and their low bytes (unsigned), multiplied with the nibbles (as signed
 * bytes 0..15): four vpdpbusd per 64 weight bytes into exact int32 sums,
 * high * 256 + low, then each group's scale times its input power of two,
 * into two accumulators (even and odd groups) held in registers. The zero
 * points come off as sum over groups of scale * zero * what the group's
 * int16 inputs stand for, 16 groups at a time. */
static inline __attribute__((always_inline)) __m512
w4a16_row_lanes(const int8_job *job, int n, int t, int prefetch,
                const int six) {
  const int K = job->K, groups = K / kGroup, K6 = six ? K : 0;
  const uint8_t *row = job->w4 + (size_t)n * job->w_stride;
  const uint16_t *scales = job->group_scales + (size_t)n * job->s_stride;
  const uint16_t *zeros = job->group_zeros + (size_t)n * job->s_stride;
  if (prefetch && six) {
    prefetch_six_bit_sides(scales, job->ahead);
    prefetch_six_bit_sides(zeros, job->ahead);
  } else if (prefetch && job->w_stride == K / 2) {
    prefetch_scales(scales);
    prefetch_scales(zeros);
  } else if (prefetch) {
    prefetch_rest(row + K / 2, row + job->w_stride, kSparkPrefetchAvx512);
  }
  const float *input_scales = job->x16->scales + (size_t)t * groups;
  const float *sums = job->x16->sums + (size_t)t * groups;
  const uint8_t *bytes = job->x16->bytes + (size_t)t * groups * (2 * kGroup);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, offset = acc0;
  for (int g0 = 0; g0 < groups; g0 += 16) {
    float factor[16];
    const __mmask16 mask =
        group_factors(scales, input_scales, g0, groups, factor);
    const __m512 zero = _mm512_cvtph_ps(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi16((__mmask32)mask, zeros + g0)));
    const __m512 scale = _mm512_cvtph_ps(_mm512_castsi512_si256(
        _mm512_maskz_loadu_epi16((__mmask32)mask, scales + g0)));
    offset = _mm512_fmadd_ps(_mm512_mul_ps(scale, zero),
                             _mm512_maskz_loadu_ps(mask, sums + g0), offset);
    const int g1 = g0 + 16 < groups ? g0 + 16 : groups;
    int g = g0;
    for (; g + 1 < g1; g += 2) {
      acc0 = w4a16_group(row, bytes, g, factor[g - g0], prefetch, acc0, K6,
                         job->ahead);
      acc1 = w4a16_group(row, bytes, g + 1, factor[g + 1 - g0], prefetch, acc1,
                         K6, job->ahead);
    }
    if (g < g1)
      acc0 = w4a16_group(row, bytes, g, factor[g - g0], prefetch, acc0, K6,
                         job->ahead);
  }
  return _mm512_sub_ps(_mm512_add_ps(acc0, acc1), offset);
}

/* w4a16_row_lanes' lanes summed into the output of row n, token t. */
static inline __attribute__((always_inline)) void
w4a16_row(const int8_job *job, int n, int t, int prefetch, const int six) {
  job->out[(size_t)t * job->out_stride + n] =
      _mm512_reduce_add_ps(w4a16_row_lanes(job, n, t, prefetch, six));
}

/* One token against rows n0..n1-1 (w4a16 decode on Intel cores): one row
 * at a time, as one stream, the lane sums of 4 rows taken at once. */
static inline __attribute__((always_inline)) void
w4a16_rows(const int8_job *job, int n0, int n1, const int six) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) {
    const __m512 a = w4a16_row_lanes(job, n, 0, 1, six),
                 b = w4a16_row_lanes(job, n + 1, 0, 1, six);
    const __m512 c = w4a16_row_lanes(job, n + 2, 0, 1, six),
                 d = w4a16_row_lanes(job, n + 3, 0, 1, six);
    _mm_storeu_ps(job->out + n, spark_hsum4_ps(a, b, c, d));
  }
  for (; n < n1; ++n)
    w4a16_row(job, n, 0, 1, six);
}

/* w4a16: rows n..n+3 times tokens t0..t0+TB-1 (TB a constant after
 * inlining, at most 3: the registers hold 12 sums), the products of
 * w4a16_group: each group's nibbles unpacked once for the TB tokens, each
 * token's byte planes loaded once for the 4 rows; the factors (scale times
 * input power of two) and the zero-point terms computed 16 groups at a
 * time. One token (decode, TB 1) also requests the tile's lines, its scales
 * and zero points into L2 ahead, in memory order (the 4 rows are one block
 * of the matrix): on the 1.7b at one thread (Zen 5), 1.15x the tokens per
 * second of one row at a time, which spent more time loading inputs than
 * memory took to deliver the row. */
static inline __attribute__((always_inline)) void
w4a16_tile(const int8_job *job, int n, int t0, const int TB) {
  const int K = job->K, groups = K / kGroup;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const uint8_t *w = job->w4 + (size_t)n * job->w_stride;
  const uint16_t *scales = job->group_scales + (size_t)n * job->s_stride;
  const uint16_t *zeros = job->group_zeros + (size_t)n * job->s_stride;
  const float *input_scales = job->x16->scales + (size_t)t0 * groups;
  const float *sums = job->x16->sums + (size_t)t0 * groups;
  const uint8_t *bytes = job->x16->bytes + (size_t)t0 * groups * (2 * kGroup);
  __m512 acc[kTileRows][kTileTokens16], offset[kTileRows][kTileTokens16];
  for (int r = 0; r < kTileRows; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = offset[r][t] = _mm512_setzero_ps();
  if (TB == 1 && job->w_stride == K / 2) /* decode: the 4 rows' scales and
                                            zero points, ahead */
    for (int i = 0; i < kTileRows * groups; i += 32) {
      prefetch_scales(scales + i);
      prefetch_scales(zeros + i);
    }
  else if (TB == 1) /* grouped rows: each row's lines after its codes (the
                       loop below requests those), a tile_ahead later */
    for (int r = 0; r < kTileRows; ++r)
      prefetch_rest(w + (size_t)r * job->w_stride + K / 2,
                    w + (size_t)(r + 1) * job->w_stride, (int)job->tile_ahead);
  for (int g0 = 0; g0 < groups; g0 += 16) {
    float scale[kTileRows][16], factor[kTileRows][kTileTokens16][16];
    const __mmask16 mask =
        tile_scales(scales, groups, job->s_stride, g0, scale);
    for (int r = 0; r < kTileRows; ++r) {
      const __m512 s = _mm512_loadu_ps(scale[r]);
      const __m512 sz = _mm512_mul_ps(
          s, _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16(
                 (__mmask32)mask, zeros + (size_t)r * job->s_stride + g0))));
      for (int t = 0; t < TB; ++t) {
        _mm512_storeu_ps(
            factor[r][t],
            _mm512_mul_ps(s,
                          _mm512_maskz_loadu_ps(
                              mask, input_scales + (size_t)t * groups + g0)));
        offset[r][t] = _mm512_fmadd_ps(
            sz, _mm512_maskz_loadu_ps(mask, sums + (size_t)t * groups + g0),
            offset[r][t]);
      }
    }
    const int g1 = g0 + 16 < groups ? g0 + 16 : groups;
    for (int g = g0; g < g1; ++g) {
      __m512i even[kTileRows], odd[kTileRows];
      for (int r = 0; r < kTileRows; ++r) {
        const uint8_t *line =
            w + (size_t)r * job->w_stride + (size_t)g * (kGroup / 2);
        if (TB == 1) /* the same line of a later tile */
          spark_prefetch_l2_ahead(line, (int)job->tile_ahead);
        const __m512i v = _mm512_loadu_si512(line);
        even[r] = _mm512_and_si512(v, low);
        odd[r] = high_nibbles(v, 0);
      }
      for (int t = 0; t < TB; ++t) {
        /* low bytes of the even-index inputs, of the odd ones, high bytes
         * of the even ones, of the odd ones */
        const uint8_t *x = bytes + ((size_t)t * groups + g) * (2 * kGroup);
        const __m512i lo_even = _mm512_load_si512(x);
        const __m512i lo_odd = _mm512_load_si512(x + 64);
        for (int r = 0; r < kTileRows; ++r) {
          __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), even[r],
                                           _mm512_load_si512(x + 128));
          hi = _mm512_dpbusd_epi32(hi, odd[r], _mm512_load_si512(x + 192));
          __m512i dot = _mm512_slli_epi32(hi, 8);
          dot = _mm512_dpbusd_epi32(dot, lo_even, even[r]);
          dot = _mm512_dpbusd_epi32(dot, lo_odd, odd[r]);
          acc[r][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                              _mm512_set1_ps(factor[r][t][g - g0]), acc[r][t]);
        }
      }
    }
  }
  for (int t = 0; t < TB; ++t)
    _mm_storeu_ps(
        job->out + (size_t)(t0 + t) * job->out_stride + n,
        _mm_sub_ps(spark_hsum4_ps(acc[0][t], acc[1][t], acc[2][t], acc[3][t]),
                   spark_hsum4_ps(offset[0][t], offset[1][t], offset[2][t],
                                  offset[3][t])));
}

/* How far ahead a w4a16 decode tile requests its lines: each line of row r
 * the same line of row r of a later tile, the first tile at least
 * kSparkPrefetchAvx512 bytes on. The 4 rows are 4 streams a row apart; one
 * distance in memory order (as the rows of w4a8 are read) put rows 1-3
 * behind it once a tile is longer than the distance: the 1.7b's down
 * matrices (K = 6656, 14 KiB tiles) ran at 63-78% of a stream at 1 and 2
 * threads, 90-103% with this (spark-kernelbench, Zen 5), gate/up and the
 * head (4.25 KiB tiles, 3 ahead) unchanged or faster. */
static size_t w4a16_tile_ahead(int w_stride) {
  const size_t tile = (size_t)kTileRows * (size_t)w_stride;
  return ((size_t)kSparkPrefetchAvx512 + tile - 1) / tile * tile;
}

/* 4 rows x up to 3 tokens at a time (w4a16_tile), the last rows of a task
 * one at a time. */
static int w4a16_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const int8_job *job = (const int8_job *)closure;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  const int n4 = n0 + (n1 - n0) / kTileRows * kTileRows;
  if (job->T == 1 && job->rows) {
    w4a16_rows(job, n0, n1, 0);
    return 0;
  }
  if (job->T == 1) {
    for (int n = n0; n < n4; n += kTileRows)
      w4a16_tile(job, n, 0, 1);
    for (int n = n4; n < n1; ++n)
      w4a16_row(job, n, 0, 1, 0);
    return 0;
  }
  for (int t0 = 0; t0 < job->T; t0 += kTileTokens16) {
    const int tokens =
        job->T - t0 < kTileTokens16 ? job->T - t0 : kTileTokens16;
    for (int n = n0; n < n4; n += kTileRows) {
      switch (tokens) {
      case 3:
        w4a16_tile(job, n, t0, 3);
        break;
      case 2:
        w4a16_tile(job, n, t0, 2);
        break;
      default:
        w4a16_tile(job, n, t0, 1);
        break;
      }
    }
  }
  for (int n = n4; n < n1; ++n) /* rows past the last whole tile */
    for (int t = 0; t < job->T; ++t)
      w4a16_row(job, n, t, 0, 0);
  return 0;
}

/* w6a16 (6-bit codes, bf16 or f16 inputs as int16): one row at a time, as
 * w4a16_rows, on every CPU; more tokens take each task's rows (at most 64
 * x 3K/4 bytes, from L2 after the first token) token by token. */
static int w6a16_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const int8_job *job = (const int8_job *)closure;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  if (job->T == 1) {
    w4a16_rows(job, n0, n1, 1);
    return 0;
  }
  for (int t = 0; t < job->T; ++t)
    for (int n = n0; n < n1; ++n)
      w4a16_row(job, n, t, 0, 1);
  return 0;
}

/* Whether w4a16 decode reads its rows one at a time (w4a16_rows): on Intel
 * cores. On an Intel Xeon guest with AMX (2026-12-06, spark-kernelbench,
 * the 1.7b's matrices) the rows read 95-100% of a stream from memory at one
 * thread and 89-96% at two, the tiles of 4 rows 88-91% and 82-90%, though
 * the tiles' instructions run faster from L2 (33 against 26 GB/s); on
 * Zen 5 the tiles decoded the 1.7b 1.15x as fast as the rows. */
static int w4a16_decode_rows(void) {
  __builtin_cpu_init();
#ifdef SPARK_W4A16_OTHER_DECODE
  /* the kernel tests' second copy (X86NoGfni.c): the path this CPU does
   * not take, so that both are checked on any CPU */
  return __builtin_cpu_is("amd");
#else
  return !__builtin_cpu_is("amd");
#endif
}

/* w4a16 (six: w6a16, spark_six_bit_rows_fit) with the inputs rounded as
 * `rounding` says, taken as int16. */
static int w4a16(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *zeros,
                 halide_buffer_t *out, int rounding, int six) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (six ? !spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup)
          : !spark_grouped_rows_fit(x, w, scales, zeros, out, kGroup, 1))
    return -1;
  spark_int16_inputs in;
  if (spark_prepare_int16_avx512(x, rounding, 1, &in) != 0)
    return -1;
  int8_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const uint16_t *)scales->host,
                  .group_zeros = (const uint16_t *)zeros->host,
                  .x16 = &in,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_avx512_rows(),
                  .w_stride = w->dim[1].stride,
                  .s_stride = scales->dim[1].stride,
                  .tile_ahead = w4a16_tile_ahead(w->dim[1].stride),
                  .rows = w4a16_decode_rows()};
  const int rc =
      halide_do_par_for(NULL, six ? w6a16_task : w4a16_task, 0,
                        (N + kRowsPerTask - 1) / kRowsPerTask, (uint8_t *)&job);
  spark_free_int16(&in);
  return rc;
}

/* w4a16 with bf16 (f16) inputs: x f32 [K, T], w u8 [K/2, N], scales and
 * zeros f16 [K/128, N], out f32 [N, T]; out = sum over groups of
 * scale * sum_k (code - zero) * the input rounded to bf16 (f16), each input
 * taken as an int16 multiple of its group's power of two (x86_inputs.h). */
int spark_vnni_linear_w4a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkBF16Inputs, 0);
}

int spark_vnni_linear_w4a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *zeros, halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkF16Inputs, 0);
}

/* w6a16 with bf16 (f16) inputs: as w4a16, with 6-bit codes (x f32 [K, T],
 * w u8 [3K/4, N] as spark_six_bit_row_bytes lays them out, scales and zeros
 * f16 [K/128, N], out f32 [N, T]). */
int spark_vnni_linear_w6a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkBF16Inputs, 1);
}

int spark_vnni_linear_w6a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *zeros, halide_buffer_t *out) {
  return w4a16(x, w, scales, zeros, out, kSparkF16Inputs, 1);
}

/* Quantizes the inputs into the layout `task` reads, runs it over blocks of
 * rows, frees. */
static int run_int8(halide_buffer_t *x, float input_scale, int8_job *job,
                    int fourBit, int (*task)(void *, int, uint8_t *)) {
  const int K = job->K, T = job->T, groups = K / kGroup;
  const size_t tokens = (size_t)(T > 0 ? T : 1);
  uint8_t *codes = NULL;
  float *token_scales = (float *)spark_scratch_alloc(sizeof(float) * tokens);
  int32_t *group_sums = (int32_t *)spark_scratch_alloc(
      sizeof(int32_t) * tokens * (groups > 0 ? groups : 1));
  int rc = -1;
  if (token_scales && group_sums &&
      spark_scratch_get((void **)&codes, tokens * (size_t)K) == 0) {
    for (int t = 0; t < T; ++t)
      token_scales[t] = spark_quantize_row_avx512(
          (const float *)x->host + (size_t)t * x->dim[1].stride, K, input_scale,
          fourBit, codes + (size_t)t * K, group_sums + (size_t)t * groups);
    job->codes = codes;
    job->token_scales = token_scales;
    job->group_sums = group_sums;
    rc = halide_do_par_for(NULL, task, 0,
                           (job->N + kRowsPerTask - 1) / kRowsPerTask,
                           (uint8_t *)job);
  }
  spark_scratch_put(codes);
  spark_scratch_put(token_scales);
  spark_scratch_put(group_sums);
  return rc;
}

int spark_vnni_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_VNNI_DEPTH, SPARK_MK_ROWS))
    return -1;
  int8_job job = {.w8 = (const int8_t *)w->host,
                  .scales = (const float *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_w8a8_rows()};
  return run_int8(x, input_scale, &job, 0, w8a8_task);
}

int spark_vnni_linear_w4a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_grouped_rows_fit(x, w, scales, NULL, out, kGroup, SPARK_MK_ROWS))
    return -1;
  int8_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const uint16_t *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_avx512_rows(),
                  .gfni = cpu_gfni(),
                  .w_stride = w->dim[1].stride,
                  .s_stride = scales->dim[1].stride};
  return run_int8(x, input_scale, &job, 1, w4a8_task);
}

/* w6a8: x f32 [K, T], w u8 [3K/4, N] (spark_six_bit_row_bytes), scales and
 * zeros f16 [K/128, N], out f32 [N, T]; out = the token's input scale x sum
 * over groups of scale * sum_k (code - zero) * input code. */
int spark_vnni_linear_w6a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, halide_buffer_t *zeros,
                           float input_scale, halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup))
    return -1;
  int8_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const uint16_t *)scales->host,
                  .group_zeros = (const uint16_t *)zeros->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_avx512_rows(),
                  .gfni = cpu_gfni(),
                  .w_stride = w->dim[1].stride,
                  .s_stride = scales->dim[1].stride};
  return run_int8(x, input_scale, &job, 1, w6a8_task);
}
