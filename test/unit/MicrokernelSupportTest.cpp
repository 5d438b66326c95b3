//===- MicrokernelSupportTest.cpp - what every target's kernels share -----===//
//
// The int16 input grid of the 16-bit-activation kernels (x86 and arm64)
// takes each group's power of two from the float's exponent field, so that
// Hexagon's small libc, which has no frexpf or ldexpf, compiles the same
// header: it must be frexpf's exponent for every float.
//
//===----------------------------------------------------------------------===//

#include "gtest/gtest.h"

#include <cstdint>

extern "C" int int16_exponent_mismatches(uint32_t step);

TEST(MicrokernelSupport, Int16ExponentIsFrexps) {
  // Every 4099th bit pattern of the finite positive floats (about 520,000,
  // subnormals included), and the edges of every binade.
  EXPECT_EQ(int16_exponent_mismatches(4099), 0);
}
