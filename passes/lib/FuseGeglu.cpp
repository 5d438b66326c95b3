//===- FuseGeglu.cpp - fuse gelu(gate) * up into spark.geglu ---------------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSEGEGLU
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct FuseGegluPattern : OpRewritePattern<MulOp> {
  FuseGegluPattern(MLIRContext *context, bool allowTanh)
      : OpRewritePattern(context), allowTanh(allowTanh) {}

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      auto gelu = definingThroughQDQ<GeluOp>(mul->getOperand(i));
      Value up = mul->getOperand(1 - i);
      if (!gelu)
        continue;
      if (gelu.getApproximate() && !allowTanh)
        return rewriter.notifyMatchFailure(mul, "tanh gelu (allow-tanh off)");
      Type type = mul.getResult().getType();
      if (gelu.getInput().getType() != type || up.getType() != type)
        return rewriter.notifyMatchFailure(mul, "broadcasting multiply");
      rewriter.replaceOpWithNewOp<GegluOp>(mul, type, gelu.getInput(), up);
      return success();
    }
    return rewriter.notifyMatchFailure(mul, "no gelu operand");
  }

  bool allowTanh;
};

struct FuseGeglu : spark::impl::SparkFuseGegluBase<FuseGeglu> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseGegluPattern>(&getContext(), allowTanh);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
