//===- KernelOps.cpp - the spark_kernel dialect ---------------------------===//
#include "spark/Dialect/KernelOps.h"
#include "spark/model_abi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace spark::kernel;

#include "spark/Dialect/KernelDialect.cpp.inc"
#include "spark/Dialect/KernelEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "spark/Dialect/KernelAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "spark/Dialect/KernelOps.cpp.inc"

void KernelDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "spark/Dialect/KernelAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "spark/Dialect/KernelOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// The spec
//===----------------------------------------------------------------------===//

/// Grouped codes: 4-bit (`ui4`) or 6-bit (`ui6`).
static bool isGroupedCode(Type t) {
  return t.isUnsignedInteger(4) || t.isUnsignedInteger(6);
}

LogicalResult SpecAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, Kind kind, Phase phase,
    Type weightType, int64_t in, int64_t out, FloatAttr epsilon,
    FloatAttr scale, FloatAttr theta, int64_t heads, int64_t kvHeads,
    int64_t headDim, int64_t rotaryDim, int64_t window, int64_t slots,
    int64_t block, int64_t group, bool symmetric, int64_t rowBytes,
    int64_t inputBits, int64_t inputBlock, Type inputType, bool ring,
    bool gated, Elementwise op, FloatAttr parameter, int64_t lhsWidth,
    int64_t rhsWidth, bool lhsRows, bool rhsRows) {
  const StringRef name = stringifyKind(kind);
  auto positive = [&](int64_t v, StringRef field) -> LogicalResult {
    if (v > 0)
      return success();
    return emitError() << name << " kernel: `" << field
                       << "` must be positive, got " << v;
  };
  if (phase != Phase::Any && kind != Kind::Linear)
    return emitError() << name << " kernel: only linear kernels have a phase";
  if (!(weightType.isF32() || weightType.isBF16() || weightType.isF16() ||
        weightType.isSignlessInteger(8) || isGroupedCode(weightType)))
    return emitError() << name << " kernel: weight_type must be f32, bf16, "
                       << "f16, i8, ui4 or ui6, got " << weightType;
  if (isGroupedCode(weightType) != (group > 0))
    return emitError() << name << " kernel: ui4 or ui6 weights and a group "
                       << "size come together (weight_type " << weightType
                       << ", group " << group << ")";
  if (weightType.isUnsignedInteger(6) && (symmetric || rowBytes != 0))
    return emitError() << name << " kernel: ui6 weights are asymmetric, "
                       << "dense groups (no `symmetric`, no row_bytes)";
  if (group > 0 && in % group != 0)
    return emitError() << name << " kernel: group " << group
                       << " does not divide the input width " << in;
  if (symmetric && group == 0)
    return emitError() << name << " kernel: `symmetric` applies to ui4 "
                       << "weights only";
  if (rowBytes != 0) {
    // A grouped row: in/2 code bytes, then in/group f16 scales and (unless
    // symmetric) as many f16 zero points.
    const int64_t needed =
        group > 0 ? in / 2 + (in / group) * 2 * (symmetric ? 1 : 2) : 0;
    if (group == 0 || rowBytes < needed || rowBytes % 2 != 0)
      return emitError() << name << " kernel: row_bytes " << rowBytes
                         << " must be even and hold a ui4 row's codes, "
                         << "scales and zero points ("
                         << (group > 0 ? std::to_string(needed)
                                       : std::string("ui4 weights only"))
                         << ")";
  }
  switch (kind) {
  case Kind::Embed:
    return failure(failed(positive(in, "in")) || failed(positive(out, "out")));
  case Kind::Linear:
    if (failed(positive(in, "in")) || failed(positive(out, "out")))
      return failure();
    if (inputBits != 0 && inputBits != 8)
      return emitError() << "linear kernel: input_bits must be 0 or 8, got "
                         << inputBits;
    if (inputBlock != 0 && (inputBits != 8 || in % inputBlock != 0))
      return emitError() << "linear kernel: input_block " << inputBlock
                         << " needs int8 inputs and must divide " << in;
    if (!(inputType.isF32() || inputType.isBF16() || inputType.isF16()))
      return emitError() << "linear kernel: input_type must be f32, bf16 or "
                         << "f16, got " << inputType;
    return success();
  case Kind::RMSNorm:
    if (!epsilon || epsilon.getValueAsDouble() <= 0.0)
      return emitError() << "rms_norm kernel: needs a positive `epsilon`";
    return positive(in, "in");
  case Kind::Rope:
    if (failed(positive(heads, "heads")) ||
        failed(positive(headDim, "head_dim")) ||
        failed(positive(rotaryDim, "rotary_dim")) ||
        failed(positive(block, "block")) || failed(positive(out, "out")))
      return failure();
    if (rotaryDim > headDim || rotaryDim % 2 != 0)
      return emitError() << "rope kernel: rotary_dim " << rotaryDim
                         << " must be even and at most head_dim " << headDim;
    return success();
  case Kind::Attention:
    if (failed(positive(heads, "heads")) ||
        failed(positive(kvHeads, "kv_heads")) ||
        failed(positive(headDim, "head_dim")) ||
        failed(positive(slots, "slots")))
      return failure();
    if (heads % kvHeads != 0)
      return emitError() << "attention kernel: kv_heads " << kvHeads
                         << " must divide heads " << heads;
    if (!scale)
      return emitError() << "attention kernel: needs a `scale`";
    if (isGroupedCode(weightType) || weightType.isSignlessInteger(8))
      return emitError() << "attention kernel: cache elements must be f32, "
                         << "bf16 or f16, got " << weightType;
    return success();
  case Kind::HeadGate:
    return failure(failed(positive(heads, "heads")) ||
                   failed(positive(headDim, "head_dim")));
  case Kind::Unary:
    if (op == Elementwise::Add || op == Elementwise::Mul)
      return emitError() << "unary kernel: `" << stringifyElementwise(op)
                         << "` takes two operands";
    if ((op == Elementwise::Pow) != bool(parameter))
      return emitError() << "unary kernel: an exponent `parameter` is given "
                         << "exactly for pow";
    return positive(in, "in");
  case Kind::Binary:
    if (op != Elementwise::Add && op != Elementwise::Mul)
      return emitError() << "binary kernel: op must be add or mul, got "
                         << stringifyElementwise(op);
    return failure(failed(positive(in, "in")) ||
                   failed(positive(lhsWidth, "lhs_width")) ||
                   failed(positive(rhsWidth, "rhs_width")));
  case Kind::Geglu:
  case Kind::Mean:
    return positive(in, "in");
  }
  return success();
}

