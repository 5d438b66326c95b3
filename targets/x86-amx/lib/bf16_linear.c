/* bf16_linear.c - AVX-512 BF16 dot-product kernels for bf16 weight matrices.
 *
 * Same interface as the Halide linear kernels (x f32 [K, T], w bf16 [K, N],
 * out f32 [N, T]); used by the avx512bf16 variant for bf16 builds. The
 * activations are rounded to bf16 pairs once per call (vcvtne2ps2bf16) and
 * every vdpbf16ps consumes 32 weights straight from the pack. Each task
 * takes a block of rows; 4 rows share every activation load (decode) or
 * 4 rows x 4 tokens make 16 accumulators (prefill). Needs K % 32 == 0.
 * Compiled with -mavx512f -mavx512bw -mavx512bf16; entered only when CPUID
 * reports AVX512_BF16. */
#include "HalideRuntime.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bf16_job {
  const uint16_t *w;   /* [N][K] */
  const uint16_t *x;   /* [T][K] bf16 */
  float *out;          /* [T][out_stride] */
  int K, N, T, out_stride, rows_per_task;
} bf16_job;

static float sum16(__m512 v) { return _mm512_reduce_add_ps(v); }

static int bf16_rows_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  const bf16_job *job = (const bf16_job *)closure;
  const int K = job->K;
  int n0 = task * job->rows_per_task;
  int n1 = n0 + job->rows_per_task < job->N ? n0 + job->rows_per_task : job->N;
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
          wv[r] = (__m512bh)_mm512_loadu_si512(job->w + (size_t)(n + r) * K + k);
        for (int t = 0; t < tokens; ++t)
          xv[t] = (__m512bh)_mm512_loadu_si512(job->x + (size_t)(t0 + t) * K + k);
        for (int r = 0; r < rows; ++r)
          for (int t = 0; t < tokens; ++t)
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv[t]);
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t)
          job->out[(size_t)(t0 + t) * job->out_stride + n + r] = sum16(acc[r][t]);
    }
  }
  return 0;
}

int spark_bf16_linear(halide_buffer_t *x, halide_buffer_t *w,
                      halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % 32 != 0 || w->dim[0].extent != K || out->dim[0].extent != N ||
      out->dim[1].extent != T)
    return -1;
  const int xs = x->dim[1].stride;
  const float *xf = (const float *)x->host;
  uint16_t *xb = NULL;
  if (posix_memalign((void **)&xb, 64, (size_t)T * K * 2) != 0)
    return -1;
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; k += 32) {
      __m512 lo = _mm512_loadu_ps(xf + (size_t)t * xs + k);
      __m512 hi = _mm512_loadu_ps(xf + (size_t)t * xs + k + 16);
      _mm512_storeu_si512(xb + (size_t)t * K + k,
                          (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  /* About 64 rows per task keeps every thread streaming its own rows. */
  const int rows_per_task = 64;
  bf16_job job = {(const uint16_t *)w->host, xb, (float *)out->host, K, N, T,
                  out->dim[1].stride, rows_per_task};
  int rc = halide_do_par_for(NULL, bf16_rows_task, 0,
                             (N + rows_per_task - 1) / rows_per_task,
                             (uint8_t *)&job);
  free(xb);
  return rc;
}
