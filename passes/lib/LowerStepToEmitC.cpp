//===- LowerStepToEmitC.cpp - a plan's step as an EmitC function ----------===//
//
// Lowers the spark_kernel.step of each spark_kernel.plan to `emitc.func
// @step`, the step function of the model ABI (runtime/include/spark/
// model_abi.h), which MLIR's C emitter prints into the generated driver.
// The function calls the fixed helpers of targets/common/lib/
// driver_support.h and, for the plan's i-th kernel, the driver's dispatch
// function spark_kernel_<i> with the ISA variant the driver chose for the
// CPU (`select_variant()`).
//
//===----------------------------------------------------------------------===//
#include "spark/Dialect/KernelOps.h"
#include "spark/Passes/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

namespace spark {
#define GEN_PASS_DEF_SPARKLOWERSTEPTOEMITC
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

/// What a view's memref says: element offset, inner-first extents and
/// strides, and the row stride of a dynamic outermost (rows) dimension.
struct Layout {
  int64_t offset = 0, rowStride = 0;
  bool hasRows = false;
  SmallVector<int64_t> extents, strides;
};

Layout layoutOf(MemRefType type) {
  Layout l;
  SmallVector<int64_t> strides;
  (void)type.getStridesAndOffset(strides, l.offset);
  for (size_t i = type.getRank(); i-- > 0;) {
    if (type.isDynamicDim(i)) {
      l.hasRows = true;
      l.rowStride = strides[i];
      continue;
    }
    l.extents.push_back(type.getDimSize(i));
    l.strides.push_back(strides[i]);
  }
  return l;
}

/// The halide_type_code_t enumerator (HalideRuntime.h, which the driver
/// includes through driver_support.h) and bits of a view's elements; 4-bit
/// codes are stored as bytes.
std::pair<StringRef, int> halideTypeOf(Type element) {
  if (element.isBF16())
    return {"halide_type_bfloat", 16};
  if (isa<FloatType>(element))
    return {"halide_type_float", int(element.getIntOrFloatBitWidth())};
  auto integer = cast<IntegerType>(element);
  const int bits = std::max(8u, integer.getWidth());
  return {integer.isUnsigned() ? "halide_type_uint" : "halide_type_int", bits};
}

class StepLowering {
public:
  StepLowering(kernel::PlanOp plan, ImplicitLocOpBuilder &b)
      : plan(plan), b(b), ctx(b.getContext()), i32(b.getI32Type()),
        i64(b.getI64Type()), symbols(plan) {}

  LogicalResult lower();

private:
  Type opaque(StringRef text) { return emitc::OpaqueType::get(ctx, text); }
  Type pointer(Type to) { return emitc::PointerType::get(to); }
  Type pointer(StringRef to) { return pointer(opaque(to)); }
  Type lvalue(Type of) { return emitc::LValueType::get(of); }

  /// An integer as a literal, which the C emitter writes in place (a
  /// constant outside an expression would become a variable).
  Value constant(Type type, int64_t value) {
    return literal(type, std::to_string(value));
  }
  Value i32c(int64_t value) { return constant(i32, value); }
  Value literal(Type type, StringRef text) {
    return emitc::LiteralOp::create(b, type, b.getStringAttr(text));
  }
  Value call(Type result, StringRef callee, ValueRange operands) {
    return emitc::CallOpaqueOp::create(
               b, result ? TypeRange(result) : TypeRange(), callee, operands)
        ->getResults()
        .front();
  }
  void callVoid(StringRef callee, ValueRange operands) {
    emitc::CallOpaqueOp::create(b, TypeRange(), callee, operands);
  }
  Value cmp(emitc::CmpPredicate predicate, Value lhs, Value rhs) {
    return emitc::CmpOp::create(b, b.getI1Type(),
                                emitc::CmpPredicateAttr::get(ctx, predicate),
                                lhs, rhs);
  }
  Value load(Value lv) {
    return emitc::LoadOp::create(
        b, cast<emitc::LValueType>(lv.getType()).getValueType(), lv);
  }
  /// `pointer + index * scale` as pointer arithmetic on 64-bit offsets
  /// (`base` when `index` is null, row 0).
  Value offset(Value base, Value index, int64_t scale) {
    if (!index)
      return base;
    Value wide = emitc::CastOp::create(b, i64, index);
    Value scaled = emitc::MulOp::create(b, i64, wide, constant(i64, scale));
    return emitc::AddOp::create(b, base.getType(), base, scaled);
  }
  Value offset(Value base, int64_t elements) {
    if (elements == 0)
      return base;
    return emitc::AddOp::create(b, base.getType(), base,
                                constant(i64, elements));
  }