int64_t spark::kernel::operandCount(SpecAttr spec) {
  const bool quantized =
      spec.getWeightType().isSignlessInteger(8) || spec.getGroup() > 0;
  const bool zeros = spec.getGroup() > 0 && !spec.getSymmetric();
  switch (spec.getKind()) {
  case Kind::Embed: // ids, table, [scales], [zeros], out
    return 3 + quantized + zeros;
  case Kind::Linear: // x, w, [scales], [zeros], [input scale], out
    return 3 + quantized + zeros + (spec.getInputBits() == 8);
  case Kind::Rope: // x, four tables, pos0, out
    return 7;
  case Kind::Attention: // q, k, v, caches, [gate], pos0, cached rows, out
    return 8 + spec.getGated();
  case Kind::RMSNorm:
  case Kind::HeadGate:
  case Kind::Geglu:
  case Kind::Binary:
    return 3;
  case Kind::Unary:
  case Kind::Mean:
    return 2;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

/// The elements a view reaches past its offset, plus one, with `rows` rows
/// for a dynamic dimension: where its last element lies.
static FailureOr<int64_t> footprint(MemRefType type, int64_t rows,
                                    int64_t &offset) {
  SmallVector<int64_t> strides;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset))
    return failure();
  int64_t last = 0;
  for (auto [size, stride] : llvm::zip(type.getShape(), strides)) {
    if (ShapedType::isDynamic(stride) || stride < 0)
      return failure();
    const int64_t n = ShapedType::isDynamic(size) ? rows : size;
    if (n == 0)
      return int64_t(0);
    last += (n - 1) * stride;
  }
  return last + 1;
}

