//===- KernelSpecAttrTest.cpp - kernel specs as spark_kernel attributes ---===//
//
// The kernel plan de-duplicates kernels by their spec attribute: every field
// of a KernelSpec must survive the trip to the attribute and back, and specs
// that differ must give different attributes.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/PlanIR.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace spark;

namespace {

std::vector<KernelSpec> specs() {
  std::vector<KernelSpec> all;
  KernelSpec s;
  s.kind = KernelKind::Linear;
  s.phase = Phase::Decode;
  s.weightType = DType::U8;
  s.in = 2048;
  s.out = 6144;
  s.group = 128;
  s.inputType = DType::BF16;
  all.push_back(s);
  s.phase = Phase::Prefill;
  s.symmetricGroups = true;
  s.inputType = DType::F32;
  s.inputBits = 8;
  s.inputBlock = 32;
  all.push_back(s);

  KernelSpec a;
  a.kind = KernelKind::Attention;
  a.weightType = DType::F16;
  a.heads = 16;
  a.kvHeads = 8;
  a.headDim = 128;
  a.window = 512;
  a.slots = 511;
  a.ring = true;
  a.gated = true;
  a.scale = 1.0 / std::sqrt(128.0);
  all.push_back(a);

  KernelSpec n;
  n.kind = KernelKind::RMSNorm;
  n.in = 2048;
  n.epsilon = 1e-6;
  all.push_back(n);

  KernelSpec r;
  r.kind = KernelKind::Rope;
  r.heads = 16;
  r.headDim = 128;
  r.rotaryDim = 64;
  r.out = 4096;
  r.block = 64;
  all.push_back(r);

  KernelSpec b;
  b.kind = KernelKind::Binary;
  b.op = ElementwiseOp::Mul;
  b.in = 16;
  b.lhsWidth = 16;
  b.rhsWidth = 1;
  b.rhsRows = false;
  all.push_back(b);

  KernelSpec u;
  u.kind = KernelKind::Unary;
  u.op = ElementwiseOp::Pow;
  u.parameter = 0.5;
  u.in = 64;
  all.push_back(u);

  KernelSpec e;
  e.kind = KernelKind::Embed;
  e.weightType = DType::I8;
  e.in = 2048;
  e.out = 131072;
  all.push_back(e);
  return all;
}

TEST(KernelSpecAttr, EveryFieldSurvivesTheRoundTrip) {
  mlir::MLIRContext context;
  for (const KernelSpec &spec : specs()) {
    kernel::SpecAttr attr = specAttr(&context, spec);
    KernelSpec back = kernelSpec(attr);
    EXPECT_EQ(back.name(), spec.name());
    EXPECT_EQ(back.kind, spec.kind);
    EXPECT_EQ(back.phase, spec.phase);
    EXPECT_EQ(back.weightType, spec.weightType) << spec.name();
    EXPECT_EQ(back.inputType, spec.inputType) << spec.name();
    EXPECT_EQ(back.in, spec.in);
    EXPECT_EQ(back.out, spec.out);
    EXPECT_EQ(back.epsilon, spec.epsilon);
    EXPECT_EQ(back.scale, spec.scale);
    EXPECT_EQ(back.parameter, spec.parameter);
    EXPECT_EQ(back.heads, spec.heads);
    EXPECT_EQ(back.kvHeads, spec.kvHeads);
    EXPECT_EQ(back.headDim, spec.headDim);
    EXPECT_EQ(back.rotaryDim, spec.rotaryDim);
    EXPECT_EQ(back.window, spec.window);
    EXPECT_EQ(back.slots, spec.slots);
    EXPECT_EQ(back.block, spec.block);
    EXPECT_EQ(back.group, spec.group);
    EXPECT_EQ(back.symmetricGroups, spec.symmetricGroups);
    EXPECT_EQ(back.inputBits, spec.inputBits);
    EXPECT_EQ(back.inputBlock, spec.inputBlock);
    EXPECT_EQ(back.ring, spec.ring);
    EXPECT_EQ(back.gated, spec.gated);
    EXPECT_EQ(back.op, spec.op);
    EXPECT_EQ(back.lhsWidth, spec.lhsWidth);
    EXPECT_EQ(back.rhsWidth, spec.rhsWidth);
    EXPECT_EQ(back.lhsRows, spec.lhsRows);
    EXPECT_EQ(back.rhsRows, spec.rhsRows);
    // Printed and parsed again, the same (uniqued) attribute.
    std::string text;
    llvm::raw_string_ostream os(text);
    mlir::Attribute(attr).print(os);
    EXPECT_EQ(mlir::parseAttribute(text, &context), mlir::Attribute(attr))
        << text;
  }
}

TEST(KernelSpecAttr, SpecsThatDifferAreDifferentAttributes) {
  mlir::MLIRContext context;
  std::vector<KernelSpec> all = specs();
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = 0; j < all.size(); ++j)
      EXPECT_EQ(specAttr(&context, all[i]) == specAttr(&context, all[j]),
                i == j);
  // Epsilons one f32 ulp apart, exponents 1e-9 apart.
  KernelSpec a = all[3], b = all[3];
  b.epsilon = double(std::nextafter(1e-6f, 1.0f));
  EXPECT_NE(specAttr(&context, a), specAttr(&context, b));
  KernelSpec p = all[6], q = all[6];
  q.parameter = 0.5 + 1e-9;
  EXPECT_NE(specAttr(&context, p), specAttr(&context, q));
  // Phases of one product are two kernels.
  KernelSpec decode = all[0], prefill = all[0];
  prefill.phase = Phase::Prefill;
  EXPECT_NE(specAttr(&context, decode), specAttr(&context, prefill));
}

} // namespace
