/* w4_linear.c - AVX-512 kernel for 4-bit weights with f32 activations
 * (w4a16 builds with --activations=f32; with bf16 or f16 activations they
 * take int8_linear.c's kernels).
 *
 * Same interface as the Halide kernel:
 *   (x f32 [K, T], w u8 [K/2, N] two 4-bit codes a byte, low nibble first,
 *    scales f16 [K/128, N], zeros f16 [K/128, N], out f32 [N, T])
 * with value = (code - zero) * scale per group of 128 along K. Each call
 * reorders every token's inputs per group into the even-index values, then
 * the odd-index ones (the low and high nibbles of the weight bytes), and
 * sums each group. A group of one row is one 64-byte load; its nibbles are
 * widened to f32 16 at a time and multiplied into a vector of partial
 * sums, scaled by the group's scale with one FMA; the zero point comes off
 * as scale * zero * (the group's input sum). 4 rows x up to 4 tokens at a
 * time; blocks of rows are the parallel tasks.
 * Needs K % 128 == 0 and N % 4 == 0. Compiled with -mavx512f -mavx512bw
 * -mf16c; used by the avx512vnni variant (every AVX512_VNNI CPU). */
#include "HalideRuntime.h"
#include "microkernel_support.h"
#include "x86_inputs.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>

enum { kRowsPerTask = 64, kGroup = SPARK_MK_GROUP };

typedef struct w4_job {
  const uint8_t *w;       /* [N][w_stride], K/2 codes a row */
  const uint16_t *scales; /* f16 [N][s_stride], K/128 a row */
  const uint16_t *zeros;  /* f16 [N][s_stride], K/128 a row */
  const float *x;         /* [T][K], per group: 64 even, then 64 odd */
  const float *sums;      /* [T][K/128] */
  float *out;             /* [T][out_stride] */
  int K, N, T, out_stride;
  int w_stride, s_stride; /* dense or grouped rows (spark_grouped_rows_fit) */
} w4_job;

#define SPARK_BLOCK static inline __attribute__((always_inline)) void

/* 16 codes from 16 bytes' low (or high) nibbles, as f32. */
static inline __m512 nibbles(__m128i bytes, int high) {
  __m512i wide = _mm512_cvtepu8_epi32(bytes);
  if (high)
    wide = _mm512_srli_epi32(wide, 4);
  return _mm512_cvtepi32_ps(_mm512_and_si512(wide, _mm512_set1_epi32(15)));
}

/* Rows n..n+3 times tokens t0..t0+TT-1 (TT constant after inlining). */
SPARK_BLOCK w4_block(const w4_job *job, int n, int t0, const int TT) {
  const int K = job->K, groups = K / kGroup;
  __m512 acc[4][4];
  float offset[4][4];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t) {
      acc[r][t] = _mm512_setzero_ps();
      offset[r][t] = 0.0f;
    }
  for (int g = 0; g < groups; ++g) {
    __m512 dot[4][4];
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < TT; ++t)
        dot[r][t] = _mm512_setzero_ps();
    for (int q = 0; q < 4; ++q) { /* 16 bytes: 16 even + 16 odd codes */
      __m512 even[4], odd[4];
      for (int r = 0; r < 4; ++r) {
        __m128i bytes = _mm_loadu_si128(
            (const __m128i *)(job->w + (size_t)(n + r) * job->w_stride +
                              (size_t)g * (kGroup / 2) + 16 * q));
        even[r] = nibbles(bytes, 0);
        odd[r] = nibbles(bytes, 1);
      }
      for (int t = 0; t < TT; ++t) {
        const float *x = job->x + (size_t)(t0 + t) * K + (size_t)g * kGroup;
        __m512 xe = _mm512_loadu_ps(x + 16 * q);
        __m512 xo = _mm512_loadu_ps(x + kGroup / 2 + 16 * q);
        for (int r = 0; r < 4; ++r)
          dot[r][t] = _mm512_fmadd_ps(odd[r], xo,
                                      _mm512_fmadd_ps(even[r], xe, dot[r][t]));
      }
    }
    for (int r = 0; r < 4; ++r) {
      const size_t at = (size_t)(n + r) * job->s_stride + g;
      const float scale = _cvtsh_ss(job->scales[at]);
      const float zero = _cvtsh_ss(job->zeros[at]);
      for (int t = 0; t < TT; ++t) {
        acc[r][t] =
            _mm512_fmadd_ps(dot[r][t], _mm512_set1_ps(scale), acc[r][t]);
        offset[r][t] += scale * zero * job->sums[(size_t)(t0 + t) * groups + g];
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
          _mm512_reduce_add_ps(acc[r][t]) - offset[r][t];
}

static int w4_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const w4_job *job = (const w4_job *)closure;
  const int n0 = task * kRowsPerTask;
  const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;
  for (int n = n0; n < n1; n += 4) {
    int t0 = 0;
    for (; t0 + 4 <= job->T; t0 += 4)
      w4_block(job, n, t0, 4);
    for (; t0 < job->T; ++t0)
      w4_block(job, n, t0, 1);
  }
  return 0;
}

int spark_avx512_linear_w4a16(halide_buffer_t *x, halide_buffer_t *w,
                              halide_buffer_t *scales, halide_buffer_t *zeros,
                              halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_grouped_rows_fit(x, w, scales, zeros, out, kGroup, SPARK_MK_ROWS))
    return -1;
  float *reordered, *sums;
  if (spark_prepare_inputs(x, kSparkF32Inputs, kGroup, &reordered, &sums) != 0)
    return -1;
  w4_job job = {(const uint8_t *)w->host,
                (const uint16_t *)scales->host,
                (const uint16_t *)zeros->host,
                reordered,
                sums,
                (float *)out->host,
                K,
                N,
                T,
                out->dim[1].stride,
                w->dim[1].stride,
                scales->dim[1].stride};
  int rc = halide_do_par_for(
      NULL, w4_task, 0, (N + kRowsPerTask - 1) / kRowsPerTask, (uint8_t *)&job);
  spark_scratch_put(reordered);
  spark_scratch_put(sums);
  return rc;
}