LogicalResult PlanOp::verifyRegions() {
  DenseMap<Attribute, KernelOp> specs;
  int steps = 0;
  for (Operation &op : getBody().front()) {
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      auto [it, inserted] = specs.try_emplace(kernel.getSpec(), kernel);
      if (!inserted)
        return kernel.emitOpError()
               << "has the same spec as @" << it->second.getSymName()
               << ": a plan holds each distinct kernel once";
    } else if (isa<StepOp>(op)) {
      ++steps;
    } else if (!isa<TensorOp, CacheOp>(op)) {
      return op.emitOpError() << "cannot be in a spark_kernel.plan";
    }
  }
  if (steps != 1)
    return emitOpError() << "must hold one spark_kernel.step, holds " << steps;
  const int64_t maxChunk = int64_t(getMaxChunk());
  if (maxChunk < 1 || int64_t(getMaxRows()) < maxChunk ||
      int64_t(getMaxContext()) < maxChunk || int64_t(getArenaFloats()) < 0)
    return emitOpError() << "needs 1 <= max_chunk <= max_rows, max_chunk <= "
                            "max_context and arena_floats >= 0";
  // Every arena view fits the arena at max_rows rows.
  WalkResult result = walk([&](ViewOp view) {
    if (view.getBase() != Buffer::Arena)
      return WalkResult::advance();
    int64_t offset = 0;
    FailureOr<int64_t> reach = footprint(view.getType(), getMaxRows(), offset);
    if (failed(reach) || offset < 0 ||
        offset + *reach > int64_t(getArenaFloats())) {
      view.emitOpError() << "reaches past the arena of " << getArenaFloats()
                         << " floats at " << getMaxRows() << " rows";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

LogicalResult CacheOp::verify() {
  auto type = cast<MemRefType>(getType());
  Type element = type.getElementType();
  if (type.getRank() != 3 ||
      !(element.isF32() || element.isBF16() || element.isF16()))
    return emitOpError() << "must be a [slots, kv_heads, head_dim] memref of "
                         << "f32, bf16 or f16, got " << type;
  return success();
}

ParseResult StepOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::Argument> arguments;
  if (parser.parseArgumentList(arguments, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, arguments))
    return failure();
  if (body->empty())
    body->emplaceBlock();
  return success();
}

void StepOp::print(OpAsmPrinter &p) {
  p << "(";
  llvm::interleaveComma(getBody().getArguments(), p,
                        [&](BlockArgument a) { p.printRegionArgument(a); });
  p << ")";
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs());
  p << " ";
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

void StepOp::getAsmBlockArgumentNames(Region &region,
                                      OpAsmSetValueNameFn setName) {
  if (!region.empty() && region.getNumArguments() == 1)
    setName(region.getArgument(0), "pos0");
}

LogicalResult StepOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 ||
      !body.getArgument(0).getType().isSignlessInteger(32))
    return emitOpError() << "takes one argument, the first row's position "
                         << "(i32)";
  return success();
}

LogicalResult TensorOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (getGroup() > 0 && !type.getElementType().isUnsignedInteger(8))
    return emitOpError() << "4- or 6-bit codes (group " << getGroup()
                         << ") are stored as ui8 bytes, got " << type;
  if (getSymmetric() && getGroup() == 0)
    return emitOpError() << "symmetric needs 4-bit codes (a group size)";
  return success();
}

