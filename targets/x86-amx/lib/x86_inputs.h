/* x86_inputs.h - input preparation the x86 16-bit-activation kernels share
 * (w4_linear.c on AVX-512, avx2_linear.c on AVX2): each input rounded the way
 * the Halide kernel rounds it (the build's --activations type), and for
 * 4-bit groups reordered into the order of the packed nibbles, with each
 * group's sum. Needs F16C. */
#ifndef SPARK_X86_INPUTS_H
#define SPARK_X86_INPUTS_H

#include "HalideRuntime.h"
#include "microkernel_support.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>

/* How the inputs are rounded before the product. */
enum { kSparkF32Inputs, kSparkBF16Inputs, kSparkF16Inputs };

static inline float spark_round_input(float v, int rounding) {
  if (rounding == kSparkBF16Inputs)
    return spark_round_bf16(v);
  if (rounding == kSparkF16Inputs)
    return _cvtsh_ss(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
  return v;
}

/* The T rows of x (f32 [K, T], any row stride), rounded, into *inputs
 * ([T][K], 64-byte aligned). With group > 0 (K % group == 0, group <= 128),
 * each group holds its even-index inputs, then its odd-index ones (the low
 * and high nibbles of group / 2 weight bytes), and *sums ([T][K / group])
 * receives each group's sum; with group == 0, sums is not touched. Returns 0,
 * or -1 with nothing allocated. Free both with free(). */
static inline int spark_prepare_inputs(const halide_buffer_t *x, int rounding,
                                       int group, float **inputs,
                                       float **sums) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const int groups = group > 0 ? K / group : 0;
  *inputs = NULL;
  if (group > 0) {
    *sums = (float *)malloc(sizeof(float) * (size_t)(T > 0 ? T : 1) *
                            (groups > 0 ? groups : 1));
    if (!*sums)
      return -1;
  }
  if (posix_memalign((void **)inputs, 64,
                     sizeof(float) * (size_t)(T > 0 ? T : 1) * K) != 0) {
    if (group > 0)
      free(*sums);
    *inputs = NULL;
    return -1;
  }
  for (int t = 0; t < T; ++t) {
    const float *from = (const float *)x->host + (size_t)t * xs;
    float *to = *inputs + (size_t)t * K;
    if (group <= 0) {
      for (int k = 0; k < K; ++k)
        to[k] = spark_round_input(from[k], rounding);
      continue;
    }
    for (int g = 0; g < groups; ++g) {
      float sum = 0.0f;
      for (int i = 0; i < group; ++i) {
        const float v = spark_round_input(from[g * group + i], rounding);
        to[g * group + (i % 2) * (group / 2) + i / 2] = v;
        sum += v;
      }
      (*sums)[(size_t)t * groups + g] = sum;
    }
  }
  return 0;
}

#endif
