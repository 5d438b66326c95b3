/* X86InputsAvx2Check.c - the AVX2 int16 input preparation
 * (x86_inputs_avx2.h) against the scalar one (x86_inputs.h), value for value,
 * for X86KernelsTest.cpp. Compiled with -mavx2 -mfma -mf16c (avx2_linear.c's
 * flags); called only on CPUs with them. */
#include "x86_inputs_avx2.h"
#include "x86_inputs_check.h"

/* Random rows of K = 2048 and 6656 values over nine decades of magnitude,
 * with outliers, zero groups and subnormals (spark_test_fill), in groups of
 * 16, 32, 64, 128 (and 48: the scalar fallback), rows of T = 1-3 with and
 * without padding between them; returns how many preparations differ in any
 * byte from the scalar ones. */
int spark_test_avx2_inputs_mismatches(unsigned seed, int trials) {
  static const int kGroups[] = {128, 64, 32, 16, 48};
  int mismatches = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int G = kGroups[trial % 5];
    const int K = trial % 3 == 0 ? 6656 - 6656 % (3 * G) : 2048 - 2048 % G;
    const int T = 1 + trial % 3, stride = K + 16 * (trial % 2);
    float *x = (float *)malloc(sizeof(float) * (size_t)stride * T);
    if (!x)
      return -1;
    spark_test_fill(x, stride * T, G, trial, &seed);
    halide_dimension_t dims[2];
    halide_buffer_t xb;
    spark_test_buffer(&xb, dims, x, K, T, stride);
    for (int r = 0; r < spark_test_roundings(trial); ++r)
      for (int four_bit = 0; four_bit <= 1; ++four_bit) {
        const int rounding = r == 0 ? kSparkBF16Inputs : kSparkF16Inputs;
        spark_int16_inputs scalar, vector;
        if (spark_prepare_int16(&xb, rounding, G, four_bit, &scalar) ||
            spark_prepare_int16_avx2(&xb, rounding, G, four_bit, &vector)) {
          ++mismatches;
          continue;
        }
        mismatches += spark_test_int16_differ(&scalar, &vector,
                                              (size_t)T * (K / G), G, four_bit);
        spark_free_int16(&scalar);
        spark_free_int16(&vector);
      }
    free(x);
  }
  return mismatches;
}
