/* MicrokernelSupportCheck.c - targets/common/lib/microkernel_support.h
 * compiled as C, as the microkernels of every target compile it, with what
 * MicrokernelSupportTest.cpp checks exported. */
#include "microkernel_support.h"

#include <math.h>
#include <string.h>

/* The exponent frexpf gives the group scale's rule, as microkernel_support.h
 * documents it: at least -126, 0 for zero. */
static int frexp_exponent(float largest) {
  int exponent = 0;
  if (largest > 0.0f)
    frexpf(largest / 32767.0f, &exponent);
  return exponent < -126 ? -126 : exponent;
}

/* How many of `count` finite positive floats (every `step`-th bit pattern
 * from 0, then the powers of two and their neighbours, and 32767 times
 * them) get another exponent from spark_int16_exponent than from frexpf, or
 * how many powers of two 2^-126..2^127 spark_pow2f gets wrong. */
int int16_exponent_mismatches(uint32_t step) {
  int mismatches = 0;
  for (uint64_t bits = 0; bits < 0x7f800000u; bits += step) {
    float v;
    const uint32_t b = (uint32_t)bits;
    memcpy(&v, &b, sizeof v);
    mismatches += spark_int16_exponent(v) != frexp_exponent(v);
  }
  for (int e = -149; e <= 127; ++e) {
    const float p = ldexpf(1.0f, e);
    const float near[] = {p, nextafterf(p, 0.0f), nextafterf(p, INFINITY),
                          p * 32767.0f, nextafterf(p * 32767.0f, 0.0f),
                          nextafterf(p * 32767.0f, INFINITY)};
    for (size_t i = 0; i < sizeof near / sizeof near[0]; ++i)
      if (isfinite(near[i]))
        mismatches += spark_int16_exponent(near[i]) != frexp_exponent(near[i]);
    if (e >= -126)
      mismatches += spark_pow2f(e) != p;
  }
  return mismatches;
}

/* How many floats (every `step`-th bit pattern of the positive and the
 * negative ones, then every f16 value, the midpoints between neighbouring
 * f16 values and the floats beside them) spark_round_f16 rounds otherwise
 * than the compiler's conversion to _Float16 and back. */
int round_f16_mismatches(uint32_t step) {
  int mismatches = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += step) {
    float v;
    const uint32_t b = (uint32_t)bits;
    memcpy(&v, &b, sizeof v);
    const float want = (float)(_Float16)v, got = spark_round_f16(v);
    mismatches += isnan(v) ? !isnan(got) : memcmp(&want, &got, sizeof got) != 0;
  }
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    _Float16 a, b;
    const uint16_t h0 = (uint16_t)h, h1 = (uint16_t)(h + 1);
    memcpy(&a, &h0, sizeof a);
    memcpy(&b, &h1, sizeof b);
    const float mid = ((float)a + (float)b) / 2; /* exact in f32 */
    const float near[] = {(float)a, mid, nextafterf(mid, 0.0f),
                          nextafterf(mid, INFINITY)};
    for (size_t i = 0; i < sizeof near / sizeof near[0]; ++i)
      for (int sign = 1; sign >= -1; sign -= 2) {
        const float v = sign * near[i];
        const float want = (float)(_Float16)v, got = spark_round_f16(v);
        mismatches += memcmp(&want, &got, sizeof got) != 0;
      }
  }
  return mismatches;
}