LogicalResult ViewOp::verify() {
  const bool named = getBase() == Buffer::Weight || getBase() == Buffer::Cache;
  if (named != bool(getSourceAttr()))
    return emitOpError() << stringifyBuffer(getBase()) << " views "
                         << (named ? "name" : "do not name")
                         << " their tensor or cache";
  MemRefType type = getType();
  int64_t offset = 0;
  if (failed(footprint(type, 1, offset)))
    return emitOpError() << "needs a static strided layout, got " << type;
  if (getBase() == Buffer::Tokens &&
      !type.getElementType().isSignlessInteger(32))
    return emitOpError() << "token ids are i32, got " << type;
  if (getBase() == Buffer::Cache && offset != 0)
    return emitOpError() << "views of caches start at their first element, "
                         << "got offset " << offset;
  if (getBase() == Buffer::Weight && offset < 0)
    return emitOpError() << "views of tensors start inside them, got offset "
                         << offset;
  return success();
}

LogicalResult ViewOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getSourceAttr())
    return success();
  Operation *source = symbols.lookupNearestSymbolFrom(*this, getSourceAttr());
  int64_t elements = 0, offset = 0;
  Type element;
  if (auto tensor = dyn_cast_or_null<TensorOp>(source);
      tensor && getBase() == Buffer::Weight) {
    auto type = cast<RankedTensorType>(tensor.getType());
    Type viewed = getType().getElementType();
    if (tensor.getLayout() == SPARK_LAYOUT_GROUPED_ROWS &&
        viewed != type.getElementType()) {
      // Grouped rows hold f16 scales and zero points among the code bytes:
      // such a view reads the bytes as its own type.
      const int64_t bits = viewed.getIntOrFloatBitWidth();
      if (!viewed.isF16())
        return emitOpError()
               << "reads " << getSourceAttr() << "'s grouped rows as " << viewed
               << "; expected ui8 codes or f16 scales and "
               << "zero points";
      elements = type.getNumElements() * 8 / bits;
      element = viewed;
    } else {
      elements = type.getNumElements();
      element = type.getElementType();
    }
  } else if (auto cache = dyn_cast_or_null<CacheOp>(source);
             cache && getBase() == Buffer::Cache) {
    auto type = cast<MemRefType>(cache.getType());
    elements = type.getNumElements();
    element = type.getElementType();
  } else {
    return emitOpError() << "names " << getSourceAttr() << ", which is not a "
                         << "spark_kernel."
                         << (getBase() == Buffer::Weight ? "tensor" : "cache");
  }
  FailureOr<int64_t> reach = footprint(getType(), 1, offset);
  if (getType().getElementType() != element || failed(reach) ||
      offset + *reach > elements)
    return emitOpError() << "does not fit " << getSourceAttr() << " ("
                         << elements << " elements of " << element << ")";
  return success();
}

static FailureOr<KernelOp> lookupKernel(Operation *user, FlatSymbolRefAttr ref,
                                        SymbolTableCollection &symbols) {
  auto kernel = symbols.lookupNearestSymbolFrom<KernelOp>(user, ref);
  if (!kernel) {
    user->emitOpError() << "calls " << ref << ", which is not a "
                        << "spark_kernel.kernel";
    return failure();
  }
  return kernel;
}

