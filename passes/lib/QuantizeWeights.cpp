//===- QuantizeWeights.cpp - mark matrix weights as quantized -------------===//
#include "PatternUtils.h"
#include "spark/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/GlobPattern.h"

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

/// One rule of the precision recipe: weights matching `pattern` get `bits`
/// (0: not quantized) in groups of `group` (4- and 6-bit; 0: the scheme's).
struct RecipeRule {
  std::string text;
  llvm::GlobPattern pattern;
  int bits = 0;
  int64_t group = 0;
  bool used = false;
};

/// Parses "PATTERN=PRECISION"; returns "" or what is wrong.
std::string parseRule(StringRef text, RecipeRule &rule) {
  rule.text = text.str();
  auto [pattern, precision] = text.split('=');
  pattern = pattern.trim();
  precision = precision.trim();
  if (pattern.empty() || precision.empty() || !text.contains('='))
    return "expected PATTERN=PRECISION";
  llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
  if (!glob)
    return "bad pattern: " + llvm::toString(glob.takeError());
  rule.pattern = std::move(*glob);
  if (precision == "int8") {
    rule.bits = 8;
  } else if (precision == "none") {
    rule.bits = 0;
  } else if (precision == "int4" || precision == "int6") {
    rule.bits = precision == "int4" ? 4 : 6;
  } else if (precision.starts_with("int4:") || precision.starts_with("int6:")) {
    rule.bits = precision[3] == '4' ? 4 : 6;
    std::string name = precision.take_front(4).str();
    if (precision.drop_front(5).getAsInteger(10, rule.group) ||
        !isSupportedBlock(rule.group))
      return "the group of " + name + ":G must be 32, 64, 128 or 256";
  } else {
    return "unknown precision '" + precision.str() +
           "'; expected int8, int6, int6:G, int4, int4:G or none";
  }
  return "";
}

