/* bf16_linear.c - AVX-512 BF16 dot-product kernels for bf16 weight matrices
 * and, with bf16 activations, int8 ones (w8a16).
 *
 * Same interface as the Halide linear kernels (x f32 [K, T], w bf16 [K, N],
 * out f32 [N, T]); used by the avx512bf16 variant. The activations are
 * rounded to bf16 once per call (vcvtne2ps2bf16); a vdpbf16ps consumes 32
 * weights: bf16 ones straight from the pack, int8 codes widened to bf16
 * (exact). Each task takes a block of rows. bf16 decode and w8a16
 * decode (int16 inputs on vpdpwssd, as avx2_linear.c takes them) read one
 * row at a time as one stream, each line requested into L2
 * spark_prefetch_avx512_rows() ahead; prefill runs register tiles: bf16 4 rows
 * x 6 tokens on vdpbf16ps (AMD) or f32 FMAs (Intel), w8a16 4 x 3 on vpdpwssd (K
 * % 128 != 0: 4 x 4 on vdpbf16ps). (w4a16 with bf16 inputs is int8_linear.c's.)
 * Needs K % 32 == 0. Compiled with -mavx512f -mavx512bw -mavx512bf16
 * -mavx512vnni -mf16c; entered only when CPUID reports AVX512_BF16 (the
 * avx512bf16 variant also requires AVX512_VNNI).
 */
#include "HalideRuntime.h"
#include "avx512_sums.h"
#include "microkernel_support.h"
#include "x86_inputs.h"
#include "x86_inputs_avx512.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bf16_job {
  const uint16_t *w;       /* [N][K] bf16 weights, or NULL and: */
  const int8_t *codes;     /* [N][K] int8 weights (w8a16) */
  const float *scales;     /* [N]: their row scales */
  const uint16_t *x;       /* [T][K] bf16, or NULL and (bf16 prefill): */
  const float *xf;         /* [T][K] bf16(x) as f32, per 32: even, odd */
  const int16_t *x16;      /* [K] the bf16 inputs as int16, with */
  const float *x16_scales; /* [K / kInputGroup]: each group's power of two */
  float *out;              /* [T][out_stride] */
  int K, N, T, out_stride, rows_per_task;
  int ahead; /* decode: spark_prefetch_avx512_rows() */
  int dot;   /* bf16 prefill: vdpbf16ps tiles (bf16_dot_tile) */
} bf16_job;

/* w8a16 decode's scaling group of int16 inputs (as avx2_linear.c's): the
 * groups x86_inputs_avx512.h prepares. */
enum { kInputGroup = SPARK_AVX512_GROUP };

/* acc plus the sums of the pairwise int16 products of a and b (vpdpwssd).
 * In asm: unless its tuning marks the instruction fast (-mtune=znver4 and
 * later), clang 22 splits each vpdpwssd into a vpmaddwd and a vpaddd, two
 * instructions for one, in the decode rows and the prefill tiles alike. A
 * harness calling spark_bf16_linear_w8a16 on an Intel Xeon (Emerald Rapids),
 * one thread, 64 tokens, best of 10, 4 alternating rounds: K = 2048,
 * N = 2048 4.40-4.46 ms before, 3.21-3.31 after; K = 6656, N = 2048
 * 14.42-14.54 ms, 10.97-11.34 (one disturbed round: 4.43 and 18.21 before,
 * 4.21 and 11.34 after). */
static inline __attribute__((always_inline)) __m512i
dpwssd(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* The 64 bytes at p (any alignment) in one load. In asm: when both halves
 * feed a vpmovsxbw, clang folds them into two 32-byte memory operands, two
 * demand loads of the line instead of one. The w8a16 decode rows read the
 * weights from memory at 86-88% of a stream with two loads a line, 92-104%
 * with one (spark-kernelbench, an Intel Xeon guest with AMX, 1 and 2
 * threads, the 1.7b's gate/up, down and head matrices; distances 2-24 KiB
 * ahead moved the two-load rows by at most 4 points). */
static inline __attribute__((always_inline)) __m512i load_line(const void *p) {
  __m512i v;
  __asm__("vmovdqu64 %1, %0" : "=v"(v) : "m"(*(const char(*)[64])p));
  return v;
}

/* 32 int8 codes as bf16 pairs (exact). */
static inline __m512bh codes_to_bf16(const int8_t *codes) {
  __m512 lo = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)codes)));
  __m512 hi = _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(codes + 16))));
  return _mm512_cvtne2ps_pbh(hi, lo);
}

