/* X86InputsAvx2Check.c - the AVX2 int16 input preparation
 * (x86_inputs_avx2.h) against the scalar one (x86_inputs.h), value for value,
 * for X86KernelsTest.cpp. Compiled with -mavx2 -mfma -mf16c (avx2_linear.c's
 * flags); called only on CPUs with them. */
#include "x86_inputs_avx2.h"

#include <string.h>

static float next_random(unsigned *state) { /* uniform in [-1, 1) */
  *state = *state * 1103515245u + 12345u;
  return (float)((*state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* Random rows of K = 2048 and 6656 values over nine decades of magnitude,
 * with outliers, zero groups and subnormals, in groups of 16, 32, 64, 128
 * (and 48: the scalar fallback), rows of T = 1-3 with and without padding
 * between them; returns how many
 * preparations differ in any byte from the scalar ones. */
int spark_test_avx2_inputs_mismatches(unsigned seed, int trials) {
  static const int kGroups[] = {128, 64, 32, 16, 48};
  int mismatches = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int G = kGroups[trial % 5];
    const int K = trial % 3 == 0 ? 6656 - 6656 % (3 * G) : 2048 - 2048 % G;
    const int T = 1 + trial % 3, stride = K + 16 * (trial % 2);
    const int groups = K / G;
    const float magnitude = powf(10.0f, (float)(trial % 9) - 4.0f);
    float *x = (float *)malloc(sizeof(float) * (size_t)stride * T);
    if (!x)
      return -1;
    for (int i = 0; i < stride * T; ++i) {
      x[i] = next_random(&seed) * magnitude * (i % 37 == 0 ? 100.0f : 1.0f);
      if (trial % 7 == 0 && (i / G) % 3 == 0)
        x[i] = 0.0f;
      if (trial % 11 == 0 && i % 5 == 0)
        x[i] = next_random(&seed) * 1e-38f;
    }
    halide_dimension_t dims[2] = {{0, K, 1, 0}, {0, T, stride, 0}};
    halide_buffer_t xb;
    memset(&xb, 0, sizeof(xb));
    xb.host = (uint8_t *)x;
    xb.dimensions = 2;
    xb.dim = dims;
    /* f16 only where the values stay finite in f16 */
    const int roundings = magnitude * 100.0f > 60000.0f ? 1 : 2;
    for (int r = 0; r < roundings; ++r)
      for (int four_bit = 0; four_bit <= 1; ++four_bit) {
        const int rounding = r == 0 ? kSparkBF16Inputs : kSparkF16Inputs;
        spark_int16_inputs scalar, vector;
        if (spark_prepare_int16(&xb, rounding, G, four_bit, &scalar) ||
            spark_prepare_int16_avx2(&xb, rounding, G, four_bit, &vector)) {
          ++mismatches;
          continue;
        }
        const size_t cells = (size_t)T * groups;
        mismatches +=
            memcmp(scalar.scales, vector.scales, cells * sizeof(float)) != 0 ||
            (four_bit
                 ? memcmp(scalar.sums, vector.sums, cells * sizeof(float)) !=
                           0 ||
                       memcmp(scalar.bytes, vector.bytes, cells * 2 * G) != 0
                 : memcmp(scalar.values, vector.values,
                          cells * G * sizeof(int16_t)) != 0);
        spark_free_int16(&scalar);
        spark_free_int16(&vector);
      }
    free(x);
  }
  return mismatches;
}
