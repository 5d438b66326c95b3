/* vrmpy_linear.c - HVX int8 dot-product kernel for w8a8 builds on Hexagon.
 *
 * Same interface as the Halide linear kernel with int8 inputs:
 *   (x f32 [K, T], w s8 [K, N], scales f32 [N], out f32 [N, T])
 * Each call quantizes every input row to symmetric int8 codes with its own
 * scale, max |x| / 127 (microkernel_support.h, the rule of the Halide kernels).
 * Every vrmpy multiplies 128 signed byte pairs (weights straight from the
 * pack x input codes) and adds each group of 4 products into one of 32
 * int32 lanes; the lanes are summed once per row and token, and scaled by the
 * row's and the token's scales. Prefill accumulates 2 rows x 2 tokens at a
 * time in registers; decode (one token) streams 4 weight rows per step.
 * Needs K % 128 == 0. Compiled with -mhvx -mhvx-length=128B (v66). */
#include "HalideRuntime.h"
#include "microkernel_support.h"

#include <stdint.h>
#include <stdlib.h>

typedef int32_t hvx_vector __attribute__((vector_size(128), aligned(128)));
typedef int32_t hvx_unaligned __attribute__((vector_size(128), aligned(1)));

static inline hvx_vector load(const int8_t *p) {
  return *(const hvx_unaligned *)p;
}

static inline int32_t lanes_sum(hvx_vector v) {
  int32_t lanes[32] __attribute__((aligned(128)));
  *(hvx_vector *)lanes = v;
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i)
    sum += lanes[i];
  return sum;
}

int spark_vrmpy_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, float input_scale,
                            halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_VRMPY_DEPTH, 1))
    return -1;
  const int os = out->dim[1].stride;
  int8_t *codes;
  float *token_scales;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  const int8_t *wq = (const int8_t *)w->host;
  const float *row_scales = (const float *)scales->host;
  float *o = (float *)out->host;
  if (T == 1) {
    /* Decode: four weight rows per step against the one token. */
    for (int n = 0; n < N; n += 4) {
      const int8_t *w0 = wq + (size_t)n * K;
      const int8_t *w1 = n + 1 < N ? w0 + K : w0;
      const int8_t *w2 = n + 2 < N ? w0 + 2 * (size_t)K : w0;
      const int8_t *w3 = n + 3 < N ? w0 + 3 * (size_t)K : w0;
      hvx_vector a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
      for (int k = 0; k < K; k += 128) {
        hvx_vector xv = load(codes + k);
        a0 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a0, load(w0 + k), xv);
        a1 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a1, load(w1 + k), xv);
        a2 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a2, load(w2 + k), xv);
        a3 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a3, load(w3 + k), xv);
      }
      const hvx_vector sums[4] = {a0, a1, a2, a3};
      for (int r = 0; r < 4 && n + r < N; ++r)
        o[n + r] = (float)lanes_sum(sums[r]) * row_scales[n + r] * token_scales[0];
    }
  }
  for (int t0 = 0; T > 1 && t0 < T; t0 += 2) {
    const int tokens = T - t0 < 2 ? T - t0 : 2;
    const int8_t *x0 = codes + (size_t)t0 * K;
    const int8_t *x1 = tokens == 2 ? x0 + K : x0;
    for (int n = 0; n < N; n += 2) {
      /* Rows n and n + 1 (the last row twice when N is odd) against tokens
       * t0 and t0 + 1 (t0 twice for the last odd token): four independent
       * accumulators in registers, two weight and two input loads per step. */
      const int8_t *w0 = wq + (size_t)n * K;
      const int8_t *w1 = n + 1 < N ? w0 + K : w0;
      hvx_vector a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0};
      for (int k = 0; k < K; k += 128) {
        hvx_vector wv0 = load(w0 + k), wv1 = load(w1 + k);
        hvx_vector xv0 = load(x0 + k), xv1 = load(x1 + k);
        a00 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a00, wv0, xv0);
        a01 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a01, wv0, xv1);
        a10 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a10, wv1, xv0);
        a11 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a11, wv1, xv1);
      }
      const hvx_vector sums[2][2] = {{a00, a01}, {a10, a11}};
      for (int r = 0; r < 2 && n + r < N; ++r)
        for (int t = 0; t < tokens; ++t)
          o[(size_t)(t0 + t) * os + n + r] = (float)lanes_sum(sums[r][t]) *
                                             row_scales[n + r] *
                                             token_scales[t0 + t];
    }
  }
  free(codes);
  free(token_scales);
  return 0;
}
