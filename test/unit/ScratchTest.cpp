//===- ScratchTest.cpp - the microkernels' per-thread work buffers --------===//
//
// targets/common/lib/scratch.h: blocks come back 128-byte aligned and at
// least as large as asked; a freed block of up to SPARK_SCRATCH_KEEP bytes
// serves the thread's next request of its size class (the smallest kept
// block that fits); larger ones and those past kSparkScratchSlots go back to
// the C library; a thread that keeps blocks registers them for its exit.
// (That a decode step allocates nothing is test_e2e.py's
// test_decode_allocates_nothing.)
//
//===----------------------------------------------------------------------===//

#include "scratch.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>
#include <thread>

namespace {

int keptBlocks() {
  int kept = 0;
  for (void *block : spark_scratch_mine.blocks)
    kept += block != nullptr;
  return kept;
}

void releaseAll() { spark_scratch_release(&spark_scratch_mine); }

TEST(Scratch, BlocksAreAlignedAndWritable) {
  for (size_t bytes : {size_t(0), size_t(1), size_t(4095), size_t(4097),
                       size_t(1) << 20, (size_t(1) << 20) + 1}) {
    void *block = nullptr;
    ASSERT_EQ(spark_scratch_get(&block, bytes), 0) << bytes;
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 128, 0u) << bytes;
    EXPECT_GE(spark_scratch_size(static_cast<uint8_t *>(block) - 128), bytes);
    std::memset(block, 0xab, bytes);
    spark_scratch_put(block);
  }
  releaseAll();
}

TEST(Scratch, FreedBlockServesTheNextRequestOfItsClass) {
  releaseAll();
  void *first = nullptr, *again = nullptr;
  ASSERT_EQ(spark_scratch_get(&first, 1000), 0);
  spark_scratch_put(first);
  EXPECT_EQ(keptBlocks(), 1);
  ASSERT_EQ(spark_scratch_get(&again, 4096), 0); // the same 4 KiB class
  EXPECT_EQ(again, first);
  EXPECT_EQ(keptBlocks(), 0);
  spark_scratch_put(again);
  releaseAll();
}

TEST(Scratch, SmallestKeptBlockThatFits) {
  releaseAll();
  void *small = nullptr, *large = nullptr, *middle = nullptr, *got = nullptr;
  ASSERT_EQ(spark_scratch_get(&small, 4096), 0);
  ASSERT_EQ(spark_scratch_get(&large, 65536), 0);
  ASSERT_EQ(spark_scratch_get(&middle, 16384), 0);
  spark_scratch_put(large);
  spark_scratch_put(small);
  spark_scratch_put(middle);
  ASSERT_EQ(spark_scratch_get(&got, 5000), 0);
  EXPECT_EQ(got, middle);
  spark_scratch_put(got);
  ASSERT_EQ(spark_scratch_get(&got, 100), 0);
  EXPECT_EQ(got, small);
  spark_scratch_put(got);
  releaseAll();
}

TEST(Scratch, LargeBlocksAreNotKept) {
  releaseAll();
  void *block = nullptr;
  ASSERT_EQ(spark_scratch_get(&block, SPARK_SCRATCH_KEEP + 1), 0);
  EXPECT_EQ(spark_scratch_size(static_cast<uint8_t *>(block) - 128),
            SPARK_SCRATCH_KEEP + 1);
  spark_scratch_put(block);
  EXPECT_EQ(keptBlocks(), 0);
}

TEST(Scratch, FullCacheKeepsTheLargerBlocks) {
  releaseAll();
  // A ninth block of the same size is freed; a larger one takes the place
  // of a 4 KiB one.
  void *blocks[kSparkScratchSlots + 1];
  for (void *&block : blocks)
    ASSERT_EQ(spark_scratch_get(&block, 4096), 0);
  for (void *block : blocks)
    spark_scratch_put(block);
  EXPECT_EQ(keptBlocks(), kSparkScratchSlots);
  void *extra = nullptr, *larger = nullptr, *got = nullptr;
  ASSERT_EQ(spark_scratch_get(&extra, 8192), 0);
  ASSERT_EQ(spark_scratch_get(&larger, 8192), 0);
  EXPECT_EQ(keptBlocks(), kSparkScratchSlots); // both were new blocks
  spark_scratch_put(larger);
  EXPECT_EQ(keptBlocks(), kSparkScratchSlots);
  ASSERT_EQ(spark_scratch_get(&got, 8000), 0);
  EXPECT_EQ(got, larger);
  spark_scratch_put(got);
  spark_scratch_put(extra); // replaces the smallest (4 KiB) block
  int eightKiB = 0;
  for (void *header : spark_scratch_mine.blocks)
    eightKiB += header && spark_scratch_size(header) == 8192;
  EXPECT_EQ(eightKiB, 2);
  releaseAll();
}

TEST(Scratch, ThreadRegistersItsBlocksForItsExit) {
  bool registered = false;
  std::thread worker([&registered] {
    void *block = nullptr;
    if (spark_scratch_get(&block, 4096) != 0)
      return;
    spark_scratch_put(block);
    registered =
        pthread_getspecific(spark_scratch_key) == &spark_scratch_mine &&
        keptBlocks() == 1;
  });
  worker.join();
  EXPECT_TRUE(registered);
}

} // namespace
