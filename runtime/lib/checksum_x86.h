/* checksum_x86.h - the weight pack's block digest on x86 vectors.
 *
 * Included by runtime.c (and by the kernel tests, which compare both
 * versions with the portable spark_checksum_block of pack_format.h). */
#ifndef SPARK_CHECKSUM_X86_H
#define SPARK_CHECKSUM_X86_H

#include "spark/pack_format.h"

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* A block's digest (pack_format.h) on the widest vectors this x86 CPU has:
 * the eight lanes of a 64-byte step are one AVX-512 register or two AVX2
 * ones, the product of a lane's 32-bit halves one vpmuludq (GCC compiles
 * the portable loop into a 64-bit product of three, 15.9 GB/s in L2 on a
 * Zen 5 core); the block's tail and the mixing are the portable code's
 * (spark_checksum_finish). The runtime picks one by CPUID; other targets take
 * the portable function. */
__attribute__((target("avx512f"))) static inline uint64_t
spark_checksum_block_avx512(const void *data, size_t bytes, uint64_t index) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t lane[8], key[8];
  for (int l = 0; l < 8; ++l) {
    lane[l] = spark_checksum_lane_seed(l, index);
    key[l] = spark_checksum_lane_key(l);
  }
  __m512i sum = _mm512_loadu_si512(lane);
  const __m512i keys = _mm512_loadu_si512(key);
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __builtin_prefetch(p + i + 4096, 0, 2); /* as the portable loop */
    const __m512i w = _mm512_loadu_si512(p + i);
    const __m512i x =
        _mm512_xor_si512(w, _mm512_xor_si512(keys, _mm512_set1_epi64(i)));
    sum = _mm512_add_epi64(
        sum,
        _mm512_add_epi64(w, _mm512_mul_epu32(x, _mm512_srli_epi64(x, 32))));
  }
  _mm512_storeu_si512(lane, sum);
  return spark_checksum_finish(lane, p + i, bytes - i, bytes, index);
}
__attribute__((target("avx2"))) static inline uint64_t
spark_checksum_block_avx2(const void *data, size_t bytes, uint64_t index) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t lane[8], key[8];
  for (int l = 0; l < 8; ++l) {
    lane[l] = spark_checksum_lane_seed(l, index);
    key[l] = spark_checksum_lane_key(l);
  }
  __m256i sum[2], keys[2];
  for (int h = 0; h < 2; ++h) {
    sum[h] = _mm256_loadu_si256((const __m256i *)(lane + 4 * h));
    keys[h] = _mm256_loadu_si256((const __m256i *)(key + 4 * h));
  }
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __builtin_prefetch(p + i + 4096, 0, 2);
    const __m256i offset = _mm256_set1_epi64x((long long)i);
    for (int h = 0; h < 2; ++h) {
      const __m256i w = _mm256_loadu_si256((const __m256i *)(p + i + 32 * h));
      const __m256i x = _mm256_xor_si256(w, _mm256_xor_si256(keys[h], offset));
      sum[h] = _mm256_add_epi64(
          sum[h],
          _mm256_add_epi64(w, _mm256_mul_epu32(x, _mm256_srli_epi64(x, 32))));
    }
  }
  for (int h = 0; h < 2; ++h)
    _mm256_storeu_si256((__m256i *)(lane + 4 * h), sum[h]);
  return spark_checksum_finish(lane, p + i, bytes - i, bytes, index);
}

#endif /* SPARK_CHECKSUM_X86_H */