LogicalResult CallOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<KernelOp> kernel = lookupKernel(*this, getKernelAttr(), symbols);
  if (failed(kernel))
    return failure();
  SpecAttr spec = kernel->getSpec();
  if (getDecodeAttr()) {
    FailureOr<KernelOp> decode = lookupKernel(*this, getDecodeAttr(), symbols);
    if (failed(decode))
      return failure();
    SpecAttr one = decode->getSpec();
    if (spec.getPhase() != Phase::Prefill || one.getPhase() != Phase::Decode ||
        operandCount(one) != operandCount(spec) ||
        one.getKind() != spec.getKind())
      return emitOpError() << "pairs " << getKernelAttr() << " and "
                           << getDecodeAttr()
                           << ": expected a prefill kernel and a decode "
                           << "kernel of the same signature";
  } else if (spec.getPhase() != Phase::Any) {
    return emitOpError() << "calls the " << stringifyPhase(spec.getPhase())
                         << " kernel " << getKernelAttr()
                         << " without its other phase";
  }
  const int64_t expected = operandCount(spec);
  if (int64_t(getOperands().size()) != expected)
    return emitOpError() << "passes " << getOperands().size() << " operands to "
                         << getKernelAttr() << ", which "
                         << "takes " << expected;
  if (!isa<MemRefType>(getOperands().back().getType()))
    return emitOpError() << "must pass the output view last";
  // A 4-bit kernel reads its codes (operand 1 of embed and linear) as the
  // tensor stores them: the same groups, symmetric or not.
  if (spec.getGroup() > 0)
    if (auto view = getOperands()[1].getDefiningOp<ViewOp>();
        view && view.getSourceAttr())
      if (auto tensor = symbols.lookupNearestSymbolFrom<TensorOp>(
              *this, view.getSourceAttr());
          tensor && (int64_t(tensor.getGroup()) != spec.getGroup() ||
                     tensor.getSymmetric() != spec.getSymmetric()))
        return emitOpError()
               << "calls " << getKernelAttr() << " (4-bit groups of "
               << spec.getGroup()
               << (spec.getSymmetric() ? ", symmetric" : ", asymmetric")
               << ") on " << view.getSourceAttr() << ", stored with group "
               << tensor.getGroup()
               << (tensor.getSymmetric() ? ", symmetric" : ", asymmetric");
  // 6-bit codes: rows of in/2 bytes of nibbles and in/4 of top bits.
  if (spec.getWeightType().isUnsignedInteger(6))
    if (auto view = getOperands()[1].getDefiningOp<ViewOp>();
        view && view.getSourceAttr())
      if (auto tensor = symbols.lookupNearestSymbolFrom<TensorOp>(
              *this, view.getSourceAttr())) {
        auto type = cast<RankedTensorType>(tensor.getType());
        const int64_t rowBytes = spark_six_bit_row_bytes(spec.getIn());
        if (type.getRank() != 2 || type.getDimSize(1) != rowBytes)
          return emitOpError()
                 << "calls " << getKernelAttr() << " (6-bit codes, rows of "
                 << rowBytes << " bytes) on " << view.getSourceAttr()
                 << ", stored as " << type;
      }
  return success();
}

LogicalResult CacheWriteOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto cache = symbols.lookupNearestSymbolFrom<CacheOp>(*this, getCacheAttr());
  if (!cache)
    return emitOpError() << "writes " << getCacheAttr() << ", which is not a "
                         << "spark_kernel.cache";
  auto slot = cast<MemRefType>(cache.getType());
  MemRefType source = getSource().getType();
  const int64_t width = slot.getDimSize(1) * slot.getDimSize(2);
  if (source.getRank() != 2 || source.getDimSize(1) != width)
    return emitOpError() << "writes rows of " << source.getDimSize(1)
                         << " values into " << getCacheAttr()
                         << ", whose slots hold " << width;
  return success();
}

spark::kernel::PlanSymbols::PlanSymbols(PlanOp plan) {
  for (Operation &op : plan.getBody().front()) {
    if (auto k = dyn_cast<KernelOp>(op)) {
      kernelIndex[k.getSymName()] = int(kernelIndex.size());
      kernels[k.getSymName()] = k;
    } else if (auto t = dyn_cast<TensorOp>(op)) {
      tensorIndex[t.getSymName()] = int(tensorIndex.size());
    } else if (auto c = dyn_cast<CacheOp>(op)) {
      cacheIndex[c.getSymName()] = int(cacheIndex.size());
      caches[c.getSymName()] = c;
    } else if (auto s = dyn_cast<StepOp>(op)) {
      step = s;
    }
  }
}
