/* X86InputsCheck.c - the AVX-512 input preparation (x86_inputs_avx512.h)
 * against the scalar one (microkernel_support.h, x86_inputs.h), value for
 * value, for X86KernelsTest.cpp. Compiled with -mavx512f -mavx512bw -mf16c;
 * called only on CPUs with them. */
#include "x86_inputs_avx512.h"
#include "x86_inputs_check.h"

#include <string.h>

/* Random rows of K = 2048 and 6656 values over nine decades of magnitude,
 * with outliers, zero groups and subnormals; returns how many preparations
 * differ in any byte from the scalar ones. */
int spark_test_avx512_inputs_mismatches(unsigned seed, int trials) {
  int mismatches = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int K = trial % 3 == 0 ? 6656 : 2048, T = 1 + trial % 3;
    const int groups = K / SPARK_AVX512_GROUP;
    const float magnitude = powf(10.0f, (float)(trial % 9) - 4.0f);
    float *x = (float *)malloc(sizeof(float) * (size_t)K * T);
    uint8_t *codes = (uint8_t *)malloc((size_t)K);
    int32_t *sums = (int32_t *)malloc(sizeof(int32_t) * groups);
    if (!x || !codes || !sums) {
      free(x);
      free(codes);
      free(sums);
      return -1;
    }
    spark_test_fill(x, K * T, SPARK_AVX512_GROUP, trial, &seed);
    halide_dimension_t dims[2];
    halide_buffer_t xb;
    spark_test_buffer(&xb, dims, x, K, T, K);
    /* int16 inputs (w4a16: byte planes; w8a16: values in input order) */
    for (int r = 0; r < spark_test_roundings(trial); ++r)
      for (int four_bit = 0; four_bit <= 1; ++four_bit) {
        const int rounding = r == 0 ? kSparkBF16Inputs : kSparkF16Inputs;
        spark_int16_inputs scalar, vector;
        if (spark_prepare_int16(&xb, rounding, SPARK_AVX512_GROUP, four_bit,
                                &scalar) ||
            spark_prepare_int16_avx512(&xb, rounding, four_bit, &vector)) {
          ++mismatches;
          continue;
        }
        mismatches += spark_test_int16_differ(
            &scalar, &vector, (size_t)T * groups, SPARK_AVX512_GROUP, four_bit);
        spark_free_int16(&scalar);
        spark_free_int16(&vector);
      }
    /* int8 inputs: w8a8 and w4a8, per-token and static scales */
    for (int four_bit = 0; four_bit <= 1; ++four_bit)
      for (int fixed = 0; fixed <= 1; ++fixed) {
        const float input_scale = fixed ? 0.01f * magnitude : 0.0f;
        int8_t *expected;
        float *expected_scales;
        if (spark_quantize_rows(&xb, input_scale, &expected,
                                &expected_scales)) {
          ++mismatches;
          continue;
        }
        for (int t = 0; t < T; ++t) {
          int8_t *row = expected + (size_t)t * K;
          const float scale = spark_quantize_row_avx512(
              x + (size_t)t * K, K, input_scale, four_bit, codes, sums);
          mismatches += scale != expected_scales[t];
          if (!four_bit) {
            for (int k = 0; k < K; ++k)
              row[k] = (int8_t)((uint8_t)row[k] ^ 0x80);
          } else {
            for (int g = 0; g < groups; ++g) {
              int32_t sum = 0;
              for (int i = 0; i < SPARK_AVX512_GROUP; ++i)
                sum += row[g * SPARK_AVX512_GROUP + i];
              mismatches += sum != sums[g];
            }
            spark_split_even_odd(row, K, SPARK_AVX512_GROUP);
          }
          mismatches += memcmp(row, codes, (size_t)K) != 0;
        }
        spark_scratch_put(expected);
        spark_scratch_put(expected_scales);
      }
    free(x);
    free(codes);
    free(sums);
  }
  return mismatches;
}
