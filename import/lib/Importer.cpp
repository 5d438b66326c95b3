//===- Importer.cpp - build the spark module of a checkpoint --------------===//
#include "spark/Import/Importer.h"

#include "spark/Dialect/SparkOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace spark {

void registerImportDialects(MLIRContext &context) {
  context.loadDialect<SparkDialect, func::FuncDialect>();
}

namespace {

class ModuleBuilder {
public:
  ModuleBuilder(MLIRContext &context, const Checkpoint &checkpoint,
                const ImportOptions &options)
      : context(context), builder(&context), ckpt(checkpoint),
        config(checkpoint.config()), options(options) {}

  OwningOpRef<ModuleOp> build();

private:
  /// Declares `tensor` as a spark.weight (once) and returns its symbol.
  FlatSymbolRefAttr weight(const TensorView *tensor);
  RankedTensorType activation(int64_t features) {
    return RankedTensorType::get({ShapedType::kDynamic, features},
                                 builder.getF32Type());
  }
  RankedTensorType cacheType() {
    return RankedTensorType::get(
        {options.maxContext, config.numKVHeads, config.headDim},
        builder.getF32Type());
  }
  Value linear(Location loc, Value input, const TensorView *w) {
    return LinearOp::create(builder, loc, activation(w->shape[0]), input,
                            weight(w), QuantAttr(), FloatAttr(), FloatAttr(),
                            TypeAttr());
  }
  Value rmsNorm(Location loc, Value input, const TensorView *w) {
    if (!options.decomposed)
      return RMSNormOp::create(builder, loc, input.getType(), input, weight(w),
                               builder.getF64FloatAttr(config.rmsNormEps),
                               FloatAttr(), IntegerAttr());
    // x * rsqrt(mean(x^2) + eps) * w, one op per step.
    auto type = cast<RankedTensorType>(input.getType());
    auto column = RankedTensorType::get({type.getDimSize(0), 1},
                                        builder.getF32Type());
    auto scalar = RankedTensorType::get({1}, builder.getF32Type());
    Value squared = PowOp::create(builder, loc, type, input,
                                  builder.getF64FloatAttr(2.0));
    Value mean = MeanOp::create(builder, loc, column, squared);
    Value eps = ConstantOp::create(
        builder, loc, scalar,
        DenseElementsAttr::get(scalar, float(config.rmsNormEps)));
    Value shifted = AddOp::create(builder, loc, column, mean, eps);
    Value inverse = RsqrtOp::create(builder, loc, column, shifted);
    Value normalized = MulOp::create(builder, loc, type, input, inverse);
    Value scale = GetWeightOp::create(
        builder, loc, RankedTensorType::get({type.getDimSize(1)}, builder.getF32Type()),
        weight(w));
    return MulOp::create(builder, loc, type, normalized, scale);
  }
  Value geglu(Location loc, Value gate, Value up) {
    if (!options.decomposed)
      return GegluOp::create(builder, loc, gate.getType(), gate, up);
    Value activated = GeluOp::create(builder, loc, gate.getType(), gate,
                                     builder.getBoolAttr(false));
    return MulOp::create(builder, loc, gate.getType(), activated, up);
  }
  DictionaryAttr configAttr();

