/* quantize_row.h - per-token int8 quantization shared by the int8-input
 * microkernels; the same rule as the Halide kernels (codegen/lib/Kernels.cpp):
 * scale = max |x| / 127, code = round-to-nearest-even(x * 127 / max |x|). */
#ifndef SPARK_QUANTIZE_ROW_H
#define SPARK_QUANTIZE_ROW_H

#include <math.h>
#include <stdint.h>

/* Writes the K codes of x; returns the row's scale. */
static inline float spark_quantize_row(const float *x, int K, int8_t *codes) {
  float largest = 0.0f;
  for (int k = 0; k < K; ++k)
    largest = fmaxf(largest, fabsf(x[k]));
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  for (int k = 0; k < K; ++k) {
    float q = nearbyintf(x[k] * inverse);
    codes[k] = (int8_t)(q < -127.0f ? -127.0f : q > 127.0f ? 127.0f : q);
  }
  return largest / 127.0f;
}

#endif
