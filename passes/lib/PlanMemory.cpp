//===- PlanMemory.cpp - a static activation arena from liveness -----------===//
#include "spark/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace spark {
#define GEN_PASS_DEF_SPARKPLANMEMORY
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct Interval {
  int first = 0, last = 0;
  int64_t bytes = 0, offset = 0;
  Operation *owner = nullptr;
};

/// The value whose memory v uses: splits are views of their input.
Value storageOf(Value v) {
  while (auto split = v.getDefiningOp<SplitOp>())
    v = split.getInput();
  return v;
}

bool needsArena(Operation *op) {
  return op->getNumResults() == 1 &&
         !isa<SplitOp, KVWriteOp, GetWeightOp, ConstantOp, LogitsOp>(op);
}

struct PlanMemory : spark::impl::SparkPlanMemoryBase<PlanMemory> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxChunk < 1 || rowMultiple < 1) {
      module.emitError() << "spark-plan-memory: max-chunk and row-multiple "
                            "must be positive, got "
                         << int64_t(maxChunk) << " and " << int64_t(rowMultiple);
      return signalPassFailure();
    }
    const int64_t rows = arenaRows(maxChunk, rowMultiple);
    int64_t arenaBytes = 0;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      llvm::DenseMap<Value, Interval> intervals;
      std::vector<Value> order;
      int index = 0;
      for (Operation &op : func.getBody().front()) {
        for (Value operand : op.getOperands()) {
          auto it = intervals.find(storageOf(operand));
          if (it != intervals.end())
            it->second.last = index;
        }
        if (needsArena(&op)) {
          auto type = dyn_cast<RankedTensorType>(op.getResult(0).getType());
          if (!type || type.getRank() != 2 || type.isDynamicDim(1)) {
            op.emitError() << "spark-plan-memory: expected a [tokens, "
                              "features] result to place in the arena";
            return signalPassFailure();
          }
          Interval interval;
          interval.first = interval.last = index;
          interval.bytes = rows * ((type.getDimSize(1) + 15) / 16 * 16) * 4;
          interval.owner = &op;
          intervals[op.getResult(0)] = interval;
          order.push_back(op.getResult(0));
        }
        ++index;
      }
      // First fit, in definition order, against every placed value that is
      // live at the same time.
      std::vector<Interval *> placed;
      for (Value v : order) {
        Interval &cur = intervals[v];
        for (bool moved = true; moved;) {
          moved = false;
          for (Interval *other : placed)
            if (other->first <= cur.last && cur.first <= other->last &&
                cur.offset < other->offset + other->bytes &&
                other->offset < cur.offset + cur.bytes) {
              cur.offset = other->offset + other->bytes;
              moved = true;
            }
        }
        placed.push_back(&cur);
        arenaBytes = std::max(arenaBytes, cur.offset + cur.bytes);
        cur.owner->setAttr("spark.arena_offset",
                           IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                            cur.offset));
      }
    }
    Builder b(&getContext());
    module->setAttr("spark.arena",
                    b.getDictionaryAttr({b.getNamedAttr("bytes", b.getI64IntegerAttr(arenaBytes)),
                                         b.getNamedAttr("rows", b.getI64IntegerAttr(rows))}));
  }
};

} // namespace
