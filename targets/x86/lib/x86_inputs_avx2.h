/* x86_inputs_avx2.h - the 16-bit-activation kernels' int16 input preparation
 * on AVX2 (avx2_linear.c): for each call, the activations rounded to bf16 or
 * f16 and taken as int16 per group, eight values per instruction. Needs AVX2
 * and F16C (the including file's flags). */
#ifndef SPARK_X86_INPUTS_AVX2_H
#define SPARK_X86_INPUTS_AVX2_H

#include "x86_inputs.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The same values as spark_prepare_int16 (max |v|, products rounded to
 * nearest even, each 4-bit group's even-index values before its odd-index
 * ones), which ran serially before every parallel call: at one thread about
 * 2 ms of every 1.7b w4a16 decode step. */

/* f rounded as spark_round_input rounds it (bf16 or f16). */
static inline __m256 spark_round_inputs_avx2(__m256 f, int rounding) {
  if (rounding == kSparkBF16Inputs) { /* spark_round_bf16 */
    const __m256i u = _mm256_castps_si256(f);
    const __m256i exponent = _mm256_set1_epi32(0x7f800000);
    const __m256i r = _mm256_and_si256(
        _mm256_add_epi32(
            u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                _mm256_and_si256(_mm256_srli_epi32(u, 16),
                                                 _mm256_set1_epi32(1)))),
        _mm256_set1_epi32((int)0xffff0000u));
    const __m256i special =
        _mm256_cmpeq_epi32(_mm256_and_si256(u, exponent), exponent);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, u, special));
  }
  if (rounding == kSparkF16Inputs)
    return _mm256_cvtph_ps(
        _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return f;
}

/* The low (high) bytes of eight int16-range int32 lanes, into 8 bytes. */
static inline void spark_store_bytes_avx2(__m256i q, uint8_t *low,
                                          uint8_t *high) {
  const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q),
                                        _mm256_extracti128_si256(q, 1));
  const __m128i zero = _mm_setzero_si128();
  _mm_storel_epi64(
      (__m128i *)low,
      _mm_packus_epi16(_mm_and_si128(words, _mm_set1_epi16(0xff)), zero));
  _mm_storel_epi64((__m128i *)high,
                   _mm_packus_epi16(_mm_srli_epi16(words, 8), zero));
}

/* spark_prepare_int16 for G % 16 == 0 and G <= 128 (other groups take the
 * scalar function): the same buffers, except that for 4-bit weights
 * `values` is not filled (the 4-bit kernels read the byte planes). */
static inline int spark_prepare_int16_avx2(const halide_buffer_t *x,
                                           int rounding, int G, int four_bit,
                                           spark_int16_inputs *in) {
  if (G % 16 != 0 || G > 128 || G <= 0)
    return spark_prepare_int16(x, rounding, G, four_bit, in);
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const int groups = K / G;
  const size_t cells = (size_t)(T > 0 ? T : 1) * (groups > 0 ? groups : 1);
  if (spark_alloc_int16(in, cells, G, four_bit) != 0)
    return -1;
  /* Within 16 values: the even lanes of each half, then its odd ones. */
  const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < groups; ++g) {
      const float *from = (const float *)x->host + (size_t)t * xs + g * G;
      __m256 v[16];
      __m256 largest = _mm256_setzero_ps();
      for (int i = 0; i < G / 8; ++i) {
        v[i] = spark_round_inputs_avx2(_mm256_loadu_ps(from + 8 * i), rounding);
        largest = _mm256_max_ps(largest, _mm256_and_ps(v[i], magnitude));
      }
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(largest),
                            _mm256_extractf128_ps(largest, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
      /* spark_int16_group's power of two */
      const int e = spark_int16_exponent(_mm_cvtss_f32(m));
      const __m256 inverse = _mm256_set1_ps(spark_pow2f(-e));
      const size_t c = (size_t)t * groups + g;
      in->scales[c] = spark_pow2f(e);
      if (!four_bit) {
        int16_t *values = in->values + c * G;
        for (int i = 0; i < G / 8; ++i) {
          const __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse));
          _mm_storeu_si128((__m128i *)(values + 8 * i),
                           _mm_packs_epi32(_mm256_castsi256_si128(q),
                                           _mm256_extracti128_si256(q, 1)));
        }
        continue;
      }
      uint8_t *bytes = in->bytes + c * 2 * G;
      __m256i total = _mm256_setzero_si256();
      for (int i = 0; i < G / 8; i += 2) { /* values 8 i .. 8 i + 15 */
        const __m256i a = _mm256_permutevar8x32_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inverse)), split);
        const __m256i b = _mm256_permutevar8x32_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(v[i + 1], inverse)), split);
        total = _mm256_add_epi32(total, _mm256_add_epi32(a, b));
        const int at = 4 * i; /* (8 i) / 2 */
        spark_store_bytes_avx2(_mm256_permute2x128_si256(a, b, 0x20),
                               bytes + at, bytes + G + at);
        spark_store_bytes_avx2(_mm256_permute2x128_si256(a, b, 0x31),
                               bytes + G / 2 + at, bytes + G + G / 2 + at);
      }
      __m128i s = _mm_add_epi32(_mm256_castsi256_si128(total),
                                _mm256_extracti128_si256(total, 1));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
      s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
      in->sums[c] = (float)_mm_cvtsi128_si32(s) * in->scales[c];
    }
  return 0;
}

#endif
