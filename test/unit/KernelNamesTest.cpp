//===- KernelNamesTest.cpp - kernel names tell kernels apart ---------------===//
//
// Kernels are de-duplicated by name: specs that compute different things must
// never share one, and the names of the values a checkpoint gives stay short.
//
//===----------------------------------------------------------------------===//
#include "spark/Kernels/Kernels.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace spark;

namespace {

KernelSpec norm(double epsilon) {
  KernelSpec s;
  s.kind = KernelKind::RMSNorm;
  s.in = 2048;
  s.epsilon = epsilon;
  return s;
}

KernelSpec power(double exponent) {
  KernelSpec s;
  s.kind = KernelKind::Unary;
  s.op = ElementwiseOp::Pow;
  s.in = 64;
  s.parameter = exponent;
  return s;
}

TEST(KernelNames, EpsilonsOfConfigsKeepShortNames) {
  EXPECT_EQ(norm(1e-6).name(), "rms_norm_d2048_eps600");
  EXPECT_EQ(norm(1e-5).name(), "rms_norm_d2048_eps500");
  // The float an f32 attribute holds.
  EXPECT_EQ(norm(double(1e-6f)).name(), "rms_norm_d2048_eps600");
  EXPECT_EQ(power(0.5).name(), "pow_64_e500");
  EXPECT_EQ(power(3.0).name(), "pow_64_e3000");
}

TEST(KernelNames, DifferentEpsilonsNeverShareAKernel) {
  // Both round to eps600 (and to eps500).
  for (double base : {1e-6, 1e-5}) {
    const double near = base * (1 + 1e-4);
    EXPECT_NE(norm(base).name(), norm(near).name()) << base;
    EXPECT_EQ(std::llround(-std::log10(near) * 100),
              std::llround(-std::log10(base) * 100));
  }
  EXPECT_NE(norm(1e-6).name(), norm(std::nextafter(1e-6f, 1.0f)).name());
  // A name is still a C identifier.
  for (char c : norm(1.234567e-6).name())
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_');
}

TEST(KernelNames, DifferentExponentsNeverShareAKernel) {
  EXPECT_NE(power(0.5).name(), power(0.5004).name());
  EXPECT_NE(power(2.0).name(), power(2.0 + 1e-9).name());
}

} // namespace
