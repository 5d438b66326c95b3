/* vrmpy_linear.c - HVX int8 dot-product kernel for w8a8 builds on Hexagon.
 *
 * Same interface as the Halide linear kernel with int8 inputs:
 *   (x f32 [K, T], w s8 [K, N], scales f32 [N], out f32 [N, T])
 * Each call quantizes every input row to symmetric int8 codes with its own
 * scale, max |x| / 127 (quantize_row.h, the rule of the Halide kernels).
 * Every vrmpy multiplies 128 signed byte pairs (weights straight from the
 * pack x input codes) and adds each group of 4 products into one of 32
 * int32 lanes; the lanes are summed once per row and token, and scaled by the
 * row's and the token's scales. 2 rows x 2 tokens are accumulated at a time.
 * Needs K % 128 == 0. Compiled with -mhvx -mhvx-length=128B (v66). */
#include "HalideRuntime.h"
#include "quantize_row.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
                            halide_buffer_t *scales, halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % 128 != 0 || w->dim[0].extent != K || w->dim[1].stride != K ||
      out->dim[0].extent != N || out->dim[1].extent != T)
    return -1;
  const int xs = x->dim[1].stride, os = out->dim[1].stride;
  int8_t *codes = (int8_t *)malloc((size_t)T * K);
  float *token_scales = (float *)malloc(sizeof(float) * (size_t)T);
  if (!codes || !token_scales) {
    free(codes);
    free(token_scales);
    return -1;
  }
  for (int t = 0; t < T; ++t)
    token_scales[t] = spark_quantize_row((const float *)x->host + (size_t)t * xs,
                                         K, codes + (size_t)t * K);
  const int8_t *wq = (const int8_t *)w->host;
  const float *row_scales = (const float *)scales->host;
  float *o = (float *)out->host;
  for (int n = 0; n < N; n += 2) {
    const int rows = N - n < 2 ? N - n : 2;
    for (int t0 = 0; t0 < T; t0 += 2) {
      const int tokens = T - t0 < 2 ? T - t0 : 2;
      hvx_vector acc[2][2];
      memset(acc, 0, sizeof(acc));
      for (int k = 0; k < K; k += 128) {
        hvx_vector wv[2], xv[2];
        for (int r = 0; r < rows; ++r)
          wv[r] = load(wq + (size_t)(n + r) * K + k);
        for (int t = 0; t < tokens; ++t)
          xv[t] = load(codes + (size_t)(t0 + t) * K + k);
        for (int r = 0; r < rows; ++r)
          for (int t = 0; t < tokens; ++t)
            acc[r][t] = __builtin_HEXAGON_V6_vrmpybv_acc_128B(acc[r][t], wv[r], xv[t]);
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t)
          o[(size_t)(t0 + t) * os + n + r] = (float)lanes_sum(acc[r][t]) *
                                             row_scales[n + r] *
                                             token_scales[t0 + t];
    }
  }
  free(codes);
  free(token_scales);
  return 0;
}
