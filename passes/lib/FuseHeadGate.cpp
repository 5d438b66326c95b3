//===- FuseHeadGate.cpp - the head-wise gate in the attention epilogue ----===//
#include "spark/Passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSEHEADGATE
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// Whether `v` is available before `op` (an argument of its block or
/// defined earlier in it).
bool availableBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

struct FuseHeadGatePattern : OpRewritePattern<HeadGateOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(HeadGateOp gate,
                                PatternRewriter &rewriter) const override {
    auto attn = gate.getInput().getDefiningOp<AttentionOp>();
    if (!attn || !attn->hasOneUse() || attn.getGate())
      return rewriter.notifyMatchFailure(gate, "not the only use of a gateless attention");
    if (int64_t(gate.getNumHeads()) != int64_t(attn.getNumHeads()))
      return rewriter.notifyMatchFailure(gate, "head counts differ");
    // Caches are updated in place after the attention: the attention must
    // keep its place, so the gate's producer moves up instead.
    Value g = gate.getGate();
    if (!availableBefore(g, attn)) {
      Operation *producer = g.getDefiningOp();
      if (!producer || producer->getBlock() != attn->getBlock() ||
          !llvm::all_of(producer->getOperands(),
                        [&](Value v) { return availableBefore(v, attn); }))
        return rewriter.notifyMatchFailure(gate, "the gate cannot move before the attention");
      rewriter.moveOpBefore(producer, attn);
    }
    rewriter.modifyOpInPlace(attn, [&] { attn.getGateMutable().assign(g); });
    rewriter.replaceOp(gate, attn.getResult());
    return success();
  }
};

struct FuseHeadGate : spark::impl::SparkFuseHeadGateBase<FuseHeadGate> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseHeadGatePattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
