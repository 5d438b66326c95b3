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
    if (scheme != "w8a16") {
      module.emitError() << "spark-quantize-weights: scheme '" << scheme
                         << "' is not implemented; expected w8a16";
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
    auto quant = QuantAttr::get(context, 8, /*group_size=*/0, /*symmetric=*/true);
    for (WeightOp weight : weights) {
      if (weight.getQuant())
        continue;
      auto type = weight.getTensorType();
      weight.setType(RankedTensorType::get(type.getShape(),
                                           IntegerType::get(context, 8)));
      weight.setQuantAttr(quant);
    }
  }
};

} // namespace