  /// `rc == 0`, and more: the guard of every call after the first failure.
  Value ok() { return cmp(emitc::CmpPredicate::eq, load(rc), i32c(0)); }

  void comment(const Twine &text) {
    emitc::VerbatimOp::create(b, b.getStringAttr("/* " + text + " */"));
  }

  /// pointers[index], of the step's weight or cache pointers.
  Value pointerAt(Value pointers, int index) {
    return load(emitc::SubscriptOp::create(
        b, cast<TypedValue<emitc::PointerType>>(pointers), i32c(index)));
  }

  /// The host pointer of a view of `rows` rows from row `first` (null:
  /// row 0).
  FailureOr<Value> host(kernel::ViewOp v, const Layout &l, Value first) {
    switch (v.getBase()) {
    case kernel::Buffer::Arena:
      return offset(offset(arena, l.offset), first, l.rowStride);
    case kernel::Buffer::Weight:
    case kernel::Buffer::Cache: {
      const bool weight = v.getBase() == kernel::Buffer::Weight;
      const llvm::StringMap<int> &index =
          weight ? symbols.tensorIndex : symbols.cacheIndex;
      auto it = index.find(*v.getSource());
      if (it == index.end())
        return v.emitOpError("names no spark_kernel.")
               << (weight ? "tensor" : "cache") << " of the plan";
      Value base = pointerAt(weight ? weights : caches, it->second);
      if (l.offset == 0)
        return base;
      // Inside a tensor's rows (the scales of grouped 4-bit rows): a byte
      // offset from its start.
      const int64_t bytes =
          std::max<int64_t>(1, v.getType().getElementTypeBitWidth() / 8);
      Value bytePointer =
          emitc::CastOp::create(b, pointer("const uint8_t"), base);
      return offset(bytePointer, l.offset * bytes);
    }
    case kernel::Buffer::Tokens:
      if (!first)
        return tokens;
      return emitc::AddOp::create(b, tokens.getType(), tokens, first)
          .getResult();
    case kernel::Buffer::Logits:
      return offset(logits, l.offset);
    }
    return v.emitOpError("has an unknown base");
  }

  /// spark_view(&views[slot], host, code, bits, rank, e0, s0, ..., e3, s3).
  FailureOr<Value> view(kernel::ViewOp v, Value views, int slot, Value rows,
                        Value first) {
    const Layout l = layoutOf(v.getType());
    FailureOr<Value> hostPointer = host(v, l, first);
    if (failed(hostPointer))
      return failure();
    auto [code, bits] = halideTypeOf(v.getType().getElementType());
    SmallVector<Value> extentsAndStrides;
    for (size_t i = 0; i < l.extents.size(); ++i) {
      extentsAndStrides.push_back(i32c(l.extents[i]));
      extentsAndStrides.push_back(i32c(l.strides[i]));
    }
    if (l.hasRows) {
      extentsAndStrides.push_back(rows);
      extentsAndStrides.push_back(i32c(l.rowStride));
    }
    const int64_t rank = int64_t(extentsAndStrides.size() / 2);
    if (rank > 4)
      return v.emitOpError("has ")
             << rank << " dimensions; a kernel view has at most 4";
    while (extentsAndStrides.size() < 8)
      extentsAndStrides.push_back(i32c(0));
    Value element = emitc::SubscriptOp::create(
        b, cast<TypedValue<emitc::ArrayType>>(views), ValueRange{i32c(slot)});
    Value address =
        emitc::AddressOfOp::create(b, pointer("spark_view_t"), element);
    SmallVector<Value> operands{address, *hostPointer, literal(i32, code),
                                i32c(bits), i32c(rank)};
    operands.append(extentsAndStrides);
    return call(pointer("halide_buffer_t"), "spark_view", operands);
  }

