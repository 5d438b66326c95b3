/* avx2_support.h - horizontal sums the AVX2 microkernels share
 * (avx2_linear.c, avx2_attention.c). Needs -mavx2. */
#ifndef SPARK_AVX2_SUPPORT_H
#define SPARK_AVX2_SUPPORT_H

#include <immintrin.h>
#include <stdint.h>

static inline float spark_hsum128_ps(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline float spark_hsum_ps(__m256 v) {
  return spark_hsum128_ps(
      _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

static inline int32_t spark_hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
                            _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

#endif
