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
    if (scheme != "w8a16" && scheme != "w4a16") {
      module.emitError() << "spark-quantize-weights: scheme '" << scheme
                         << "' is not implemented; expected w8a16 or w4a16";
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
    // w4a16: asymmetric 4-bit codes in groups of 128 along the input
    // dimension; a matrix whose rows do not split into whole groups keeps
    // int8 per output channel.
    auto int4 = QuantAttr::get(context, 4, /*group_size=*/128, /*symmetric=*/false);
    for (WeightOp weight : weights) {
      if (weight.getQuant())
        continue;
      auto type = weight.getTensorType();
      bool fourBit = scheme == "w4a16" && type.getDimSize(1) % 128 == 0;
      weight.setType(RankedTensorType::get(
          type.getShape(), IntegerType::get(context, fourBit ? 4 : 8)));
      weight.setQuantAttr(fourBit ? int4 : int8);
    }
  }
};

} // namespace
