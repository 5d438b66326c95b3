//===- CalibrateTest.cpp - the calibrated second moment for GPTQ ----------===//
//
// tools/loader/Calibrate.h's addSecondMoment (blocked, parallel rank-k
// updates of a packed upper triangle) against sums of x_i x_j written out
// directly, over calls whose row counts cross the block size, rows with a
// stride wider than the rows, and channels that are zero in whole blocks.
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

TEST(Calibrate, SecondMomentMatchesDirectSums) {
  const int32_t width = 37, stride = 40;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Three calls: 41 rows (two full blocks of 16 and 9), 5 rows, 16 rows.
  const int32_t calls[] = {41, 5, 16};
  std::vector<std::vector<float>> data;
  for (int32_t rows : calls) {
    std::vector<float> d(size_t(rows) * stride, 1e30f); // the gap is unread
    for (int32_t r = 0; r < rows; ++r)
      for (int32_t c = 0; c < width; ++c)
        // channel 5 is zero in every row, channel 7 in the first call only
        d[size_t(r) * stride + c] =
            c == 5 || (c == 7 && rows == 41) ? 0.0f : normal(rng);
    data.push_back(std::move(d));
  }
  std::vector<double> packed;
  for (size_t call = 0; call < data.size(); ++call)
    spark::addSecondMoment(packed, data[call].data(), calls[call], width,
                           stride);
  ASSERT_EQ(packed.size(), size_t(width) * (width + 1) / 2);
  const double rows = 41 + 5 + 16;
  const std::vector<float> mean =
      spark::secondMomentMean(packed, size_t(width), rows);
  ASSERT_EQ(mean.size(), size_t(width) * width);
  for (int32_t i = 0; i < width; ++i)
    for (int32_t j = 0; j < width; ++j) {
      double direct = 0.0;
      for (size_t call = 0; call < data.size(); ++call)
        for (int32_t r = 0; r < calls[call]; ++r)
          direct += double(data[call][size_t(r) * stride + i]) *
                    double(data[call][size_t(r) * stride + j]);
      direct /= rows;
      EXPECT_NEAR(mean[size_t(i) * width + j], direct,
                  1e-6 * (1.0 + std::fabs(direct)))
          << i << "," << j;
    }
  // The zero channel's row and column are exactly zero.
  for (int32_t j = 0; j < width; ++j)
    EXPECT_EQ(mean[size_t(5) * width + j], 0.0f) << j;
}

TEST(Calibrate, SecondMomentOfWideInputsOnThreads) {
  // 1500 wide: a full block of 16 rows is enough work for the threads
  // (1500^2 / 2 x 16 multiply-adds), the last 4 rows are not.
  const int32_t width = 1500, rows = 20;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> data(size_t(rows) * width);
  for (float &v : data)
    v = uniform(rng);
  std::vector<double> packed;
  spark::addSecondMoment(packed, data.data(), rows, width, width);
  const std::vector<float> mean =
      spark::secondMomentMean(packed, size_t(width), double(rows));
  for (int32_t i = 0; i < width; i += 7)
    for (int32_t j = 0; j < width; ++j) {
      double direct = 0.0;
      for (int32_t r = 0; r < rows; ++r)
        direct += double(data[size_t(r) * width + i]) *
                  double(data[size_t(r) * width + j]);
      direct /= rows;
      ASSERT_NEAR(mean[size_t(i) * width + j], direct,
                  1e-6 * (1.0 + std::fabs(direct)))
          << i << "," << j;
    }
}

} // namespace
