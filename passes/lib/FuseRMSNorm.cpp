//===- FuseRMSNorm.cpp - fuse a decomposed RMSNorm, also under QDQ ---------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSERMSNORM
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// The epsilon of `%me = add(%m, %eps)`: a one-element f32 constant.
std::optional<double> epsilonOf(Value v) {
  auto constant = definingThroughQDQ<ConstantOp>(v);
  if (!constant || constant.getValue().getNumElements() != 1)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  double eps = (*dense.getValues<APFloat>().begin()).convertToDouble();
  if (!(eps > 0.0))
    return std::nullopt;
  return eps;
}

/// The value squared by %sq = mul(x, x) or pow(x, 2), looking through QDQ.
Value squaredValue(Value sq) {
  sq = skipQDQ(sq);
  if (auto pow = sq.getDefiningOp<PowOp>())
    return pow.getExponent().convertToDouble() == 2.0 ? pow.getInput() : Value();
  if (auto mul = sq.getDefiningOp<MulOp>())
    if (skipQDQ(mul.getLhs()) == skipQDQ(mul.getRhs()))
      return mul.getLhs();
  return {};
}

/// Rooted at the multiply by the weight (the last op of the norm).
struct FuseRMSNormPattern : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    // y = mul(n, w) with w = get_weight @w, in either order.
    GetWeightOp weight;
    Value normalized;
    for (unsigned i = 0; i < 2 && !weight; ++i) {
      weight = definingThroughQDQ<GetWeightOp>(mul->getOperand(i));
      normalized = mul->getOperand(1 - i);
    }
    if (!weight || weight.getResult().getType().getRank() != 1)
      return rewriter.notifyMatchFailure(mul, "not a multiply by a 1-D weight");
    // n = mul(x, r), r = rsqrt(add(mean(x * x), eps)).
    auto scale = definingThroughQDQ<MulOp>(normalized);
    if (!scale)
      return rewriter.notifyMatchFailure(mul, "no x * rsqrt(...)");
    RsqrtOp rsqrt;
    Value input;
    for (unsigned i = 0; i < 2 && !rsqrt; ++i) {
      rsqrt = definingThroughQDQ<RsqrtOp>(scale->getOperand(i));
      input = scale->getOperand(1 - i);
    }
    if (!rsqrt)
      return rewriter.notifyMatchFailure(mul, "no rsqrt");
    auto add = definingThroughQDQ<AddOp>(rsqrt.getInput());
    if (!add)
      return rewriter.notifyMatchFailure(mul, "epsilon is not added under the rsqrt");
    MeanOp mean;
    std::optional<double> eps;
    for (unsigned i = 0; i < 2 && !mean; ++i) {
      mean = definingThroughQDQ<MeanOp>(add->getOperand(i));
      eps = epsilonOf(add->getOperand(1 - i));
    }
    if (!mean || !eps)
      return rewriter.notifyMatchFailure(mul, "no mean(x * x) + constant epsilon");
    Value squared = squaredValue(mean.getInput());
    if (!squared)
      return rewriter.notifyMatchFailure(mul, "the mean is not over x * x");
    // The squared value and the normalized value must be the same x.
    if (squared != input) {
      if (skipQDQ(squared) != skipQDQ(input))
        return rewriter.notifyMatchFailure(mul, "x * x and x differ");
      input = skipQDQ(input);
    }
    auto inputType = cast<RankedTensorType>(input.getType());
    if (inputType != mul.getResult().getType())
      return rewriter.notifyMatchFailure(mul, "result shape differs from x");

    // An output quantize/dequantize pair folds into the fused op.
    Operation *replaced = mul;
    FloatAttr outputScale;
    IntegerAttr outputZeroPoint;
    if (mul->hasOneUse())
      if (auto q = dyn_cast<QuantizeOp>(*mul->user_begin()))
        if (q->hasOneUse())
          if (auto dq = dyn_cast<DequantizeOp>(*q->user_begin());
              dq && dq.getScale() == q.getScale() &&
              dq.getZeroPoint() == q.getZeroPoint()) {
            replaced = dq;
            outputScale = q.getScaleAttr();
            outputZeroPoint = q.getZeroPointAttr();
          }
    rewriter.setInsertionPoint(replaced);
    auto fused = RMSNormOp::create(
        rewriter, mul.getLoc(), inputType, input, weight.getWeightAttr(),
        rewriter.getF64FloatAttr(*eps), outputScale, outputZeroPoint);
    rewriter.replaceOp(replaced, fused.getResult());
    return success();
  }
};

struct FuseRMSNorm : spark::impl::SparkFuseRMSNormBase<FuseRMSNorm> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseRMSNormPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