static float sum16(__m512 v) { return _mm512_reduce_add_ps(v); }

/* The T rows of x (f32 [K, T], K % 32 == 0) rounded to bf16 (to nearest,
 * ties to even), [T][K], 64-byte aligned; NULL when out of memory. */
static uint16_t *to_bf16(const halide_buffer_t *x) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const float *xf = (const float *)x->host;
  uint16_t *xb = NULL;
  if (spark_scratch_get((void **)&xb, (size_t)(T > 0 ? T : 1) * K * 2) != 0)
    return NULL;
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; k += 32) {
      __m512 lo = _mm512_loadu_ps(xf + (size_t)t * xs + k);
      __m512 hi = _mm512_loadu_ps(xf + (size_t)t * xs + k + 16);
      _mm512_storeu_si512(xb + (size_t)t * K + k,
                          (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  return xb;
}

/* 32 bf16 values as f32: the even-index ones (low halves of the 32-bit
 * lanes), then the odd-index ones (high halves). */
static inline __attribute__((always_inline)) void
bf16_pairs(__m512i v, __m512 *even, __m512 *odd) {
  *even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  *odd = _mm512_castsi512_ps(
      _mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}

/* The T rows of x (f32 [K, T], K % 32 == 0) rounded to bf16 and back to f32,
 * each 32 as their even-index values, then their odd-index ones (the order
 * bf16_pairs widens weights in), [T][K], 64-byte aligned; NULL when out of
 * memory. */
static float *to_bf16_pairs(const halide_buffer_t *x) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const float *xf = (const float *)x->host;
  float *to = NULL;
  if (spark_scratch_get((void **)&to,
                        (size_t)(T > 0 ? T : 1) * K * sizeof(float)) != 0)
    return NULL;
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; k += 32) {
      const __m512 lo = _mm512_loadu_ps(xf + (size_t)t * xs + k);
      const __m512 hi = _mm512_loadu_ps(xf + (size_t)t * xs + k + 16);
      __m512 even, odd;
      bf16_pairs((__m512i)_mm512_cvtne2ps_pbh(hi, lo), &even, &odd);
      _mm512_store_ps(to + (size_t)t * K + k, even);
      _mm512_store_ps(to + (size_t)t * K + k + 16, odd);
    }
  return to;
}

/* One token against the int8 rows n0..n1-1 (w8a16 decode): one row at a
 * time, as one stream, each line requested into L2 `ahead` bytes ahead.
 * The codes are widened to int16 (vpmovsxbw) and multiplied with the int16
 * inputs by vpdpwssd into exact int32 sums, one per group of kInputGroup,
 * scaled by the group's power of two: two instructions per 32 codes (the
 * widening to bf16 took six). */
static inline __attribute__((always_inline)) __m512
w8_group(const bf16_job *job, const int8_t *row, int g, const int ahead,
         __m512 acc) {
  const int8_t *line = row + (size_t)g * kInputGroup;
  const int16_t *x = job->x16 + (size_t)g * kInputGroup;
  spark_prefetch_l2_ahead(line, ahead);
  spark_prefetch_l2_ahead(line + 64, ahead);
  __m512i dot0 = _mm512_setzero_si512(), dot1 = dot0;
  for (int q = 0; q < kInputGroup / 32; q += 2) {
    const __m512i v = load_line(line + 32 * q);
    dot0 = dpwssd(dot0, _mm512_cvtepi8_epi16(_mm512_castsi512_si256(v)),
                  _mm512_load_si512(x + 32 * q));
    dot1 = dpwssd(dot1, _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(v, 1)),
                  _mm512_load_si512(x + 32 * q + 32));
  }
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dot0, dot1)),
                         _mm512_set1_ps(job->x16_scales[g]), acc);
}

/* Row n against one token (w8a16 decode): even and odd groups in two
 * accumulators held in registers, returned as one vector whose lane sum is
 * the row's output before its scale. */
static inline __attribute__((always_inline)) __m512
w8_row(const bf16_job *job, int n, const int ahead) {
  const int K = job->K, groups = K / kInputGroup;
  const int8_t *row = job->codes + (size_t)n * K;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int g = 0;
  for (; g + 1 < groups; g += 2) {
    acc0 = w8_group(job, row, g, ahead, acc0);
    acc1 = w8_group(job, row, g + 1, ahead, acc1);
  }
  if (g < groups)
    acc0 = w8_group(job, row, g, ahead, acc0);
  return _mm512_add_ps(acc0, acc1);
}

