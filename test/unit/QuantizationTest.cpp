//===- QuantizationTest.cpp - the int8 weight packer ----------------------===//
#include "spark/Codegen/ModelPlan.h"

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
