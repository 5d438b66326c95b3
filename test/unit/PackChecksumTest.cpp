//===- PackChecksumTest.cpp - the weight pack's checksum ------------------===//
//
// spark_checksum (runtime/include/spark/pack_format.h) is computed by the
// pack writer in pieces and by the runtime block by block on several
// threads, in any order: both must give the one-shot value, and a damaged,
// moved or missing byte must change it.
//
//===----------------------------------------------------------------------===//
#include "spark/pack_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

constexpr size_t kBlock = SPARK_CHECKSUM_BLOCK;

std::vector<unsigned char> randomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> bytes(n);
  for (unsigned char &b : bytes)
    b = static_cast<unsigned char>(rng());
  return bytes;
}

/// The checksum as the runtime computes it: every block's digest, summed in
/// reverse order.
uint64_t byBlocksReversed(const std::vector<unsigned char> &bytes) {
  const size_t blocks = (bytes.size() + kBlock - 1) / kBlock;
  uint64_t digests = 0;
  for (size_t b = blocks; b-- > 0;) {
    const size_t at = b * kBlock;
    digests += spark_checksum_block(bytes.data() + at,
                                    std::min(kBlock, bytes.size() - at), b);
  }
  return spark_checksum_of_digests(digests, bytes.size());
}

TEST(PackChecksum, PiecesAndBlocksInAnyOrderGiveTheOneShotValue) {
  // 3 whole blocks and a tail that is not a multiple of 64 bytes.
  const std::vector<unsigned char> bytes = randomBytes(3 * kBlock + 1000, 1);
  const uint64_t once = spark_checksum(bytes.data(), bytes.size());
  spark_checksum_state s;
  spark_checksum_init(&s);
  spark_checksum_update(&s, bytes.data(), 2 * kBlock);
  spark_checksum_update(&s, bytes.data() + 2 * kBlock,
                        bytes.size() - 2 * kBlock);
  EXPECT_EQ(spark_checksum_final(&s), once);
  EXPECT_EQ(byBlocksReversed(bytes), once);
}

TEST(PackChecksum, EveryDamagedByteChangesIt) {
  std::vector<unsigned char> bytes = randomBytes(2 * kBlock + 77, 2);
  const uint64_t good = spark_checksum(bytes.data(), bytes.size());
  // A bit of each 8-byte lane, the tail, and both blocks' ends.
  for (size_t at :
       {size_t(0), size_t(9), size_t(63), size_t(64), kBlock - 1, kBlock,
        kBlock + 4097, 2 * kBlock - 1, 2 * kBlock, bytes.size() - 1})
    for (int bit : {0, 7}) {
      bytes[at] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_NE(spark_checksum(bytes.data(), bytes.size()), good)
          << "byte " << at << " bit " << bit;
      bytes[at] ^= static_cast<unsigned char>(1u << bit);
    }
  EXPECT_EQ(spark_checksum(bytes.data(), bytes.size()), good);
}

TEST(PackChecksum, MovedWordsAndBlocksChangeIt) {
  std::vector<unsigned char> bytes = randomBytes(2 * kBlock, 3);
  const uint64_t good = spark_checksum(bytes.data(), bytes.size());
  // Two 64-byte steps of one block swapped.
  std::vector<unsigned char> steps = bytes;
  std::swap_ranges(steps.begin() + 128, steps.begin() + 192,
                   steps.begin() + 4096);
  EXPECT_NE(spark_checksum(steps.data(), steps.size()), good);
  // Two words of one step swapped (lanes 0 and 1).
  std::vector<unsigned char> lanes = bytes;
  std::swap_ranges(lanes.begin(), lanes.begin() + 8, lanes.begin() + 8);
  EXPECT_NE(spark_checksum(lanes.data(), lanes.size()), good);
  // The two blocks swapped.
  std::vector<unsigned char> blocks(bytes.begin() + kBlock, bytes.end());
  blocks.insert(blocks.end(), bytes.begin(), bytes.begin() + kBlock);
  EXPECT_NE(spark_checksum(blocks.data(), blocks.size()), good);
}

TEST(PackChecksum, LengthMatters) {
  // Zero bytes appended or cut, at a block boundary and inside a step.
  std::vector<unsigned char> zeros(kBlock + 64, 0);
  const uint64_t full = spark_checksum(zeros.data(), zeros.size());
  EXPECT_NE(spark_checksum(zeros.data(), kBlock), full);
  EXPECT_NE(spark_checksum(zeros.data(), zeros.size() - 1), full);
  EXPECT_NE(spark_checksum(zeros.data(), 0), spark_checksum(zeros.data(), 1));
}

} // namespace
