/* x86_inputs_avx512.h - the 4-bit and int8 kernels' input preparation on
 * AVX-512 (int8_linear.c): for each call, the activations quantized to int8
 * (w8a8, w4a8) or taken as int16 per group (w4a16), 16 values per
 * instruction. Needs AVX512F, AVX512BW and F16C (the including file's
 * flags). */
#ifndef SPARK_X86_INPUTS_AVX512_H
#define SPARK_X86_INPUTS_AVX512_H

#include "x86_inputs.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* The 4-bit scaling group these functions handle (K a multiple of it). */
#define SPARK_AVX512_GROUP SPARK_MK_GROUP

/* The same values as the scalar preparation in microkernel_support.h and
 * x86_inputs.h (max |x|, products rounded to nearest even, each group's
 * even-index values before its odd-index ones), which ran serially before
 * every parallel call: 6.5 us at K = 2048 and 20 us at K = 6656, about a
 * millisecond of every 1.7b decode step. */

/* Indices of the even (odd) lanes of two vectors of 16 int32. */
static inline __m512i spark_even_lanes(void) {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                           28, 30);
}

static inline float spark_max_abs_avx512(const float *x, int K) {
  __m512 largest = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 <= K; k += 16)
    largest = _mm512_max_ps(largest, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  float m = _mm512_reduce_max_ps(largest);
  for (; k < K; ++k)
    m = fmaxf(m, fabsf(x[k]));
  return m;
}

/* Row x of K f32 into int8 codes with `scale` (> 0: static) or its own
 * (spark_quantize_row); w4a8 (`four_bit`): each group of 128 as its
 * even-index codes, then its odd-index ones, and its sum into sums[g];
 * w8a8: code + 128. Returns the scale. K % 128 == 0 (w4a8) or
 * K % 64 == 0 (w8a8). */
static inline float spark_quantize_row_avx512(const float *x, int K,
                                              float scale, int four_bit,
                                              uint8_t *codes, int32_t *sums) {
  if (!(scale > 0.0f))
    scale = spark_max_abs_avx512(x, K) / 127.0f;
  const __m512 inverse = _mm512_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m512i even = spark_even_lanes(),
                odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int k = 0; k < K; k += four_bit ? SPARK_AVX512_GROUP : 64) {
    __m512i q[8];
    const int vectors = four_bit ? SPARK_AVX512_GROUP / 16 : 4;
    for (int v = 0; v < vectors; ++v)
      q[v] = _mm512_min_epi32(
          hi,
          _mm512_max_epi32(lo, _mm512_cvtps_epi32(_mm512_mul_ps(
                                   _mm512_loadu_ps(x + k + 16 * v), inverse))));
    if (!four_bit) {
      for (int v = 0; v < 4; ++v)
        _mm_storeu_si128((__m128i *)(codes + k + 16 * v),
                         _mm512_cvtepi32_epi8(
                             _mm512_xor_si512(q[v], _mm512_set1_epi32(0x80))));
      continue;
    }
    __m512i total = _mm512_setzero_si512();
    for (int v = 0; v < 8; v += 2) {
      total = _mm512_add_epi32(total, _mm512_add_epi32(q[v], q[v + 1]));
      _mm_storeu_si128((__m128i *)(codes + k + 8 * v),
                       _mm512_cvtepi32_epi8(
                           _mm512_permutex2var_epi32(q[v], even, q[v + 1])));
      _mm_storeu_si128(
          (__m128i *)(codes + k + SPARK_AVX512_GROUP / 2 + 8 * v),
          _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(q[v], odd, q[v + 1])));
    }
    sums[k / SPARK_AVX512_GROUP] = _mm512_reduce_add_epi32(total);
  }
  return scale;
}

/* The T rows of x rounded to bf16 or f16 (`rounding`) as int16 per group of
 * 128, as spark_prepare_int16 with G = 128 makes them: for 4-bit weights
 * (`four_bit`) scales, sums and byte planes (`values` is not filled, the
 * 4-bit kernels do not read it); for 8-bit ones scales and `values` in the
 * inputs' order. */