  /// A scalar operand: pos0, min(pos0, slots), or a float constant.
  FailureOr<Value> scalar(kernel::CallOp op, Value v) {
    if (isa<BlockArgument>(v))
      return pos0;
    if (auto min = v.getDefiningOp<arith::MinSIOp>()) {
      auto bound = min.getRhs().getDefiningOp<arith::ConstantOp>();
      if (!isa<BlockArgument>(min.getLhs()) || !bound)
        return op.emitOpError("takes a minimum other than min(pos0, constant)");
      const int64_t slots = cast<IntegerAttr>(bound.getValue()).getInt();
      Value less = cmp(emitc::CmpPredicate::lt, pos0, i32c(slots));
      return emitc::ConditionalOp::create(b, i32, less, pos0, i32c(slots))
          .getResult();
    }
    if (auto c = v.getDefiningOp<arith::ConstantOp>())
      if (auto f = dyn_cast<FloatAttr>(c.getValue()))
        return emitc::ConstantOp::create(b, f.getType(), f).getResult();
    return op.emitOpError("has a scalar operand the driver cannot compute");
  }

  /// rc = spark_kernel_<i>(variant, views and scalars...).
  LogicalResult callKernel(kernel::CallOp op, StringRef kernel, Value views,
                           Value rows, Value first) {
    auto it = symbols.kernelIndex.find(kernel);
    if (it == symbols.kernelIndex.end())
      return op.emitOpError("calls @") << kernel << ", no kernel of the plan";
    SmallVector<Value> operands;
    operands.push_back(load(variant));
    for (auto [i, operand] : llvm::enumerate(op.getOperands())) {
      FailureOr<Value> value =
          operand.getDefiningOp<kernel::ViewOp>()
              ? view(operand.getDefiningOp<kernel::ViewOp>(), views, int(i),
                     rows, first)
              : scalar(op, operand);
      if (failed(value))
        return failure();
      operands.push_back(*value);
    }
    emitc::AssignOp::create(
        b, rc, call(i32, kernelDispatchName(it->second), operands));
    return success();
  }

  /// `if (cond) { then } [else { otherwise }]`, the branches emitted by the
  /// callbacks (no else branch when `otherwise` is null).
  LogicalResult ifThenElse(Value cond, function_ref<LogicalResult()> then,
                           function_ref<LogicalResult()> otherwise = nullptr) {
    auto ifOp = emitc::IfOp::create(b, cond, /*addThenBlock=*/false,
                                    /*addElseBlock=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(b.createBlock(&ifOp.getThenRegion()));
    if (failed(then()))
      return failure();
    emitc::YieldOp::create(b);
    if (!otherwise)
      return success();
    b.setInsertionPointToEnd(b.createBlock(&ifOp.getElseRegion()));
    if (failed(otherwise()))
      return failure();
    emitc::YieldOp::create(b);
    return success();
  }

  /// The profile clock before a call.
  Value profileBegin() {
    return call(b.getIntegerType(64, /*isSigned=*/false), "spark_profile_begin",
                hooks);
  }

  LogicalResult lowerCall(kernel::CallOp op, int64_t index);
  LogicalResult lowerCacheWrite(kernel::CacheWriteOp op, int64_t index);

  kernel::PlanOp plan;
  ImplicitLocOpBuilder &b;
  MLIRContext *ctx;
  Type i32, i64;
  kernel::PlanSymbols symbols;
  // The step's arguments and locals.
  Value weights, caches, arena, tokens, pos0, n, nLogits, logits;
  Value variant, hooks, rc, headRow;
};