/* The rows n0..n1-1, one at a time as one stream, the lane sums of 4 rows
 * taken at once (as int8_linear.c's w8a8 and w4a8 rows: a reduction and a
 * scalar product for each row cost the w8a8 rows of K = 2048 a tenth of
 * their speed from memory). */
static inline __attribute__((always_inline)) void
w8_token_at(const bf16_job *job, int n0, int n1, const int ahead) {
  int n = n0;
  for (; n + 4 <= n1; n += 4) {
    const __m512 a = w8_row(job, n, ahead), b = w8_row(job, n + 1, ahead);
    const __m512 c = w8_row(job, n + 2, ahead), d = w8_row(job, n + 3, ahead);
    _mm_storeu_ps(job->out + n, _mm_mul_ps(spark_hsum4_ps(a, b, c, d),
                                           _mm_loadu_ps(job->scales + n)));
  }
  for (; n < n1; ++n)
    job->out[n] = sum16(w8_row(job, n, ahead)) * job->scales[n];
}

/* The prefetch distance a constant in each loop. */
static void w8_token(const bf16_job *job, int n0, int n1) {
  if (job->ahead == kSparkPrefetchAvx512Amd)
    w8_token_at(job, n0, n1, kSparkPrefetchAvx512Amd);
  else
    w8_token_at(job, n0, n1, kSparkPrefetchAvx512);
}

/* w8a16 prefill: rows n..n+3 times tokens t0..t0+TB-1 (TB a constant after
 * inlining, at most kW8TileTokens), the products of w8_group: each 32 codes
 * widened to int16 once for the TB tokens, each token's int16 inputs loaded
 * once for the 4 rows, every group's exact int32 sums scaled by the token's
 * power of two for it. */
enum { kW8TileRows = 4, kW8TileTokens = 3 };

static inline __attribute__((always_inline)) void
w8_tile(const bf16_job *job, int n, int t0, const int TB) {
  const int K = job->K, groups = K / kInputGroup;
  const int8_t *w = job->codes + (size_t)n * K;
  __m512 acc[kW8TileRows][kW8TileTokens];
  for (int r = 0; r < kW8TileRows; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int g = 0; g < groups; ++g) {
    __m512i dot[kW8TileRows][kW8TileTokens];
    for (int r = 0; r < kW8TileRows; ++r)
      for (int t = 0; t < TB; ++t)
        dot[r][t] = _mm512_setzero_si512();
    for (int q = 0; q < kInputGroup; q += 32) {
      __m512i codes[kW8TileRows];
      for (int r = 0; r < kW8TileRows; ++r)
        codes[r] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((
            const __m256i *)(w + (size_t)r * K + (size_t)g * kInputGroup + q)));
      for (int t = 0; t < TB; ++t) {
        const __m512i x = _mm512_load_si512(job->x16 + (size_t)(t0 + t) * K +
                                            (size_t)g * kInputGroup + q);
        for (int r = 0; r < kW8TileRows; ++r)
          dot[r][t] = dpwssd(dot[r][t], codes[r], x);
      }
    }
    for (int t = 0; t < TB; ++t) {
      const __m512 scale =
          _mm512_set1_ps(job->x16_scales[(size_t)(t0 + t) * groups + g]);
      for (int r = 0; r < kW8TileRows; ++r)
        acc[r][t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][t]), scale, acc[r][t]);
    }
  }
  for (int r = 0; r < kW8TileRows; ++r)
    for (int t = 0; t < TB; ++t)
      job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
          sum16(acc[r][t]) * job->scales[n + r];
}

/* The rows n0..n1-1 (w8a16 with int16 inputs) times every token: one token
 * a row at a time (w8_token); more in tiles of 4 rows x up to 3 tokens, and
 * the rows past the last whole tile through w8_token, token by token. */
static void w8_rows(const bf16_job *job, int n0, int n1) {
  if (job->T == 1) {
    w8_token(job, n0, n1);
    return;
  }
  const int n4 = n0 + (n1 - n0) / kW8TileRows * kW8TileRows;
  for (int t0 = 0; t0 < job->T; t0 += kW8TileTokens) {
    const int tokens =
        job->T - t0 < kW8TileTokens ? job->T - t0 : kW8TileTokens;
    for (int n = n0; n < n4; n += kW8TileRows) {
      switch (tokens) {
      case 3:
        w8_tile(job, n, t0, 3);
        break;
      case 2:
        w8_tile(job, n, t0, 2);
        break;
      default:
        w8_tile(job, n, t0, 1);
        break;
      }
    }
  }
  for (int t = 0; t < job->T && n4 < n1; ++t) {
    bf16_job one = *job; /* the last rows, one token at a time */
    one.x16 = job->x16 + (size_t)t * job->K;
    one.x16_scales = job->x16_scales + (size_t)t * (job->K / kInputGroup);
    one.out = job->out + (size_t)t * job->out_stride;
    w8_token(&one, n4, n1);
  }
}

