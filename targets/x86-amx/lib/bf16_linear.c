/* bf16_linear.c - AVX-512 BF16 dot-product kernels for bf16 weight matrices
 * and, with bf16 activations, int8 ones (w8a16).
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
#include "microkernel_support.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bf16_job {
  const uint16_t *w;   /* [N][K] bf16 weights, or NULL and: */
  const int8_t *codes; /* [N][K] int8 weights (w8a16) */
  const float *scales; /* [N]: their row scales */
  const uint16_t *x;   /* [T][K] bf16 */
  float *out;          /* [T][out_stride] */
  int K, N, T, out_stride, rows_per_task;
} bf16_job;

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
  if (posix_memalign((void **)&xb, 64, (size_t)(T > 0 ? T : 1) * K * 2) != 0)
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

/* The rows of `task`; `int8` (constant after inlining): the weights are
 * codes. */
static inline __attribute__((always_inline)) int
rows_task(int task, const bf16_job *job, const int int8) {
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
          wv[r] = int8 ? codes_to_bf16(job->codes + (size_t)(n + r) * K + k)
                       : (__m512bh)_mm512_loadu_si512(job->w +
                                                      (size_t)(n + r) * K + k);
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
              sum16(acc[r][t]) * (int8 ? job->scales[n + r] : 1.0f);
    }
  }
  return 0;
}

static int bf16_rows_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  return rows_task(task, (const bf16_job *)closure, 0);
}

static int w8_rows_task(void *user_context, int task, uint8_t *closure) {
  (void)user_context;
  return rows_task(task, (const bf16_job *)closure, 1);
}

/* Rounds the inputs, runs `job` over blocks of about 64 rows (every thread
 * streams its own rows), frees. */
static int run_bf16(const halide_buffer_t *x, bf16_job *job) {
  uint16_t *xb = to_bf16(x);
  if (!xb)
    return -1;
  job->x = xb;
  job->rows_per_task = 64;
  int rc = halide_do_par_for(
      NULL, job->codes ? w8_rows_task : bf16_rows_task, 0,
      (job->N + job->rows_per_task - 1) / job->rows_per_task, (uint8_t *)job);
  free(xb);
  return rc;
}

int spark_bf16_linear(halide_buffer_t *x, halide_buffer_t *w,
                      halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % 32 != 0 || w->dim[0].extent != K || out->dim[0].extent != N ||
      out->dim[1].extent != T)
    return -1;
  bf16_job job = {(const uint16_t *)w->host, NULL, NULL, NULL,
                  (float *)out->host,        K,    N,    T,
                  out->dim[1].stride,        0};
  return run_bf16(x, &job);
}

/* w8a16 with bf16 activations: x f32 [K, T], w int8 codes [K, N], scales f32
 * [N], out f32 [N, T]; out = scale[n] * sum_k code * bf16(x). Codes up to
 * 127 are exact in bf16: each 32-code step widens the block's rows to bf16
 * once (vpmovsxbd, vcvtdq2ps, vcvtne2ps2bf16), shared by up to 4 tokens. */
int spark_bf16_linear_w8a16(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, 32, 1))
    return -1;
  bf16_job job = {NULL,
                  (const int8_t *)w->host,
                  (const float *)scales->host,
                  NULL,
                  (float *)out->host,
                  K,
                  N,
                  T,
                  out->dim[1].stride,
                  0};
  return run_bf16(x, &job);
}