LogicalResult StepLowering::lowerCall(kernel::CallOp op, int64_t index) {
  const bool headRows = op.getHeadRows();
  Value rows = headRows ? nLogits : n;
  Value first = headRows ? headRow : Value(); // null: row 0
  auto name = dyn_cast<NameLoc>(op.getLoc());
  comment(llvm::formatv("{0}: {1}", index,
                        name ? name.getName().str() : op.getKernel().str()));
  Value cond = ok();
  if (headRows)
    cond = emitc::LogicalAndOp::create(
        b, b.getI1Type(), cond, cmp(emitc::CmpPredicate::gt, nLogits, i32c(0)));
  return ifThenElse(cond, [&]() -> LogicalResult {
    Value started = profileBegin();
    if (std::optional<int64_t> probe = op.getProbeInput()) {
      // Calibration builds: the matrix product's input.
      auto input = op.getOperands().front().getDefiningOp<kernel::ViewOp>();
      const Layout l = layoutOf(input.getType());
      FailureOr<Value> x = host(input, l, first);
      if (failed(x))
        return failure();
      callVoid("spark_probe", {hooks, i32c(*probe), rows,
                               i32c(l.extents.front()), *x, i32c(l.rowStride)});
    }
    const int64_t operands = int64_t(op.getOperands().size());
    Value views = emitc::VariableOp::create(
        b, emitc::ArrayType::get({operands}, opaque("spark_view_t")),
        emitc::OpaqueAttr::get(ctx, ""));
    if (std::optional<StringRef> decode = op.getDecode()) {
      // Matrix kernels: the GEMV for one row; the blocked GEMM for more, on
      // the rows rounded up to kPrefillRowMultiple (arena values have room
      // for max_rows rows).
      const int64_t multiple = kPrefillRowMultiple;
      if (failed(ifThenElse(
              cmp(emitc::CmpPredicate::eq, rows, i32c(1)),
              [&] { return callKernel(op, *decode, views, rows, first); },
              [&] {
                Value up =
                    emitc::AddOp::create(b, i32, rows, i32c(multiple - 1));
                Value whole = emitc::DivOp::create(b, i32, up, i32c(multiple));
                Value rounded =
                    emitc::MulOp::create(b, i32, whole, i32c(multiple));
                return callKernel(op, op.getKernel(), views, rounded, first);
              })))
        return failure();
    } else if (failed(callKernel(op, op.getKernel(), views, rows, first))) {
      return failure();
    }
    return ifThenElse(ok(), [&]() -> LogicalResult {
      callVoid("spark_profile_end", {hooks, i32c(index), started});
      if (std::optional<int64_t> layer = op.getProbeLayer()) {
        const Layout l =
            layoutOf(cast<MemRefType>(op.getOperands().back().getType()));
        callVoid("spark_probe",
                 {hooks, i32c(*layer), n, i32c(l.extents.front()),
                  offset(arena, l.offset), i32c(l.rowStride)});
      }
      return success();
    });
  });
}

LogicalResult StepLowering::lowerCacheWrite(kernel::CacheWriteOp op,
                                            int64_t index) {
  auto it = symbols.cacheIndex.find(op.getCache());
  if (it == symbols.cacheIndex.end())
    return op.emitOpError("names no spark_kernel.cache of the plan");
  kernel::CacheOp cache = symbols.caches.lookup(op.getCache());
  MemRefType type = cast<MemRefType>(cache.getType());
  const int64_t slots = type.getDimSize(0);
  const Layout l = layoutOf(op.getSource().getType());
  Type element = type.getElementType();
  const char *dtype = element.isBF16()  ? "SPARK_DTYPE_BF16"
                      : element.isF16() ? "SPARK_DTYPE_F16"
                      : element.isF32() ? "SPARK_DTYPE_F32"
                                        : nullptr;
  if (!dtype)
    return cache.emitOpError("has elements of ")
           << element << "; a cache holds f32, bf16 or f16";
  comment(llvm::formatv(
      "{0}: {1} -> cache {2} ({3}, {4} slots)", index,
      isa<NameLoc>(op.getLoc()) ? cast<NameLoc>(op.getLoc()).getName().str()
                                : std::string("cache_write"),
      it->second, cache.getRing() ? "ring" : "linear", slots));
  return ifThenElse(ok(), [&]() -> LogicalResult {
    Value started = profileBegin();
    callVoid("spark_cache_write",
             {pointerAt(caches, it->second), literal(i32, dtype),
              i32c(cache.getRing() ? slots : 0), i32c(l.extents.front()),
              offset(arena, l.offset), i32c(l.rowStride), pos0, n});
    callVoid("spark_profile_end", {hooks, i32c(index), started});
    return success();
  });
}

