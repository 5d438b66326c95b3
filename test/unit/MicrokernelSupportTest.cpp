//===- MicrokernelSupportTest.cpp - what every target's kernels share -----===//
//
// The int16 input grid of the 16-bit-activation kernels (x86, arm64 and
// Hexagon) takes each group's power of two from the float's exponent field,
// so that Hexagon's small libc, which has no frexpf or ldexpf, compiles the
// same header: it must be frexpf's exponent for every float. Hexagon rounds
// the inputs to f16 in software: it must round as a conversion does.
//
//===----------------------------------------------------------------------===//

#include "gtest/gtest.h"

#include <cstdint>

extern "C" int int16_exponent_mismatches(uint32_t step);
extern "C" int round_f16_mismatches(uint32_t step);

TEST(MicrokernelSupport, Int16ExponentIsFrexps) {
  // Every 4099th bit pattern of the finite positive floats (about 520,000,
  // subnormals included), and the edges of every binade.
  EXPECT_EQ(int16_exponent_mismatches(4099), 0);
}

// Hexagon's 16-bit-input kernels round their inputs to f16 in software
// (spark_round_f16): the same values as a conversion to _Float16 and back.
TEST(MicrokernelSupport, RoundF16IsFloat16Conversion) {
  // Every 8191st bit pattern (about 524,000, both signs, NaN and infinity
  // included), every f16 value's midpoints with its neighbours (the ties)
  // and the floats beside them.
  EXPECT_EQ(round_f16_mismatches(8191), 0);
}