/* bf16 prefill: rows n..n+3 times tokens t0..t0+TB-1 (TB a constant after
 * inlining, at most kBF16TileTokens) on f32 FMAs. On an Intel Xeon with AMX
 * vdpbf16ps retires 1.6 a nanosecond (52 GMAC/s) and vfmadd 8.2 (131
 * GMAC/s), so each 32 weights are widened to f32 (a shift and an and: bf16
 * times bf16 is exact in f32) once for the TB tokens. */
enum { kBF16TileTokens = 6 };

static inline __attribute__((always_inline)) void
bf16_tile(const bf16_job *job, int n, int t0, const int TB) {
  const int K = job->K;
  const uint16_t *w = job->w + (size_t)n * K;
  const float *x = job->xf + (size_t)t0 * K;
  __m512 acc[4][kBF16TileTokens];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int k = 0; k < K; k += 32) {
    __m512 even[4], odd[4];
    for (int r = 0; r < 4; ++r)
      bf16_pairs(_mm512_loadu_si512(w + (size_t)r * K + k), &even[r], &odd[r]);
    for (int t = 0; t < TB; ++t) {
      const __m512 xe = _mm512_load_ps(x + (size_t)t * K + k);
      for (int r = 0; r < 4; ++r)
        acc[r][t] = _mm512_fmadd_ps(even[r], xe, acc[r][t]);
    }
    for (int t = 0; t < TB; ++t) {
      const __m512 xo = _mm512_load_ps(x + (size_t)t * K + k + 16);
      for (int r = 0; r < 4; ++r)
        acc[r][t] = _mm512_fmadd_ps(odd[r], xo, acc[r][t]);
    }
  }
  for (int t = 0; t < TB; ++t)
    _mm_storeu_ps(job->out + (size_t)(t0 + t) * job->out_stride + n,
                  spark_hsum4_ps(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
}

/* bf16 prefill on vdpbf16ps: rows n..n+3 times tokens t0..t0+TB-1 (TB a
 * constant after inlining, at most kBF16TileTokens), the weights and the
 * inputs rounded to bf16 (job->x) as they are, 32 products a vdpbf16ps. On
 * AMD Zen 5 a vdpbf16ps issues as often as a vfmadd (3.3 G/s each on one
 * core of the 2-core VM), so it does twice the products of the f32 tile,
 * with no widening. */
static inline __attribute__((always_inline)) void
bf16_dot_tile(const bf16_job *job, int n, int t0, const int TB) {
  const int K = job->K;
  const uint16_t *w = job->w + (size_t)n * K;
  const uint16_t *x = job->x + (size_t)t0 * K;
  __m512 acc[4][kBF16TileTokens];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TB; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int k = 0; k < K; k += 32) {
    __m512bh wv[4];
    for (int r = 0; r < 4; ++r)
      wv[r] = (__m512bh)_mm512_loadu_si512(w + (size_t)r * K + k);
    for (int t = 0; t < TB; ++t) {
      const __m512bh xv = (__m512bh)_mm512_load_si512(x + (size_t)t * K + k);
      for (int r = 0; r < 4; ++r)
        acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
    }
  }
  for (int t = 0; t < TB; ++t)
    _mm_storeu_ps(job->out + (size_t)(t0 + t) * job->out_stride + n,
                  spark_hsum4_ps(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
}

/* One tile of rows n..n+3 times `tokens` tokens from t0, on the job's
 * instructions. */
static inline __attribute__((always_inline)) void
bf16_any_tile(const bf16_job *job, int n, int t0, const int TB) {
  if (job->dot)
    bf16_dot_tile(job, n, t0, TB);
  else
    bf16_tile(job, n, t0, TB);
}

/* bf16 prefill of rows n0..n1-1: tiles of 4 rows, token tiles outermost so
 * that a tile's inputs stay in L1 while the task's rows come from L2; the
 * rows past the last whole tile one at a time. */
static void bf16_rows(const bf16_job *job, int n0, int n1) {
  const int K = job->K;
  const int n4 = n0 + (n1 - n0) / 4 * 4;
  for (int t0 = 0; t0 < job->T; t0 += kBF16TileTokens) {
    const int tokens =
        job->T - t0 < kBF16TileTokens ? job->T - t0 : kBF16TileTokens;
    for (int n = n0; n < n4; n += 4) {
      switch (tokens) {
      case 6:
        bf16_any_tile(job, n, t0, 6);
        break;
      case 5:
        bf16_any_tile(job, n, t0, 5);
        break;
      case 4:
        bf16_any_tile(job, n, t0, 4);
        break;
      case 3:
        bf16_any_tile(job, n, t0, 3);
        break;
      case 2:
        bf16_any_tile(job, n, t0, 2);
        break;
      default:
        bf16_any_tile(job, n, t0, 1);
        break;
      }
    }
  }
  for (int n = n4; n < n1; ++n)
    for (int t = 0; t < job->T; ++t) {
      __m512 acc = _mm512_setzero_ps();
      for (int k = 0; k < K; k += 32) {
        const __m512i wv = _mm512_loadu_si512(job->w + (size_t)n * K + k);
        if (job->dot) {
          acc = _mm512_dpbf16_ps(
              acc, (__m512bh)wv,
              (__m512bh)_mm512_load_si512(job->x + (size_t)t * K + k));
          continue;
        }
        __m512 even, odd;
        bf16_pairs(wv, &even, &odd);
        const float *x = job->xf + (size_t)t * K + k;
        acc = _mm512_fmadd_ps(even, _mm512_load_ps(x), acc);
        acc = _mm512_fmadd_ps(odd, _mm512_load_ps(x + 16), acc);
      }
      job->out[(size_t)t * job->out_stride + n] = sum16(acc);
    }
}

/* One token against the bf16 rows n0..n1-1 (bf16 decode): one row at a time,
 * as one stream, each line requested into L2 `ahead` bytes ahead, two
 * accumulator chains (even and odd 32-weight vectors). Rows read 4 at a time
 * without a prefetch streamed at 53-62% of the roofline on an Intel Xeon. */
static inline __attribute__((always_inline)) void
bf16_token(const bf16_job *job, int n0, int n1, const int ahead) {
  const int K = job->K;
  for (int n = n0; n < n1; ++n) {
    const uint16_t *row = job->w + (size_t)n * K;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    int k = 0;
    for (; k + 64 <= K; k += 64) {
      spark_prefetch_l2_ahead(row + k, ahead);
      spark_prefetch_l2_ahead(row + k + 32, ahead);
      acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(row + k),
                              (__m512bh)_mm512_load_si512(job->x + k));
      acc1 = _mm512_dpbf16_ps(acc1, (__m512bh)_mm512_loadu_si512(row + k + 32),
                              (__m512bh)_mm512_load_si512(job->x + k + 32));
    }
    if (k < K) /* K % 64 == 32 */
      acc0 = _mm512_dpbf16_ps(acc0, (__m512bh)_mm512_loadu_si512(row + k),
                              (__m512bh)_mm512_load_si512(job->x + k));
    job->out[n] = sum16(_mm512_add_ps(acc0, acc1));
  }
}

/* w8a16 with K % kInputGroup != 0 (the int16 inputs need whole groups):
 * rows n0..n1-1 times every token, the codes (exact in bf16) widened to bf16
 * once per 32-code step of 4 rows and fed to up to 4 tokens' vdpbf16ps. */
static void w8_widened_rows(const bf16_job *job, int n0, int n1) {
  const int K = job->K;
  for (int n = n0; n < n1; n += 4) {
    const int rows = n1 - n < 4 ? n1 - n : 4;
    for (int t0 = 0; t0 < job->T; t0 += 4) {
      const int tokens = job->T - t0 < 4 ? job->T - t0 : 4;
      __m512 acc[4][4];
      for (int r = 0; r < 4; ++r)
        for (int t = 0; t < 4; ++t)
          acc[r][t] = _mm512_setzero_ps();
      for (int k = 0; k < K; k += 32) {
        __m512bh wv[4], xv[4];
        for (int r = 0; r < rows; ++r)
          wv[r] = codes_to_bf16(job->codes + (size_t)(n + r) * K + k);
        for (int t = 0; t < tokens; ++t)
          xv[t] =
              (__m512bh)_mm512_loadu_si512(job->x + (size_t)(t0 + t) * K + k);
        for (int r = 0; r < rows; ++r)
          for (int t = 0; t < tokens; ++t)
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv[t]);
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t)
          job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
              sum16(acc[r][t]) * job->scales[n + r];
    }
  }
}