LogicalResult StepLowering::lower() {
  kernel::StepOp step = symbols.step;
  if (!step)
    return plan.emitOpError("has no spark_kernel.step to lower");

  // int step(const void *const *weights, void *const *caches, void *arena,
  //          const int32_t *ids, int32_t pos0, int32_t n, int32_t n_logits,
  //          float *logits), as model_abi.h declares it.
  Type f32Pointer = pointer(b.getF32Type());
  auto type = b.getFunctionType(
      {pointer("const void *const"), pointer("void *const"), pointer("void"),
       pointer("const int32_t"), i32, i32, i32, f32Pointer},
      {i32});
  auto func = emitc::FuncOp::create(b, "step", type);
  func.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
  Block *entry = func.addEntryBlock();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(entry);
  weights = entry->getArgument(0);
  caches = entry->getArgument(1);
  tokens = entry->getArgument(3);
  pos0 = entry->getArgument(4);
  n = entry->getArgument(5);
  nLogits = entry->getArgument(6);
  logits = entry->getArgument(7);
  arena = emitc::CastOp::create(b, f32Pointer, entry->getArgument(2));

  variant = emitc::VariableOp::create(b, lvalue(i32),
                                      emitc::OpaqueAttr::get(ctx, ""));
  emitc::AssignOp::create(b, variant, call(i32, "select_variant", {}));
  Value hookVar = emitc::VariableOp::create(b, lvalue(opaque("spark_hooks")),
                                            emitc::OpaqueAttr::get(ctx, ""));
  emitc::AssignOp::create(b, hookVar,
                          call(opaque("spark_hooks"), "spark_load_hooks", {}));
  hooks = emitc::AddressOfOp::create(b, pointer("spark_hooks"), hookVar);
  rc = emitc::VariableOp::create(b, lvalue(i32), b.getI32IntegerAttr(0));
  emitc::AssignOp::create(
      b, rc,
      call(i32, "spark_check_step",
           {load(variant), pos0, n, nLogits, i32c(plan.getMaxChunk()),
            i32c(plan.getMaxContext())}));
  headRow = emitc::SubOp::create(b, i32, n, nLogits);

  int64_t index = 0;
  WalkResult result = step.walk([&](Operation *op) {
    LogicalResult lowered = success();
    if (auto c = dyn_cast<kernel::CallOp>(op))
      lowered = lowerCall(c, index++);
    else if (auto w = dyn_cast<kernel::CacheWriteOp>(op))
      lowered = lowerCacheWrite(w, index++);
    return failed(lowered) ? WalkResult::interrupt() : WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  emitc::ReturnOp::create(b, load(rc));
  return success();
}

struct LowerStepToEmitC
    : spark::impl::SparkLowerStepToEmitCBase<LowerStepToEmitC> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<kernel::PlanOp> plans(module.getOps<kernel::PlanOp>());
    if (plans.size() != 1) {
      module.emitError() << "spark-lower-step-to-emitc: needs one "
                            "spark_kernel.plan in the module, found "
                         << plans.size();
      return signalPassFailure();
    }
    if (SymbolTable::lookupSymbolIn(module, "step")) {
      module.emitError() << "spark-lower-step-to-emitc: the module already "
                            "holds a symbol @step";
      return signalPassFailure();
    }
    ImplicitLocOpBuilder b(plans.front().getLoc(), module.getBody(),
                           module.getBody()->end());
    if (failed(StepLowering(plans.front(), b).lower()))
      return signalPassFailure();
  }
};

} // namespace
