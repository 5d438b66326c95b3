/* avx512_sums.h - horizontal sums of four AVX-512 vectors at once, for the
 * x86 prefill tiles (int8_linear.c, bf16_linear.c): one vector per row of a
 * 4-row tile reduced into the 4 outputs of one token, about a third of the
 * instructions of four separate reductions. Needs AVX512F (the including
 * file's flags). */
#ifndef SPARK_TARGETS_X86_AVX512_SUMS_H
#define SPARK_TARGETS_X86_AVX512_SUMS_H

#include <immintrin.h>

/* The lane sums of a, b, c and d, in that order. */
static inline __attribute__((always_inline)) __m128i
spark_hsum4_epi32(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b),
                                      _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d),
                                      _mm512_unpackhi_epi32(c, d));
  /* each 128-bit lane: partial sums of a, b, c, d */
  const __m512i abcd = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd),
                                        _mm512_unpackhi_epi64(ab, cd));
  const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(abcd),
                                        _mm512_extracti64x4_epi64(abcd, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(half),
                       _mm256_extracti128_si256(half, 1));
}

static inline __attribute__((always_inline)) __m128
spark_hsum4_ps(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab =
      _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd =
      _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 abcd =
      _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab),
                                                        _mm512_castps_pd(cd))),
                    _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab),
                                                        _mm512_castps_pd(cd))));
  const __m256 half = _mm256_add_ps(
      _mm512_castps512_ps256(abcd),
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(abcd), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(half),
                    _mm256_extractf128_ps(half, 1));
}

#endif
