//===- X86ChecksumTest.cpp - the pack's block digest on x86 vectors -------===//
//
// The runtime verifies a pack with the AVX-512 or AVX2 version of the block
// digest (runtime/lib/checksum_x86.h); the pack writer computes it with the
// portable spark_checksum_block. Every block length (whole 64-byte steps and
// a tail of 0-63 bytes) and every block index must give the same digest.
//
//===----------------------------------------------------------------------===//
#include "spark/pack_format.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

// X86ChecksumCheck.c
extern "C" uint64_t spark_check_digest_avx512(const void *, size_t, uint64_t);
extern "C" uint64_t spark_check_digest_avx2(const void *, size_t, uint64_t);

namespace {

using Digest = uint64_t (*)(const void *, size_t, uint64_t);

void expectSameDigests(Digest digest) {
  std::mt19937_64 rng(7);
  std::vector<unsigned char> bytes(SPARK_CHECKSUM_BLOCK);
  for (unsigned char &b : bytes)
    b = static_cast<unsigned char>(rng());
  for (size_t length : {size_t(0), size_t(1), size_t(63), size_t(64),
                        size_t(65), size_t(4096 + 17), size_t(100000),
                        SPARK_CHECKSUM_BLOCK - 1, SPARK_CHECKSUM_BLOCK})
    for (uint64_t index : {uint64_t(0), uint64_t(1), uint64_t(811)}) {
      // Start off a 64-byte boundary too: the vector loads are unaligned.
      const unsigned char *at = bytes.data() + (length < 1000 ? 3 : 0);
      EXPECT_EQ(digest(at, length, index),
                spark_checksum_block(at, length, index))
          << "length " << length << ", block " << index;
    }
}

TEST(X86Checksum, Avx512DigestIsThePortableOne) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("[SKIP] this CPU has no AVX-512F\n");
    GTEST_SKIP();
  }
  expectSameDigests(spark_check_digest_avx512);
}

TEST(X86Checksum, Avx2DigestIsThePortableOne) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2")) {
    std::printf("[SKIP] this CPU has no AVX2\n");
    GTEST_SKIP();
  }
  expectSameDigests(spark_check_digest_avx2);
}

} // namespace
