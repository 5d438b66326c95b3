//===- FloatFormatsTest.cpp - f32 <-> half / bfloat16 conversions ---------===//
#include "spark/Import/FloatFormats.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace spark;

namespace {

bool isNaNHalf(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

// Every one of the 65536 half values survives half -> f32 -> half.
TEST(FloatFormats, HalfRoundTripsExhaustively) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (isNaNHalf(uint16_t(h))) {
      EXPECT_TRUE(std::isnan(halfToFloat(uint16_t(h))));
      continue;
    }
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << std::hex << h;
  }
}

TEST(FloatFormats, HalfDecodesKnownValues) {
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x0400), std::ldexp(1.0f, -14)); // smallest normal
  EXPECT_TRUE(std::isinf(halfToFloat(0x7c00)));
}

TEST(FloatFormats, HalfRoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: to 1 + 2^-9.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // rounds past the largest: inf
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie to even zero
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
}

TEST(FloatFormats, BF16RoundTripsExhaustively) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = bf16ToFloat(uint16_t(h));
    if (std::isnan(f))
      continue;
    ASSERT_EQ(floatToBF16(f), h) << std::hex << h;
  }
}

TEST(FloatFormats, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80); // tie: even
  EXPECT_EQ(floatToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(std::nanf("")))));
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
}

} // namespace
