//===- PlanIR.cpp - a model plan as spark_kernel IR -----------------------===//
#include "spark/Codegen/PlanIR.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;

namespace spark {
namespace {

/// Grouped codes (stored in U8 tensors) are `ui4` or `ui6` in a spec
/// (`codeBits`; 0: bytes).
Type elementType(MLIRContext *context, DType type, int64_t codeBits = 0) {
  switch (type) {
  case DType::F32:
    return Float32Type::get(context);
  case DType::F16:
    return Float16Type::get(context);
  case DType::BF16:
    return BFloat16Type::get(context);
  case DType::I8:
    return IntegerType::get(context, 8);
  case DType::U8:
    return IntegerType::get(context, codeBits ? unsigned(codeBits) : 8u,
                            IntegerType::Unsigned);
  }
  return Float32Type::get(context);
}

FloatAttr optionalFloat(MLIRContext *context, double value) {
  return value != 0.0 ? FloatAttr::get(Float64Type::get(context), value)
                      : FloatAttr();
}

double floatOr0(FloatAttr attr) { return attr ? attr.getValueAsDouble() : 0.0; }

/// The memref a view is: dims outermost first (the rows, dynamic, first),
/// the identity layout where the strides are row-major and the offset 0.
MemRefType viewType(MLIRContext *context, const View &v, Type element,
                    int64_t offset) {
  SmallVector<int64_t> shape, strides;
  if (v.hasRows) {
    shape.push_back(ShapedType::kDynamic);
    strides.push_back(v.rowStride);
  }
  for (size_t i = v.extents.size(); i-- > 0;) {
    shape.push_back(v.extents[i]);
    strides.push_back(v.strides[i]);
  }
  bool identity = offset == 0;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0 && identity;) {
    identity = strides[i] == expected;
    expected *= shape[i];
  }
  if (identity)
    return MemRefType::get(shape, element);
  return MemRefType::get(shape, element,
                         StridedLayoutAttr::get(context, offset, strides));
}

class Builder {
public:
  Builder(const ModelPlan &plan, MLIRContext &context)
      : plan(plan), context(context), b(&context) {}

  OwningOpRef<ModuleOp> build() {
    Location loc = UnknownLoc::get(&context);
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    auto planOp =
        kernel::PlanOp::create(b, loc, b.getI64IntegerAttr(plan.arenaFloats),
                               b.getI64IntegerAttr(plan.options.maxChunk),
                               b.getI64IntegerAttr(arenaRows(
                                   plan.options.maxChunk, kPrefillRowMultiple)),
                               b.getI64IntegerAttr(plan.options.maxContext));
    b.setInsertionPointToEnd(&planOp.getBody().emplaceBlock());
    for (const KernelSpec &spec : plan.kernels)
      kernels.push_back(kernel::KernelOp::create(b, loc, spec.name(),
                                                 specAttr(&context, spec))
                            .getSymName()
                            .str());
    for (const PackTensor &t : plan.tensors) {
      auto type =
          RankedTensorType::get(t.shape, elementType(&context, t.dtype));
      kernel::TensorOp::create(
          b, loc, b.getStringAttr(t.name), TypeAttr::get(type),
          b.getI64IntegerAttr(t.layout), b.getI64IntegerAttr(t.group),
          t.group > 0 && t.symmetricGroups ? b.getUnitAttr() : UnitAttr());
    }
    for (size_t i = 0; i < plan.caches.size(); ++i) {
      const CacheSpec &c = plan.caches[i];
      caches.push_back(cacheName(c));
      auto type = MemRefType::get({c.slots, c.kvHeads, c.headDim},
                                  elementType(&context, c.dtype));
      kernel::CacheOp::create(b, loc, caches.back(), type, c.layer, !c.keys,
                              c.ring);
    }
    auto step = kernel::StepOp::create(b, loc);
    Block &body = step.getBody().emplaceBlock();
    pos0 = body.addArgument(b.getI32Type(), loc);
    b.setInsertionPointToEnd(&body);
    for (const Step &s : plan.steps)
      emit(s);
    return module;
  }

private:
  std::string cacheName(const CacheSpec &c) {
    return llvm::formatv("layer{0}.{1}", c.layer, c.keys ? "keys" : "values")
        .str();
  }

  Value view(const View &v) {
    Location loc = b.getUnknownLoc();
    Type element = v.isInt32 ? b.getI32Type() : elementType(&context, v.type);
    kernel::Buffer base = kernel::Buffer::Arena;
    FlatSymbolRefAttr source;
    int64_t offset = v.column;
    switch (v.base) {
    case View::Base::Arena:
      offset += plan.arena[v.index].offset;
      break;
    case View::Base::Weight:
      base = kernel::Buffer::Weight;
      source = FlatSymbolRefAttr::get(&context, plan.tensors[v.index].name);
      break;
    case View::Base::Cache:
      base = kernel::Buffer::Cache;
      source = FlatSymbolRefAttr::get(&context, caches[v.index]);
      break;
    case View::Base::Tokens:
      base = kernel::Buffer::Tokens;
      break;
    case View::Base::Logits:
      base = kernel::Buffer::Logits;
      break;
    }
    MemRefType type = viewType(&context, v, element, offset);
    return kernel::ViewOp::create(b, loc, type, base, source);
  }

  Value scalar(const Step::Arg &a) {
    Location loc = b.getUnknownLoc();
    switch (a.kind) {
    case Step::Arg::Kind::Position:
      return pos0;
    case Step::Arg::Kind::CachedRows: {
      Value bound = arith::ConstantIntOp::create(b, loc, a.bound, 32);
      return arith::MinSIOp::create(b, loc, pos0, bound);
    }
    case Step::Arg::Kind::Float:
      return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                            APFloat(a.value));
    case Step::Arg::Kind::View:
      break;
    }
    return view(a.view);
  }

