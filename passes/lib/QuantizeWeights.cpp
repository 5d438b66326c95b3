//===- QuantizeWeights.cpp - mark matrix weights as quantized -------------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace spark {
#define GEN_PASS_DEF_SPARKQUANTIZEWEIGHTS
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct QuantizeWeights : spark::impl::SparkQuantizeWeightsBase<QuantizeWeights> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const bool fourBitScheme = scheme == "w4a16" || scheme == "w4a8";
    const bool int8Inputs = scheme == "w8a8" || scheme == "w4a8";
    if (scheme != "w8a16" && scheme != "w8a8" && !fourBitScheme) {
      module.emitError() << "spark-quantize-weights: unknown scheme '" << scheme
                         << "'; expected w8a16, w8a8, w4a16 or w4a8";
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    llvm::SetVector<WeightOp> weights;
    module.walk([&](Operation *op) {
      FlatSymbolRefAttr symbol;
      if (auto linear = dyn_cast<LinearOp>(op)) {
        if (!feedsHeadGate(linear))
          symbol = linear.getWeightAttr();
      } else if (auto logits = dyn_cast<LogitsOp>(op)) {
        symbol = logits.getHeadAttr();
      } else if (auto embed = dyn_cast<EmbedOp>(op)) {
        symbol = embed.getTableAttr();
      }
      if (symbol)
        if (auto weight = symbols.lookup<WeightOp>(symbol.getValue()))
          weights.insert(weight);
    });
    MLIRContext *context = &getContext();
    auto int8 = QuantAttr::get(context, 8, /*group_size=*/0, /*symmetric=*/true);
    // 4-bit codes in groups of 128 along the input dimension: asymmetric
    // (w4a16) or symmetric, (code - 8) * scale (w4a8). A matrix whose rows do
    // not split into whole groups keeps int8 per output channel.
    auto int4 = QuantAttr::get(context, 4, /*group_size=*/128,
                               /*symmetric=*/scheme == "w4a8");
    for (WeightOp weight : weights) {
      if (weight.getQuant())
        continue;
      auto type = weight.getTensorType();
      bool fourBit = fourBitScheme && type.getDimSize(1) % 128 == 0;
      weight.setType(RankedTensorType::get(
          type.getShape(), IntegerType::get(context, fourBit ? 4 : 8)));
      weight.setQuantAttr(fourBit ? int4 : int8);
    }
    // w8a8 / w4a8: every product with a quantized weight takes int8 inputs,
    // quantized per token at run time.
    if (!int8Inputs)
      return;
    module.walk([&](Operation *op) {
      if (!isa<LinearOp, LogitsOp>(op))
        return;
      auto symbol = isa<LinearOp>(op) ? cast<LinearOp>(op).getWeightAttr()
                                      : cast<LogitsOp>(op).getHeadAttr();
      auto weight = symbols.lookup<WeightOp>(symbol.getValue());
      if (weight && weights.contains(weight))
        op->setAttr("input_quant", int8);
    });
  }
};

} // namespace