/* The first and one-past-last row of `task`. */
static inline void task_rows(const bf16_job *job, int task, int *n0, int *n1) {
  *n0 = task * job->rows_per_task;
  *n1 = *n0 + job->rows_per_task < job->N ? *n0 + job->rows_per_task : job->N;
}

static int bf16_rows_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const bf16_job *job = (const bf16_job *)closure;
  int n0, n1;
  task_rows(job, task, &n0, &n1);
  if (job->T == 1 && job->ahead == kSparkPrefetchAvx512Amd)
    bf16_token(job, n0, n1, kSparkPrefetchAvx512Amd); /* a constant */
  else if (job->T == 1)
    bf16_token(job, n0, n1, kSparkPrefetchAvx512);
  else
    bf16_rows(job, n0, n1);
  return 0;
}

static int w8_rows_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const bf16_job *job = (const bf16_job *)closure;
  int n0, n1;
  task_rows(job, task, &n0, &n1);
  if (job->x16)
    w8_rows(job, n0, n1);
  else
    w8_widened_rows(job, n0, n1);
  return 0;
}

/* Rounds the inputs (w8a16 with K % kInputGroup == 0: as int16), runs
 * `job` over blocks of about 64 rows (every thread streams its own rows),
 * frees. */
static int run_bf16(const halide_buffer_t *x, bf16_job *job) {
  uint16_t *xb = NULL;
  float *xf = NULL;
  spark_int16_inputs in = {NULL, NULL, NULL, NULL};
  if (job->codes && job->K % kInputGroup == 0) {
    if (spark_prepare_int16_avx512(x, kSparkBF16Inputs, 0, &in) != 0)
      return -1;
  } else if (!job->codes && job->T > 1 && !job->dot) {
    if (!(xf = to_bf16_pairs(x)))
      return -1;
  } else if (!(xb = to_bf16(x))) {
    return -1;
  }
  job->x = xb;
  job->xf = xf;
  job->x16 = in.values;
  job->x16_scales = in.scales;
  job->rows_per_task = 64;
  int rc = halide_do_par_for(
      NULL, job->codes ? w8_rows_task : bf16_rows_task, 0,
      (job->N + job->rows_per_task - 1) / job->rows_per_task, (uint8_t *)job);
  spark_scratch_put(xb);
  spark_scratch_put(xf);
  spark_free_int16(&in);
  return rc;
}