  void emit(const Step &s) {
    Location loc = NameLoc::get(b.getStringAttr(s.comment));
    if (s.kind == Step::Kind::CacheWrite) {
      kernel::CacheWriteOp::create(
          b, loc, view(s.source),
          FlatSymbolRefAttr::get(&context, caches[s.cache]));
      return;
    }
    SmallVector<Value> operands;
    for (const Step::Arg &a : s.args)
      operands.push_back(scalar(a));
    kernel::CallOp::create(
        b, loc, FlatSymbolRefAttr::get(&context, kernels[s.kernel]),
        s.decodeKernel >= 0
            ? FlatSymbolRefAttr::get(&context, kernels[s.decodeKernel])
            : FlatSymbolRefAttr(),
        operands, s.layer >= 0 ? b.getI64IntegerAttr(s.layer) : IntegerAttr(),
        s.headRows ? b.getUnitAttr() : UnitAttr(),
        s.probeLayer >= 0 ? b.getI64IntegerAttr(s.probeLayer) : IntegerAttr(),
        s.probeInput >= 0 ? b.getI64IntegerAttr(s.probeInput) : IntegerAttr());
  }

  const ModelPlan &plan;
  MLIRContext &context;
  OpBuilder b;
  std::vector<std::string> kernels, caches;
  Value pos0;
};

} // namespace

DType elementDType(Type type) {
  if (type.isBF16())
    return DType::BF16;
  if (type.isF16())
    return DType::F16;
  if (type.isSignlessInteger(8))
    return DType::I8;
  if (type.isUnsignedInteger())
    return DType::U8;
  return DType::F32;
}

kernel::SpecAttr specAttr(MLIRContext *context, const KernelSpec &spec) {
  context->getOrLoadDialect<kernel::KernelDialect>();
  auto phase = spec.phase == Phase::Decode    ? kernel::Phase::Decode
               : spec.phase == Phase::Prefill ? kernel::Phase::Prefill
                                              : kernel::Phase::Any;
  return kernel::SpecAttr::get(
      context, kernel::Kind(int(spec.kind)), phase,
      elementType(context, spec.weightType, spec.group > 0 ? spec.codeBits : 0),
      spec.in, spec.out, optionalFloat(context, spec.epsilon),
      optionalFloat(context, spec.scale), optionalFloat(context, spec.theta),
      spec.heads, spec.kvHeads, spec.headDim, spec.rotaryDim, spec.window,
      spec.slots, spec.block, spec.group, spec.symmetricGroups, spec.rowBytes,
      spec.inputBits, spec.inputBlock, elementType(context, spec.inputType),
      spec.ring, spec.gated, kernel::Elementwise(int(spec.op)),
      optionalFloat(context, spec.parameter), spec.lhsWidth, spec.rhsWidth,
      spec.lhsRows, spec.rhsRows);
}

KernelSpec kernelSpec(kernel::SpecAttr attr) {
  KernelSpec spec;
  spec.kind = KernelKind(int(attr.getKind()));
  spec.phase = attr.getPhase() == kernel::Phase::Decode    ? Phase::Decode
               : attr.getPhase() == kernel::Phase::Prefill ? Phase::Prefill
                                                           : Phase::Any;
  spec.weightType = elementDType(attr.getWeightType());
  spec.in = attr.getIn();
  spec.out = attr.getOut();
  spec.epsilon = floatOr0(attr.getEpsilon());
  spec.scale = floatOr0(attr.getScale());
  spec.theta = floatOr0(attr.getTheta());
  spec.heads = attr.getHeads();
  spec.kvHeads = attr.getKvHeads();
  spec.headDim = attr.getHeadDim();
  spec.rotaryDim = attr.getRotaryDim();
  spec.window = attr.getWindow();
  spec.slots = attr.getSlots();
  spec.block = attr.getBlock();
  spec.group = attr.getGroup();
  if (spec.group > 0)
    spec.codeBits = attr.getWeightType().getIntOrFloatBitWidth();
  spec.symmetricGroups = attr.getSymmetric();
  spec.rowBytes = attr.getRowBytes();
  spec.inputBits = attr.getInputBits();
  spec.inputBlock = attr.getInputBlock();
  spec.inputType = elementDType(attr.getInputType());
  spec.ring = attr.getRing();
  spec.gated = attr.getGated();
  spec.op = ElementwiseOp(int(attr.getOp()));
  spec.parameter = floatOr0(attr.getParameter());
  spec.lhsWidth = attr.getLhsWidth();
  spec.rhsWidth = attr.getRhsWidth();
  spec.lhsRows = attr.getLhsRows();
  spec.rhsRows = attr.getRhsRows();
  return spec;
}

llvm::Expected<OwningOpRef<ModuleOp>> planToIR(const ModelPlan &plan,
                                               MLIRContext &context) {
  context.getOrLoadDialect<kernel::KernelDialect>();
  context.getOrLoadDialect<arith::ArithDialect>();
  OwningOpRef<ModuleOp> module = Builder(plan, context).build();
  std::string message;
  {
    llvm::raw_string_ostream os(message);
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      os << d << "\n";
      return success();
    });
    if (failed(verify(*module)))
      return llvm::createStringError(
          "the kernel plan fails its verifier (a compiler bug): " + message);
  }
  return module;
}

} // namespace spark
