/* x86_inputs_check.h - what X86InputsCheck.c (AVX-512) and
 * X86InputsAvx2Check.c (AVX2) share: the random rows they prepare, the
 * buffer that wraps them, and the byte-for-byte comparison of two int16
 * preparations. */
#ifndef SPARK_TEST_X86_INPUTS_CHECK_H
#define SPARK_TEST_X86_INPUTS_CHECK_H

#include "x86_inputs.h"

#include <math.h>
#include <string.h>

static inline float spark_test_random(unsigned *state) { /* in [-1, 1) */
  *state = *state * 1103515245u + 12345u;
  return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* n values of trial `trial` in groups of G: uniform at 10^(trial % 9 - 4),
 * every 37th a 100x outlier, every third group zero in one trial of 7,
 * every fifth value subnormal in one trial of 11. */
static inline void spark_test_fill(float *x, int n, int G, int trial,
                                   unsigned *seed) {
  const float magnitude = powf(10.0f, (float)(trial % 9) - 4.0f);
  for (int i = 0; i < n; ++i) {
    x[i] = spark_test_random(seed) * magnitude * (i % 37 == 0 ? 100.0f : 1.0f);
    if (trial % 7 == 0 && (i / G) % 3 == 0)
      x[i] = 0.0f;
    if (trial % 11 == 0 && i % 5 == 0)
      x[i] = spark_test_random(seed) * 1e-38f;
  }
}

/* f16 rounding only where trial's values stay finite in f16. */
static inline int spark_test_roundings(int trial) {
  return powf(10.0f, (float)(trial % 9) - 4.0f) * 100.0f > 60000.0f ? 1 : 2;
}

/* x as the [K, T] halide buffer of stride `stride` between tokens. */
static inline void spark_test_buffer(halide_buffer_t *b,
                                     halide_dimension_t dims[2], float *x,
                                     int K, int T, int stride) {
  dims[0] = (halide_dimension_t){0, K, 1, 0};
  dims[1] = (halide_dimension_t){0, T, stride, 0};
  memset(b, 0, sizeof(*b));
  b->host = (uint8_t *)x;
  b->dimensions = 2;
  b->dim = dims;
}

/* Whether two int16 preparations of `cells` groups of G differ in any byte
 * the kernels read (4-bit: scales, sums, byte planes; 8-bit: scales,
 * values). */
static inline int spark_test_int16_differ(const spark_int16_inputs *a,
                                          const spark_int16_inputs *b,
                                          size_t cells, int G, int four_bit) {
  if (memcmp(a->scales, b->scales, cells * sizeof(float)) != 0)
    return 1;
  if (four_bit)
    return memcmp(a->sums, b->sums, cells * sizeof(float)) != 0 ||
           memcmp(a->bytes, b->bytes, cells * 2 * G) != 0;
  return memcmp(a->values, b->values, cells * G * sizeof(int16_t)) != 0;
}

#endif
