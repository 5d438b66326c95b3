//===- QuantizeWeights.cpp - mark matrix weights as quantized -------------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace spark {
#define GEN_PASS_DEF_SPARKQUANTIZEWEIGHTS
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// The weight a matrix product (spark.linear, spark.logits) reads, or null.
FlatSymbolRefAttr productWeight(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    return linear.getWeightAttr();
  if (auto logits = dyn_cast<LogitsOp>(op))
    return logits.getHeadAttr();
  return nullptr;
}

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
    // int8-input schemes: dynamic or static scales; 16-bit ones: the type.
    std::string inputs = activations.empty()
                             ? std::string(int8Inputs ? "dynamic" : "f32")
                             : std::string(activations);
    const bool known = int8Inputs
                           ? inputs == "dynamic" || inputs == "static"
                           : inputs == "f32" || inputs == "bf16" || inputs == "f16";
    if (!known) {
      module.emitError() << "spark-quantize-weights: activations '" << inputs
                         << "' does not apply to " << scheme << "; expected "
                         << (int8Inputs ? "dynamic or static"
                                        : "f32, bf16 or f16");
      return signalPassFailure();
    }
    SymbolTable symbols(module);
    llvm::SetVector<WeightOp> weights;
    module.walk([&](Operation *op) {
      FlatSymbolRefAttr symbol;
      if (auto linear = dyn_cast<LinearOp>(op)) {
        if (!feedsHeadGate(linear))
          symbol = linear.getWeightAttr();
      } else if (auto embed = dyn_cast<EmbedOp>(op)) {
        symbol = embed.getTableAttr();
      } else {
        symbol = productWeight(op); // the head
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
    // The matrix products that read a quantized weight take quantized or
    // 16-bit inputs.
    SmallVector<Operation *> products;
    module.walk([&](Operation *op) {
      if (FlatSymbolRefAttr symbol = productWeight(op))
        if (auto weight = symbols.lookup<WeightOp>(symbol.getValue()))
          if (weights.contains(weight))
            products.push_back(op);
    });
    // w8a16 / w4a16: the inputs rounded to bf16 or f16 (or left f32).
    if (!int8Inputs) {
      if (inputs == "f32")
        return;
      Type type = inputs == "bf16" ? Type(BFloat16Type::get(context))
                                   : Type(Float16Type::get(context));
      for (Operation *op : products)
        op->setAttr("input_type", TypeAttr::get(type));
      return;
    }
    // w8a8 / w4a8: int8 inputs, quantized per token at run time, or (static)
    // with one calibrated scale per op, never a made-up one.
    for (Operation *op : products) {
      op->setAttr("input_quant", int8);
      if (inputs != "static")
        continue;
      auto range = op->getAttrOfType<FloatAttr>("input_range");
      if (!range) {
        op->emitOpError() << "reading " << productWeight(op)
                          << " has no calibrated input_range; static int8 "
                             "activations need the ranges of a calibration "
                             "run (spark-compile --calib FILE)";
        return signalPassFailure();
      }
      op->setAttr("input_scale",
                  FloatAttr::get(Float32Type::get(context),
                                 float(range.getValueAsDouble() / 127.0)));
    }
  }
};

} // namespace

llvm::Error spark::attachInputRanges(ModuleOp module,
                                     const llvm::StringMap<float> &ranges) {
  llvm::StringSet<> used;
  std::string missing;
  module.walk([&](Operation *op) {
    FlatSymbolRefAttr symbol = productWeight(op);
    if (!symbol)
      return;
    auto it = ranges.find(symbol.getValue());
    if (it == ranges.end()) {
      if (missing.empty())
        missing = symbol.getValue().str();
      return;
    }
    used.insert(it->first());
    op->setAttr("input_range",
                FloatAttr::get(Float32Type::get(op->getContext()), it->second));
  });
  if (!missing.empty())
    return llvm::createStringError(
        "no calibrated range for the input of the product with " + missing +
        " (the ranges come from a different model or build)");
  for (const auto &entry : ranges)
    if (!used.contains(entry.first()))
      return llvm::createStringError(
          "a calibrated range names " + entry.first().str() +
          ", which no product of this model reads");
  return llvm::Error::success();
}