static inline int spark_prepare_int16_avx512(const halide_buffer_t *x,
                                             int rounding, int four_bit,
                                             spark_int16_inputs *in) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const int groups = K / SPARK_AVX512_GROUP;
  const size_t cells = (size_t)(T > 0 ? T : 1) * (groups > 0 ? groups : 1);
  if (spark_alloc_int16(in, cells, SPARK_AVX512_GROUP, four_bit) != 0)
    return -1;
  const __m512i even = spark_even_lanes(),
                odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i exponent = _mm512_set1_epi32(0x7f800000);
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < groups; ++g) {
      const float *from =
          (const float *)x->host + (size_t)t * xs + g * SPARK_AVX512_GROUP;
      __m512 v[8];
      __m512 largest = _mm512_setzero_ps();
      for (int i = 0; i < 8; ++i) {
        __m512 f = _mm512_loadu_ps(from + 16 * i);
        if (rounding == kSparkBF16Inputs) { /* spark_round_bf16 */
          const __m512i u = _mm512_castps_si512(f);
          const __m512i r = _mm512_and_si512(
              _mm512_add_epi32(
                  u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                      _mm512_and_si512(_mm512_srli_epi32(u, 16),
                                                       _mm512_set1_epi32(1)))),
              _mm512_set1_epi32((int)0xffff0000u));
          const __mmask16 finite =
              _mm512_cmpneq_epi32_mask(_mm512_and_si512(u, exponent), exponent);
          f = _mm512_castsi512_ps(_mm512_mask_mov_epi32(u, finite, r));
        } else {
          f = _mm512_cvtph_ps(_mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT |
                                                     _MM_FROUND_NO_EXC));
        }
        v[i] = f;
        largest = _mm512_max_ps(largest, _mm512_abs_ps(f));
      }
      /* spark_int16_group's power of two */
      const int e = spark_int16_exponent(_mm512_reduce_max_ps(largest));
      const __m512 inverse = _mm512_set1_ps(spark_pow2f(-e));
      const size_t c = (size_t)t * groups + g;
      in->scales[c] = spark_pow2f(e);
      if (!four_bit) {
        int16_t *values = in->values + c * SPARK_AVX512_GROUP;
        for (int i = 0; i < 8; ++i)
          _mm256_storeu_si256((__m256i *)(values + 16 * i),
                              _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(
                                  _mm512_mul_ps(v[i], inverse))));
        continue;
      }
      uint8_t *bytes = in->bytes + c * 2 * SPARK_AVX512_GROUP;
      __m512i total = _mm512_setzero_si512();
      for (int i = 0; i < 8; i += 2) {
        const __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(v[i], inverse));
        const __m512i b = _mm512_cvtps_epi32(_mm512_mul_ps(v[i + 1], inverse));
        total = _mm512_add_epi32(total, _mm512_add_epi32(a, b));
        const __m512i ev = _mm512_permutex2var_epi32(a, even, b);
        const __m512i od = _mm512_permutex2var_epi32(a, odd, b);
        _mm_storeu_si128((__m128i *)(bytes + 8 * i), _mm512_cvtepi32_epi8(ev));
        _mm_storeu_si128((__m128i *)(bytes + 64 + 8 * i),
                         _mm512_cvtepi32_epi8(od));
        _mm_storeu_si128((__m128i *)(bytes + 128 + 8 * i),
                         _mm512_cvtepi32_epi8(_mm512_srai_epi32(ev, 8)));
        _mm_storeu_si128((__m128i *)(bytes + 192 + 8 * i),
                         _mm512_cvtepi32_epi8(_mm512_srai_epi32(od, 8)));
      }
      in->sums[c] = (float)_mm512_reduce_add_epi32(total) * in->scales[c];
    }
  return 0;
}

#endif