  MLIRContext &context;
  OpBuilder builder;
  const Checkpoint &ckpt;
  const ModelConfig &config;
  const ImportOptions &options;
  OpBuilder weightBuilder{&context};
  llvm::DenseMap<const TensorView *, FlatSymbolRefAttr> declared;
};

FlatSymbolRefAttr ModuleBuilder::weight(const TensorView *tensor) {
  auto [it, inserted] = declared.try_emplace(tensor);
  if (!inserted)
    return it->second;
  Type element = tensor->dtype == DType::F32   ? Type(builder.getF32Type())
                 : tensor->dtype == DType::F16 ? Type(builder.getF16Type())
                                               : Type(builder.getBF16Type());
  auto type = RankedTensorType::get(tensor->shape, element);
  WeightOp::create(weightBuilder, NameLoc::get(builder.getStringAttr(tensor->name)),
                   builder.getStringAttr(tensor->name), TypeAttr::get(type),
                   builder.getStringAttr(ckpt.relativeFile(*tensor)),
                   QuantAttr(), ArrayAttr());
  it->second = FlatSymbolRefAttr::get(&context, tensor->name);
  return it->second;
}

DictionaryAttr ModuleBuilder::configAttr() {
  SmallVector<NamedAttribute> fields;
  auto add = [&](StringRef name, Attribute value) {
    fields.push_back(builder.getNamedAttr(name, value));
  };
  add("hidden_size", builder.getI64IntegerAttr(config.hiddenSize));
  add("intermediate_size", builder.getI64IntegerAttr(config.intermediateSize));
  add("num_hidden_layers", builder.getI64IntegerAttr(config.numLayers));
  add("num_attention_heads", builder.getI64IntegerAttr(config.numHeads));
  add("num_key_value_heads", builder.getI64IntegerAttr(config.numKVHeads));
  add("head_dim", builder.getI64IntegerAttr(config.headDim));
  add("sliding_window", builder.getI64IntegerAttr(config.slidingWindow));
  add("vocab_size", builder.getI64IntegerAttr(config.vocabSize));
  add("rms_norm_eps", builder.getF64FloatAttr(config.rmsNormEps));
  add("tie_word_embeddings", builder.getBoolAttr(config.tieWordEmbeddings));
  add("headwise_attn_output_gate", builder.getBoolAttr(config.headwiseGate));
  return builder.getDictionaryAttr(fields);
}

OwningOpRef<ModuleOp> ModuleBuilder::build() {
  Location unknown = builder.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(unknown);
  (*module)->setAttr("spark.config", configAttr());
  (*module)->setAttr("spark.max_context",
                     builder.getI64IntegerAttr(options.maxContext));
  weightBuilder.setInsertionPointToEnd(module->getBody());

  // step(ids, positions, k_cache_0, v_cache_0, ...) -> (logits, caches...)
  auto tokens = RankedTensorType::get({ShapedType::kDynamic},
                                      builder.getI32Type());
  SmallVector<Type> inputs = {tokens, tokens};
  SmallVector<Type> results = {activation(config.vocabSize)};
  for (int64_t i = 0; i < 2 * config.numLayers; ++i) {
    inputs.push_back(cacheType());
    results.push_back(cacheType());
  }
  // Functions go after all weight declarations: insert the step first, then
  // keep declaring weights in front of it.
  builder.setInsertionPointToEnd(module->getBody());
  auto step = func::FuncOp::create(builder, unknown, "step",
                                   builder.getFunctionType(inputs, results));
  weightBuilder.setInsertionPoint(step);
  Block *body = step.addEntryBlock();
  builder.setInsertionPointToStart(body);
  Value ids = body->getArgument(0), positions = body->getArgument(1);

  Location embedLoc = NameLoc::get(builder.getStringAttr("model.embedding"));
  Value h = EmbedOp::create(builder, embedLoc, activation(config.hiddenSize),
                            ids, weight(&ckpt.embedding()));
  const int64_t q = config.numHeads * config.headDim,
                kv = config.numKVHeads * config.headDim;
  SmallVector<Value> caches;
  for (auto [i, layer] : llvm::enumerate(ckpt.layers())) {
    Location loc = FusedLoc::get(
        {NameLoc::get(
            builder.getStringAttr(llvm::formatv("model.layers.{0}", i).str()))},
        LayerAttr::get(builder.getContext(), int64_t(i)), builder.getContext());
    LayerType type = config.layerTypes[i];
    Value kCache = body->getArgument(2 + 2 * i),
          vCache = body->getArgument(3 + 2 * i);

    Value x = rmsNorm(loc, h, layer.inputNorm);
    Value qv, kv_, vv;
    if (layer.qkv) {
      Value qkv = linear(loc, x, layer.qkv);
      auto split = SplitOp::create(
          builder, loc, TypeRange{activation(q), activation(kv), activation(kv)},
          qkv, builder.getDenseI64ArrayAttr({q, kv, kv}));
      qv = split.getResult(0);
      kv_ = split.getResult(1);
      vv = split.getResult(2);
    } else {
      qv = linear(loc, x, layer.q);
      kv_ = linear(loc, x, layer.k);
      vv = linear(loc, x, layer.v);
    }
    auto rope = [&](Value input, int64_t heads) -> Value {
      return RopeOp::create(
          builder, loc, input.getType(), input, positions,
          builder.getI64IntegerAttr(heads),
          builder.getI64IntegerAttr(config.headDim),
          builder.getI64IntegerAttr(config.rotaryDim(type)),
          builder.getF64FloatAttr(config.rope(type).theta),
          FlatSymbolRefAttr());
    };
    qv = rope(qv, config.numHeads);
    kv_ = rope(kv_, config.numKVHeads);
    bool sliding = type == LayerType::Sliding;
    auto linearLayout = CacheLayoutAttr::get(&context, CacheLayout::Linear);
    Value attn = AttentionOp::create(
        builder, loc, activation(q), qv, kv_, vv, kCache, vCache, positions,
        /*gate=*/Value(),
        AttentionKindAttr::get(&context, sliding ? AttentionKind::Sliding
                                                 : AttentionKind::Full),
        linearLayout, builder.getI64IntegerAttr(config.numHeads),
        builder.getI64IntegerAttr(config.numKVHeads),
        builder.getI64IntegerAttr(config.headDim),
        sliding ? builder.getI64IntegerAttr(config.slidingWindow)
                : IntegerAttr(),
        builder.getF64FloatAttr(1.0 / std::sqrt(double(config.headDim))));
    caches.push_back(KVWriteOp::create(builder, loc, kCache.getType(), kCache,
                                       kv_, positions, linearLayout));
    caches.push_back(KVWriteOp::create(builder, loc, vCache.getType(), vCache,
                                       vv, positions, linearLayout));
    if (layer.attnGate) {
      Value gate = linear(loc, x, layer.attnGate);
      attn = HeadGateOp::create(builder, loc, attn.getType(), attn, gate,
                                builder.getI64IntegerAttr(config.numHeads));
    }
    Value projected = linear(loc, attn, layer.out);
    h = AddOp::create(builder, loc, h.getType(), h, projected);

    Value x2 = rmsNorm(loc, h, layer.postNorm);
    Value gate, up;
    if (layer.gateUp) {
      Value both = linear(loc, x2, layer.gateUp);
      int64_t inter = config.intermediateSize;
      auto split = SplitOp::create(
          builder, loc, TypeRange{activation(inter), activation(inter)}, both,
          builder.getDenseI64ArrayAttr({inter, inter}));
      gate = split.getResult(0);
      up = split.getResult(1);
    } else {
      gate = linear(loc, x2, layer.gate);
      up = linear(loc, x2, layer.up);
    }
    Value mlp = geglu(loc, gate, up);
    h = AddOp::create(builder, loc, h.getType(), h,
                      linear(loc, mlp, layer.down));
  }
  Location headLoc = NameLoc::get(builder.getStringAttr("model.norm"));
  Value normed = rmsNorm(headLoc, h, &ckpt.finalNorm());
  Value logits = LogitsOp::create(builder, headLoc,
                                  activation(config.vocabSize), normed,
                                  weight(&ckpt.outputHead()), QuantAttr(),
                                  FloatAttr(), FloatAttr(), TypeAttr());
  SmallVector<Value> returned = {logits};
  returned.append(caches);
  func::ReturnOp::create(builder, unknown, returned);
  return module;
}

} // namespace

OwningOpRef<ModuleOp> importCheckpoint(MLIRContext &context,
                                       const Checkpoint &checkpoint,
                                       const ImportOptions &options) {
  registerImportDialects(context);
  OwningOpRef<ModuleOp> module =
      ModuleBuilder(context, checkpoint, options).build();
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

} // namespace spark
