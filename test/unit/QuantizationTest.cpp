//===- QuantizationTest.cpp - the int8 weight packer ----------------------===//
#include "spark/Codegen/ModelPlan.h"
#include "spark/Import/FloatFormats.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace spark;

namespace {

float decodeI8(uint8_t byte) { return float(int8_t(byte)); }

// Codes stored and read back are exact, and saturate at +-127.
TEST(Int8Packer, CodesRoundTripExactly) {
  for (int code = -127; code <= 127; ++code) {
    uint8_t byte;
    encodeElement(float(code), DType::I8, &byte);
    EXPECT_EQ(decodeI8(byte), float(code));
  }
  uint8_t byte;
  encodeElement(300.0f, DType::I8, &byte);
  EXPECT_EQ(decodeI8(byte), 127.0f);
  encodeElement(-300.0f, DType::I8, &byte);
  EXPECT_EQ(decodeI8(byte), -127.0f);
  encodeElement(2.5f, DType::I8, &byte); // ties to even
  EXPECT_EQ(decodeI8(byte), 2.0f);
}

// Quantize / dequantize error stays within half a grid step of the row.
TEST(Int8Packer, ErrorWithinHalfAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(257);
    for (float &v : row)
      v = normal(rng) * float(trial + 1);
    float scale =
        symmetricInt8Scale([&](int64_t i) { return row[i]; }, int64_t(row.size()));
    float largest = 0;
    for (float v : row)
      largest = std::max(largest, std::fabs(v));
    EXPECT_FLOAT_EQ(scale, largest / 127.0f);
    for (float v : row) {
      uint8_t byte;
      encodeElement(v / scale, DType::I8, &byte);
      float back = decodeI8(byte) * scale;
      ASSERT_LE(std::fabs(back - v), 0.5f * scale * (1.0f + 1e-5f)) << v;
    }
  }
  EXPECT_EQ(symmetricInt8Scale([](int64_t) { return 0.0f; }, 8), 1.0f);
}

} // namespace

namespace {

// 4-bit groups: every code is in 0..15 and the reconstruction error of each
// value stays within half a grid step (values inside the searched range).
TEST(Int4Packer, GroupCodesAndError) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> uniform(-0.7f, 1.3f);
  std::vector<float> group(128);
  for (float &v : group)
    v = uniform(rng);
  Int4Group g =
      searchInt4Group([&](int64_t i) { return group[i]; }, int64_t(group.size()));
  EXPECT_GE(g.zero, 0.0f);
  EXPECT_LE(g.zero, 15.0f);
  // Scale and zero point are what the pack stores: f16 values.
  EXPECT_EQ(g.zero, halfToFloat(floatToHalf(g.zero)));
  EXPECT_EQ(g.scale, halfToFloat(floatToHalf(g.scale)));
  double error = 0.0, signal = 0.0;
  for (float v : group) {
    int code = quantizeInt4(v, g);
    ASSERT_GE(code, 0);
    ASSERT_LE(code, 15);
    float back = (float(code) - g.zero) * g.scale;
    if (v >= -g.zero * g.scale && v <= (15.0f - g.zero) * g.scale) {
      ASSERT_LE(std::fabs(back - v), 0.5f * g.scale * (1.0f + 1e-5f));
    }
    error += (back - v) * (back - v);
    signal += v * v;
  }
  // A 4-bit grid over this range: about 20 dB or better.
  EXPECT_GT(10.0 * std::log10(signal / error), 18.0);
  // Codes round-trip exactly: the grid points quantize to themselves.
  for (int code = 0; code <= 15; ++code)
    EXPECT_EQ(quantizeInt4((float(code) - g.zero) * g.scale, g), code);
}

// The least-squares refit beats the plain [min, max] grid (16 levels over
// the range, integer zero) on a bell-shaped group, and calibrated importance
// moves the error off the channel that matters.
TEST(Int4Packer, RefitAndImportance) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> group(128);
  for (float &v : group)
    v = normal(rng);
  auto value = [&](int64_t i) { return group[i]; };
  auto error = [&](const Int4Group &g, const std::vector<float> &w) {
    double e = 0.0;
    for (size_t i = 0; i < group.size(); ++i) {
      double d = (quantizeInt4(group[i], g) - g.zero) * g.scale - group[i];
      e += w[i] * d * d;
    }
    return e;
  };
  std::vector<float> uniform(group.size(), 1.0f);
  float lo = *std::min_element(group.begin(), group.end());
  float hi = *std::max_element(group.begin(), group.end());
  Int4Group plain{(hi - lo) / 15.0f, std::nearbyint(-lo / ((hi - lo) / 15.0f))};
  Int4Group searched = searchInt4Group(value, int64_t(group.size()));
  EXPECT_LT(error(searched, uniform), 0.8 * error(plain, uniform));

  // Channel 3 carries almost all the importance: its error shrinks to a
  // small fraction of a grid step.
  std::vector<float> importance(group.size(), 1e-3f);
  importance[3] = 1e3f;
  Int4Group weighted =
      searchInt4Group(value, int64_t(group.size()), importance.data());
  auto channelError = [&](const Int4Group &g, int i) {
    return std::fabs((quantizeInt4(group[i], g) - g.zero) * g.scale - group[i]);
  };
  EXPECT_LT(channelError(weighted, 3), 0.1f * weighted.scale);
  EXPECT_LE(error(weighted, importance), error(searched, importance));
  Int4Group symmetric = searchSymmetricInt4Group(value, int64_t(group.size()),
                                                 importance.data());
  EXPECT_LT(channelError(symmetric, 3), 0.1f * symmetric.scale);
}

} // namespace

namespace {

// Symmetric 4-bit groups (w4a8): the zero point is always 8, so (code - 8)
// covers -8..7; values within the grid reconstruct within half a step, the
// sign of the reconstruction never flips, and grid points round-trip.
TEST(Int4Packer, SymmetricGroupCodesAndError) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.1f, 0.9f);
  std::vector<float> group(128);
  for (float &v : group)
    v = uniform(rng);
  Int4Group g = searchSymmetricInt4Group([&](int64_t i) { return group[i]; },
                                         int64_t(group.size()));
  EXPECT_EQ(g.zero, 8.0f);
  EXPECT_GT(g.scale, 0.0f);
  double error = 0.0, signal = 0.0;
  for (float v : group) {
    int code = quantizeInt4(v, g);
    ASSERT_GE(code, 0);
    ASSERT_LE(code, 15);
    float back = (float(code) - 8.0f) * g.scale;
    if (v >= -8.0f * g.scale && v <= 7.0f * g.scale) {
      ASSERT_LE(std::fabs(back - v), 0.5f * g.scale * (1.0f + 1e-5f));
    }
    ASSERT_FALSE(back * v < 0.0f) << v;
    error += (back - v) * (back - v);
    signal += v * v;
  }
  EXPECT_GT(10.0 * std::log10(signal / error), 16.0);
  for (int code = 0; code <= 15; ++code)
    EXPECT_EQ(quantizeInt4((float(code) - 8.0f) * g.scale, g), code);
  // An all-zero group: scale 1, every code 8.
  Int4Group zero = searchSymmetricInt4Group([](int64_t) { return 0.0f; }, 16);
  EXPECT_EQ(zero.scale, 1.0f);
  EXPECT_EQ(quantizeInt4(0.0f, zero), 8);
}

} // namespace
