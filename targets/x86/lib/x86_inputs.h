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
#include <math.h>
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
 * or -1 with nothing allocated. Free both with spark_scratch_put(). */
static inline int spark_prepare_inputs(const halide_buffer_t *x, int rounding,
                                       int group, float **inputs,
                                       float **sums) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const int groups = group > 0 ? K / group : 0;
  *inputs = NULL;
  if (group > 0) {
    *sums = (float *)spark_scratch_alloc(
        sizeof(float) * (size_t)(T > 0 ? T : 1) * (groups > 0 ? groups : 1));
    if (!*sums)
      return -1;
  }
  if (spark_scratch_get((void **)inputs,
                        sizeof(float) * (size_t)(T > 0 ? T : 1) * K) != 0) {
    if (group > 0)
      spark_scratch_put(*sums);
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

/* 16-bit inputs as int16 (spark_prepare_int16). */
typedef struct spark_int16_inputs {
  int16_t *values; /* [T][K] (4-bit: in the order of spark_prepare_inputs) */
  float *scales;   /* [T][K / G]: each group's power of two */
  float *sums;     /* 4-bit: [T][K / G] what each group's values stand for */
  uint8_t *bytes;  /* 4-bit: [T][K / G][2 G]: a group's low bytes, then its
                      high bytes */
} spark_int16_inputs;

static inline void spark_free_int16(spark_int16_inputs *in) {
  spark_scratch_put(in->values);
  spark_scratch_put(in->scales);
  spark_scratch_put(in->sums);
  spark_scratch_put(in->bytes);
  in->values = NULL;
  in->scales = in->sums = NULL;
  in->bytes = NULL;
}

/* The buffers of the vector preparations (x86_inputs_avx2.h,
 * x86_inputs_avx512.h) for `cells` groups of G: scales, and for 4-bit
 * weights sums and byte planes, else values. Returns 0, or -1 with nothing
 * allocated. */
static inline int spark_alloc_int16(spark_int16_inputs *in, size_t cells,
                                    int G, int four_bit) {
  in->values = NULL;
  in->scales = in->sums = NULL;
  in->bytes = NULL;
  if (spark_scratch_get((void **)&in->scales, sizeof(float) * cells) != 0 ||
      (four_bit &&
       (spark_scratch_get((void **)&in->sums, sizeof(float) * cells) != 0 ||
        spark_scratch_get((void **)&in->bytes, cells * 2 * G) != 0)) ||
      (!four_bit && spark_scratch_get((void **)&in->values,
                                      cells * G * sizeof(int16_t)) != 0)) {
    spark_free_int16(in);
    return -1;
  }
  return 0;
}

/* The T rows of x (f32 [K, T], K % G == 0) rounded (`rounding`), for 4-bit
 * weights (`four_bit`) reordered per group of G into the nibbles' order,
 * then as int16 per group (spark_int16_group); for 4-bit weights also each
 * group's sum of the values the int16 stand for (so that a zero point comes
 * off exactly) and the values split into byte planes. The buffers are 64-byte
 * aligned. Returns 0, or -1 with nothing allocated. */
static inline int spark_prepare_int16(const halide_buffer_t *x, int rounding,
                                      int G, int four_bit,
                                      spark_int16_inputs *in) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, groups = K / G;
  const size_t tokens = (size_t)(T > 0 ? T : 1),
               cells = tokens * (groups > 0 ? groups : 1);
  float *inputs, *sums = NULL;
  in->values = NULL;
  in->scales = in->sums = NULL;
  in->bytes = NULL;
  if (spark_prepare_inputs(x, rounding, four_bit ? G : 0, &inputs, &sums) != 0)
    return -1;
  in->sums = sums;
  if (spark_scratch_get((void **)&in->values, sizeof(int16_t) * tokens * K) !=
          0 ||
      spark_scratch_get((void **)&in->scales, sizeof(float) * cells) != 0 ||
      (four_bit &&
       spark_scratch_get((void **)&in->bytes, tokens * K * 2) != 0)) {
    spark_scratch_put(inputs);
    spark_free_int16(in);
    return -1;
  }
  for (size_t c = 0; c < (size_t)T * groups; ++c) {
    int16_t *q = in->values + c * G;
    int32_t total;
    in->scales[c] = spark_int16_group(inputs + c * G, G, q, &total);
    if (!four_bit)
      continue;
    in->sums[c] = (float)total * in->scales[c];
    for (int i = 0; i < G; ++i) {
      in->bytes[c * 2 * G + i] = (uint8_t)((uint16_t)q[i] & 0xff);
      in->bytes[c * 2 * G + G + i] = (uint8_t)((uint16_t)q[i] >> 8);
    }
  }
  spark_scratch_put(inputs);
  return 0;
}

#endif