struct QuantizeWeights : spark::impl::SparkQuantizeWeightsBase<QuantizeWeights> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<QuantScheme> parsed = symbolizeQuantScheme(scheme);
    if (!parsed || *parsed == QuantScheme::None) {
      module.emitError() << "spark-quantize-weights: unknown scheme '" << scheme
                         << "'; expected w8a16, w8a8, w4a16 or w4a8";
      return signalPassFailure();
    }
    const bool fourBitScheme = hasFourBitWeights(*parsed);
    const bool int8Inputs = hasInt8Inputs(*parsed);
    // int8-input schemes: dynamic or static scales; 16-bit ones: the type.
    std::string inputs = activations.empty()
                             ? std::string(int8Inputs ? "dynamic" : "f32")
                             : std::string(activations);
    const std::optional<Activations> kind = symbolizeActivations(inputs);
    const bool known = kind && (int8Inputs ? *kind == Activations::Dynamic ||
                                                 *kind == Activations::Static
                                           : *kind == Activations::F32 ||
                                                 *kind == Activations::BF16 ||
                                                 *kind == Activations::F16);
    if (!known) {
      module.emitError() << "spark-quantize-weights: activations '" << inputs
                         << "' does not apply to " << scheme << "; expected "
                         << (int8Inputs ? "dynamic or static"
                                        : "f32, bf16 or f16");
      return signalPassFailure();
    }
    if (!isSupportedBlock(groupSize)) {
      module.emitError() << "spark-quantize-weights: group-size "
                         << int64_t(groupSize)
                         << " is not supported; expected 32, 64, 128 or 256";
      return signalPassFailure();
    }
    if (activationBlock && (!int8Inputs || *kind == Activations::Static ||
                            !isSupportedBlock(activationBlock))) {
      module.emitError()
          << "spark-quantize-weights: activation-block "
          << int64_t(activationBlock)
          << " needs dynamic int8 activations (w8a8, w4a8) and a block of "
             "32, 64, 128 or 256";
      return signalPassFailure();
    }
    std::vector<RecipeRule> rules(recipe.size());
    for (size_t i = 0; i < recipe.size(); ++i)
      if (std::string e = parseRule(recipe[i], rules[i]); !e.empty()) {
        module.emitError() << "spark-quantize-weights: recipe rule '"
                           << recipe[i] << "': " << e;
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
    // 4-bit codes in groups along the input dimension: asymmetric (w4a16) or
    // symmetric, (code - 8) * scale (w4a8). A matrix whose rows do not split
    // into whole groups keeps int8 per output channel.
    const bool symmetric4 = int8Inputs; // w4a8-style codes with int8 inputs
    llvm::SetVector<WeightOp> quantized;
    for (WeightOp weight : weights) {
      if (weight.getQuant()) {
        quantized.insert(weight); // quantized before this pass
        continue;
      }
      auto type = weight.getTensorType();
      int bits = fourBitScheme ? 4 : 8;
      int64_t group = groupSize;
      for (RecipeRule &rule : rules)
        if (rule.pattern.match(weight.getSymName())) {
          rule.used = true;
          bits = rule.bits;
          group = rule.group ? rule.group : groupSize;
        }
      if (bits == 0)
        continue; // kept in the build's dtype, like the head-gate projection
      if (bits != 8 && type.getDimSize(1) % group != 0) {
        weight.emitWarning()
            << "spark-quantize-weights: " << weight.getSymName()
            << " has rows of " << type.getDimSize(1)
            << " values, not a multiple of the " << bits << "-bit group of "
            << group << ": kept at int8 per output channel (8 bits per weight)";
        bits = 8;
      }
      weight.setType(RankedTensorType::get(type.getShape(),
                                           IntegerType::get(context, bits)));
      // 6-bit codes (a wider grid, for the tied head) are asymmetric groups
      // whatever the inputs (w6a8 kernels take the zero points off through
      // each group's sum of input codes).
      weight.setQuantAttr(bits == 8 ? int8
                          : bits == 6
                              ? QuantAttr::get(context, 6, group, false)
                              : QuantAttr::get(context, 4, group, symmetric4));
      quantized.insert(weight);
    }
    for (const RecipeRule &rule : rules)
      if (!rule.used) {
        module.emitError()
            << "spark-quantize-weights: recipe rule '" << rule.text
            << "' matches no quantized weight; names are those of the fused "
               "IR, for example model.embedding.weight or "
               "model.layers.0.mlp.down_proj.weight";
        return signalPassFailure();
      }
    // The matrix products that read a quantized weight take quantized or
    // 16-bit inputs.
    SmallVector<Operation *> products;
    module.walk([&](Operation *op) {
      if (FlatSymbolRefAttr symbol = productWeight(op))
        if (auto weight = symbols.lookup<WeightOp>(symbol.getValue()))
          if (quantized.contains(weight))
            products.push_back(op);
    });
    // w8a16 / w4a16: the inputs rounded to bf16 or f16 (or left f32).
    if (!int8Inputs) {
      if (*kind == Activations::F32)
        return;
      Type type = *kind == Activations::BF16 ? Type(BFloat16Type::get(context))
                                             : Type(Float16Type::get(context));
      for (Operation *op : products)
        op->setAttr("input_type", TypeAttr::get(type));
      return;
    }
    // w8a8 / w4a8: int8 inputs, quantized per token at run time, or (static)
    // with one calibrated scale per op, never a made-up one.
    // With activation-block = B, one scale per token and block of B inputs
    // (a product whose K is not whole blocks keeps one scale per token).
    for (Operation *op : products) {
      int64_t k = cast<ShapedType>(op->getOperand(0).getType()).getDimSize(1);
      int64_t block = activationBlock && k % activationBlock == 0
                          ? int64_t(activationBlock)
                          : 0;
      op->setAttr("input_quant", QuantAttr::get(context, 8, block, true));
      if (*kind != Activations::Static)
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
