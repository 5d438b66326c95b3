//===- PatternUtils.h - helpers shared by the fusion patterns --------------===//
#ifndef SPARK_PASSES_PATTERNUTILS_H
#define SPARK_PASSES_PATTERNUTILS_H

#include "spark/Dialect/SparkOps.h"

namespace spark {

/// Looks through fake-quantization: for v = dequantize(quantize(u)) returns
/// u (repeatedly), else v. This is how fusions survive a QDQ graph.
inline mlir::Value skipQDQ(mlir::Value v) {
  while (auto dq = v.getDefiningOp<DequantizeOp>()) {
    auto q = dq.getInput().getDefiningOp<QuantizeOp>();
    if (!q)
      break;
    v = q.getInput();
  }
  return v;
}

/// The op of type OpTy defining v, looking through QDQ pairs.
template <typename OpTy> OpTy definingThroughQDQ(mlir::Value v) {
  return skipQDQ(v).getDefiningOp<OpTy>();
}

/// For a commutative binary op, returns the operand that is not `known` (the
/// operands compared after QDQ), or null.
inline mlir::Value otherOperand(mlir::Operation *op, mlir::Value known) {
  if (skipQDQ(op->getOperand(0)) == known)
    return op->getOperand(1);
  if (skipQDQ(op->getOperand(1)) == known)
    return op->getOperand(0);
  return nullptr;
}

/// Whether the linear computes the head-wise gate (its result is the gate of
/// a spark.head_gate or a gated spark.attention). The gate projection stays
/// apart from stacked projections and in full precision under quantization.
inline bool feedsHeadGate(LinearOp linear) {
  for (mlir::Operation *user : linear->getUsers()) {
    if (auto gate = llvm::dyn_cast<HeadGateOp>(user);
        gate && gate.getGate() == linear.getResult())
      return true;
    if (auto attn = llvm::dyn_cast<AttentionOp>(user);
        attn && attn.getGate() == linear.getResult())
      return true;
  }
  return false;
}

} // namespace spark

#endif // SPARK_PASSES_PATTERNUTILS_H
