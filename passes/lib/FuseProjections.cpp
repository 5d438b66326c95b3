//===- FuseProjections.cpp - one linear for projections of one input ------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace spark {
#define GEN_PASS_DEF_SPARKFUSEPROJECTIONS
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct FuseProjections : spark::impl::SparkFuseProjectionsBase<FuseProjections> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    module.walk([&](Block *block) {
      // Linears grouped by input, in program order.
      llvm::MapVector<Value, SmallVector<LinearOp>> groups;
      for (auto linear : block->getOps<LinearOp>()) {
        auto weight = symbols.lookup<WeightOp>(linear.getWeight());
        if (!weight || weight.getQuant() || linear.getInputQuant() ||
            feedsHeadGate(linear))
          continue;
        groups[linear.getInput()].push_back(linear);
      }
      for (auto &[input, linears] : groups) {
        if (linears.size() < 2)
          continue;
        SmallVector<WeightOp> weights;
        for (LinearOp linear : linears)
          weights.push_back(symbols.lookup<WeightOp>(linear.getWeight()));
        Type element = weights[0].getTensorType().getElementType();
        if (!llvm::all_of(weights, [&](WeightOp w) {
              return w.getTensorType().getElementType() == element;
            }))
          continue;
        // The stacked weight, declared after the first part.
        SmallVector<Attribute> parts;
        SmallVector<int64_t> sizes;
        int64_t rows = 0;
        for (WeightOp w : weights) {
          parts.push_back(FlatSymbolRefAttr::get(w.getSymNameAttr()));
          sizes.push_back(w.getTensorType().getDimSize(0));
          rows += sizes.back();
        }
        int64_t cols = weights[0].getTensorType().getDimSize(1);
        builder.setInsertionPointAfter(weights[0]);
        auto stacked = WeightOp::create(
            builder, weights[0].getLoc(),
            builder.getStringAttr(weights[0].getSymName() + ".fused"),
            TypeAttr::get(RankedTensorType::get({rows, cols}, element)),
            StringAttr(), QuantAttr(), builder.getArrayAttr(parts));
        symbols.insert(stacked); // renames on a clash
        // One linear where the first one was, then the pieces.
        LinearOp first = linears.front();
        builder.setInsertionPoint(first);
        auto inputType = cast<RankedTensorType>(input.getType());
        auto resultType =
            RankedTensorType::get({inputType.getDimSize(0), rows},
                                  builder.getF32Type());
        Value fused = LinearOp::create(
            builder, first.getLoc(), resultType, input,
            FlatSymbolRefAttr::get(stacked.getSymNameAttr()),
            first.getInputQuantAttr(), first.getInputRangeAttr(),
            first.getInputScaleAttr(),
            first.getInputTypeAttr()); // one input: the same range
        SmallVector<Type> pieceTypes;
        for (LinearOp linear : linears)
          pieceTypes.push_back(linear.getResult().getType());
        auto split = SplitOp::create(builder, first.getLoc(), pieceTypes, fused,
                                     builder.getDenseI64ArrayAttr(sizes));
        for (auto [linear, piece] : llvm::zip(linears, split.getResults())) {
          linear.getResult().replaceAllUsesWith(piece);
          linear.erase();
        }
      }
    });
  }
};

} // namespace