/* Whether bf16 prefill runs on vdpbf16ps (bf16_dot_tile) on this CPU: on
 * AMD's cores, where it issues as often as an FMA; not on Intel's (an Intel
 * Xeon with AMX retired 1.6 vdpbf16ps a nanosecond against 8.2 vfmadd). */
static int bf16_prefill_on_dot_products(void) {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
}

/* spark_bf16_linear with the prefill tiles chosen: vdpbf16ps (dot_products
 * 1) or f32 FMAs on widened weights (0); both add the same exact products
 * of bf16 values, in another order. The tests run both. */
int spark_bf16_linear_tiles(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *out, int dot_products) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % SPARK_MK_BF16_DEPTH != 0 || w->dim[0].extent != K ||
      out->dim[0].extent != N || out->dim[1].extent != T)
    return -1;
  bf16_job job = {.w = (const uint16_t *)w->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_avx512_rows(),
                  .dot = dot_products};
  return run_bf16(x, &job);
}

int spark_bf16_linear(halide_buffer_t *x, halide_buffer_t *w,
                      halide_buffer_t *out) {
  return spark_bf16_linear_tiles(x, w, out, bf16_prefill_on_dot_products());
}

/* w8a16 with bf16 activations: x f32 [K, T], w int8 codes [K, N], scales f32
 * [N], out f32 [N, T]; out = scale[n] * sum_k code * bf16(x). With
 * K % 128 == 0, bf16(x) as int16 per group of 128 on vpdpwssd (w8_rows);
 * otherwise the codes (exact in bf16) widened to bf16 once per 32-code step
 * (vpmovsxbd, vcvtdq2ps, vcvtne2ps2bf16), shared by up to 4 tokens. */
int spark_bf16_linear_w8a16(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_BF16_DEPTH, 1))
    return -1;
  bf16_job job = {.codes = (const int8_t *)w->host,
                  .scales = (const float *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .ahead = spark_prefetch_avx512_rows()};
  return run_bf16(x, &job);
}
