//===- SparkOps.cpp - verifiers of the spark dialect's operations ---------===//
#include "spark/Dialect/SparkOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace spark;

namespace {

/// Two extents agree when equal or when either is unknown.
bool extentsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t lastDim(Value v) { return shapeOf(v).back(); }

/// Prints a shape as [a, b, ?].
std::string formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
  }
  return s + "]";
}

/// Checks that `symbol` names a spark.weight whose shape agrees with
/// `expected` (dynamic entries match anything).
LogicalResult verifyWeightRef(Operation *op, SymbolTableCollection &symbols,
                              FlatSymbolRefAttr symbol, StringRef role,
                              ArrayRef<int64_t> expected) {
  auto weight = symbols.lookupNearestSymbolFrom<WeightOp>(op, symbol);
  if (!weight)
    return op->emitOpError() << role << " " << symbol
                             << " does not name a spark.weight";
  ArrayRef<int64_t> actual = weight.getTensorType().getShape();
  bool ok = actual.size() == expected.size();
  for (size_t i = 0; ok && i < actual.size(); ++i)
    ok = extentsAgree(actual[i], expected[i]);
  if (!ok)
    return op->emitOpError()
           << role << " " << symbol << " has shape " << formatShape(actual)
           << " but the op needs " << formatShape(expected);
  return success();
}

/// Checks that all but the last dimension of `a` and `b` agree.
LogicalResult verifyRowsAgree(Operation *op, Value a, Value b, StringRef what) {
  ArrayRef<int64_t> sa = shapeOf(a), sb = shapeOf(b);
  if (sa.size() != sb.size())
    return op->emitOpError() << what << " must have the same rank ("
                             << sa.size() << " vs " << sb.size() << ")";
  for (size_t i = 0; i + 1 < sa.size(); ++i)
    if (!extentsAgree(sa[i], sb[i]))
      return op->emitOpError() << what << " disagree in dimension " << i
                                << " (" << formatShape(sa) << " vs "
                                << formatShape(sb) << ")";
  return success();
}

LogicalResult verifyTokenCount(Operation *op, Value positions, Value rows) {
  if (!extentsAgree(shapeOf(positions)[0], shapeOf(rows)[0]))
    return op->emitOpError() << "has " << shapeOf(positions)[0]
                             << " positions for " << shapeOf(rows)[0]
                             << " token rows";
  return success();
}

LogicalResult verifyFeatureWidth(Operation *op, Value v, int64_t expected,
                                 StringRef what) {
  if (!extentsAgree(lastDim(v), expected))
    return op->emitOpError() << what << " has " << lastDim(v)
                             << " features, expected " << expected;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  RankedTensorType type = getTensorType();
  if (!type.hasStaticShape())
    return emitOpError() << "weight shape must be static, got "
                         << formatShape(type.getShape());
  Type element = type.getElementType();
  if (QuantAttr quant = getQuantAttr()) {
    if (!element.isInteger(8) && !element.isInteger(6) && !element.isInteger(4))
      return emitOpError()
             << "a quantized weight stores i8, i6 or i4 codes, got " << element;
    if (element.getIntOrFloatBitWidth() != quant.getBits())
      return emitOpError() << "stores " << element << " codes but is quantized "
                           << "to " << quant.getBits() << " bits";
  } else if (!element.isF32() && !element.isF16() && !element.isBF16()) {
    return emitOpError() << "weight element type must be f32, f16 or bf16, got "
                         << element;
  }
  if (ArrayAttr parts = getPartsAttr()) {
    // A row-wise concatenation: parts are [rows_i, cols] weights whose rows
    // add up to ours.
    if (type.getRank() != 2)
      return emitOpError() << "a weight made of parts must be 2-D";
    int64_t rows = 0;
    for (Attribute part : parts) {
      auto symbol = cast<FlatSymbolRefAttr>(part);
      auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(*this, symbol);
      if (!weight)
        return emitOpError() << "part " << symbol << " does not name a spark.weight";
      RankedTensorType partType = weight.getTensorType();
      // A quantized stack holds codes of its parts' values.
      bool sameElements = getQuant() || partType.getElementType() == element;
      if (partType.getRank() != 2 || partType.getDimSize(1) != type.getDimSize(1) ||
          !sameElements)
        return emitOpError() << "part " << symbol << " of type " << partType
                             << " does not stack into " << type;
      rows += partType.getDimSize(0);
    }
    if (rows != type.getDimSize(0))
      return emitOpError() << "parts have " << rows << " rows in all, the weight "
                           << type.getDimSize(0);
  }
  return success();
}

LogicalResult GetWeightOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyWeightRef(*this, symbols, getWeightAttr(), "weight",
                         shapeOf(getResult()));
}

//===----------------------------------------------------------------------===//
// Fused decoder ops
//===----------------------------------------------------------------------===//

LogicalResult EmbedOp::verify() {
  if (shapeOf(getResult()).size() != 2)
    return emitOpError() << "result must be [tokens, hidden], got "
                         << formatShape(shapeOf(getResult()));
  return verifyTokenCount(*this, getIds(), getResult());
}

LogicalResult EmbedOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyWeightRef(*this, symbols, getTableAttr(), "table",
                         {ShapedType::kDynamic, lastDim(getResult())});
}

LogicalResult RMSNormOp::verify() {
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError() << "epsilon must be positive, got "
                         << getEpsilon().convertToDouble();
  if (getOutputZeroPoint() && !getOutputScale())
    return emitOpError() << "output_zero_point needs output_scale";
  if (getOutputScale() && !(getOutputScale()->convertToDouble() > 0.0))
    return emitOpError() << "output_scale must be positive";
  return success();
}

LogicalResult RMSNormOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyWeightRef(*this, symbols, getWeightAttr(), "weight",
                         {lastDim(getInput())});
}

/// Activation quantization is dynamic int8: 8 bits, symmetric, one scale
/// per token (group_size 0) or per token and block of group_size inputs.
static LogicalResult verifyInputQuant(Operation *op, QuantAttr quant,
                                      FloatAttr range, FloatAttr scale,
                                      TypeAttr type) {
  if (type && !type.getValue().isBF16() && !type.getValue().isF16())
    return op->emitOpError() << "input_type must be bf16 or f16 (16-bit "
                                "activations), got "
                             << type.getValue();
  if (type && quant)
    return op->emitOpError()
           << "has both input_quant (int8 inputs) and input_type (16-bit "
              "inputs); expected one";
  if (quant) {
    int64_t block = quant.getGroupSize();
    if (quant.getBits() != 8 || !quant.getSymmetric() ||
        (block != 0 && block != 32 && block != 64 && block != 128 &&
         block != 256))
      return op->emitOpError()
             << "input_quant must be #spark.quant<bits = 8, group_size = 0 "
                "(per token) or 32, 64, 128, 256 (per block), symmetric = "
                "true> (int8 inputs), got "
             << quant;
    int64_t width = cast<ShapedType>(op->getOperand(0).getType()).getDimSize(1);
    if (block && !ShapedType::isDynamic(width) && width % block != 0)
      return op->emitOpError() << "input_quant blocks of " << block
                               << " do not divide the input width " << width;
    if (block && scale)
      return op->emitOpError() << "input_scale (one static scale) does not "
                                  "combine with per-block input_quant";
  }
  for (auto [attr, name] : {std::pair{range, "input_range"},
                            std::pair{scale, "input_scale"}}) {
    if (!attr)
      continue;
    double value = attr.getValueAsDouble();
    if (!std::isfinite(value) || value <= 0.0)
      return op->emitOpError() << name << " must be a positive finite number, got "
                               << value;
  }
  if (scale && !quant)
    return op->emitOpError()
           << "input_scale (a static int8 input scale) needs input_quant";
  return success();
}

LogicalResult LinearOp::verify() {
  if (failed(verifyInputQuant(*this, getInputQuantAttr(), getInputRangeAttr(),
                              getInputScaleAttr(), getInputTypeAttr())))
    return failure();
  return verifyRowsAgree(*this, getInput(), getResult(), "input and result");
}

LogicalResult LinearOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyWeightRef(*this, symbols, getWeightAttr(), "weight",
                         {lastDim(getResult()), lastDim(getInput())});
}

LogicalResult LogitsOp::verify() {
  if (failed(verifyInputQuant(*this, getInputQuantAttr(), getInputRangeAttr(),
                              getInputScaleAttr(), getInputTypeAttr())))
    return failure();
  return verifyRowsAgree(*this, getInput(), getResult(), "input and result");
}

LogicalResult LogitsOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyWeightRef(*this, symbols, getHeadAttr(), "head",
                         {lastDim(getResult()), lastDim(getInput())});
}

LogicalResult SplitOp::verify() {
  ArrayRef<int64_t> sizes = getSizes();
  if (sizes.size() != getResults().size())
    return emitOpError() << "has " << sizes.size() << " sizes but "
                         << getResults().size() << " results";
  int64_t total = 0;
  for (auto [size, result] : llvm::zip(sizes, getResults())) {
    if (size <= 0)
      return emitOpError() << "split sizes must be positive, got " << size;
    total += size;
    if (failed(verifyRowsAgree(*this, getInput(), result, "input and result")))
      return failure();
    if (failed(verifyFeatureWidth(*this, result, size, "a result")))
      return failure();
  }
  if (!extentsAgree(lastDim(getInput()), total))
    return emitOpError() << "split sizes add up to " << total
                         << " but the input has " << lastDim(getInput())
                         << " features";
  return success();
}

LogicalResult RopeOp::verify() {
  int64_t heads = getNumHeads(), headDim = getHeadDim(),
          rotary = getRotaryDim();
  if (heads <= 0 || headDim <= 0)
    return emitOpError() << "num_heads and head_dim must be positive";
  if (rotary <= 0 || rotary % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, got "
                         << rotary;
  if (rotary > headDim)
    return emitOpError() << "rotary_dim " << rotary << " exceeds head_dim "
                         << headDim;
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be positive";
  if (failed(verifyFeatureWidth(*this, getInput(), heads * headDim, "input")))
    return failure();
  return verifyTokenCount(*this, getPositions(), getInput());
}

LogicalResult RopeOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getTableAttr())
    return success();
  auto table = symbols.lookupNearestSymbolFrom<RopeTableOp>(*this, getTableAttr());
  if (!table)
    return emitOpError() << "table " << getTableAttr()
                         << " does not name a spark.rope_table";
  if (table.getRotaryDim() != getRotaryDim() ||
      table.getTheta() != getTheta())
    return emitOpError() << "table " << getTableAttr() << " has theta "
                         << table.getTheta().convertToDouble()
                         << " and rotary_dim " << table.getRotaryDim()
                         << ", the op needs theta "
                         << getTheta().convertToDouble() << " and rotary_dim "
                         << getRotaryDim();
  return success();
}

LogicalResult RopeTableOp::verify() {
  if (getRotaryDim() <= 0 || getRotaryDim() % 2 != 0)
    return emitOpError() << "rotary_dim must be positive and even, got "
                         << getRotaryDim();
  if (getPositions() <= 0 || getBlock() <= 0)
    return emitOpError() << "positions and block must be positive";
  if (!(getTheta().convertToDouble() > 0.0))
    return emitOpError() << "theta must be positive";
  return success();
}

LogicalResult KVWriteOp::verify() {
  ArrayRef<int64_t> cache = shapeOf(getCache());
  if (failed(verifyFeatureWidth(*this, getValues(), cache[1] * cache[2],
                                "values")))
    return failure();
  return verifyTokenCount(*this, getPositions(), getValues());
}

LogicalResult AttentionOp::verify() {
  int64_t heads = getNumHeads(), kvHeads = getNumKvHeads(),
          headDim = getHeadDim();
  if (heads <= 0 || kvHeads <= 0 || headDim <= 0)
    return emitOpError()
           << "num_heads, num_kv_heads and head_dim must be positive";
  if (heads % kvHeads != 0)
    return emitOpError() << "num_heads " << heads
                         << " is not divisible by num_kv_heads " << kvHeads;
  if (!(getScale().convertToDouble() > 0.0))
    return emitOpError() << "scale must be positive";
  bool sliding = getKind() == AttentionKind::Sliding;
  if (sliding && !getWindow())
    return emitOpError() << "a sliding layer needs a window";
  if (!sliding && getWindow())
    return emitOpError() << "a full layer takes no window";
  if (sliding && *getWindow() <= 0)
    return emitOpError() << "window must be positive, got " << *getWindow();
  if (getKeyCache().getType() != getValueCache().getType())
    return emitOpError() << "key and value caches must have the same type";
  ArrayRef<int64_t> cache = shapeOf(getKeyCache());
  if (!extentsAgree(cache[1], kvHeads) || !extentsAgree(cache[2], headDim))
    return emitOpError() << "cache shape " << formatShape(cache)
                         << " does not match [slots, " << kvHeads << ", "
                         << headDim << "]";
  if (getLayout() == CacheLayout::Ring) {
    if (!sliding)
      return emitOpError() << "a full layer cannot use a ring cache";
    if (!ShapedType::isDynamic(cache[0]) && cache[0] < int64_t(*getWindow()) - 1)
      return emitOpError() << "a ring of " << cache[0]
                           << " slots cannot hold the " << *getWindow() - 1
                           << " past keys of window " << *getWindow();
  }
  if (failed(verifyFeatureWidth(*this, getQuery(), heads * headDim, "query")) ||
      failed(verifyFeatureWidth(*this, getKey(), kvHeads * headDim, "key")) ||
      failed(verifyFeatureWidth(*this, getValue(), kvHeads * headDim,
                                "value")) ||
      failed(verifyFeatureWidth(*this, getResult(), heads * headDim,
                                "result")))
    return failure();
  for (Value v : {getKey(), getValue(), getResult()})
    if (failed(verifyRowsAgree(*this, getQuery(), v, "query and key/value")))
      return failure();
  if (Value gate = getGate()) {
    if (failed(verifyFeatureWidth(*this, gate, heads, "gate")) ||
        failed(verifyRowsAgree(*this, getQuery(), gate, "query and gate")))
      return failure();
  }
  return verifyTokenCount(*this, getPositions(), getQuery());
}

LogicalResult HeadGateOp::verify() {
  int64_t heads = getNumHeads();
  if (heads <= 0)
    return emitOpError() << "num_heads must be positive";
  if (failed(verifyFeatureWidth(*this, getGate(), heads, "gate")))
    return failure();
  if (!ShapedType::isDynamic(lastDim(getInput())) &&
      lastDim(getInput()) % heads != 0)
    return emitOpError() << "input width " << lastDim(getInput())
                         << " is not a multiple of num_heads " << heads;
  return verifyRowsAgree(*this, getInput(), getGate(), "input and gate");
}

//===----------------------------------------------------------------------===//
// Decomposed ops
//===----------------------------------------------------------------------===//

/// Trailing-dimension (NumPy) broadcasting of lhs and rhs must give result.
static LogicalResult verifyBroadcast(Operation *op, Value lhs, Value rhs,
                                     Value result) {
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs), r = shapeOf(result);
  size_t rank = std::max(a.size(), b.size());
  if (r.size() != rank)
    return op->emitOpError() << "result rank " << r.size()
                             << " differs from the broadcast rank " << rank;
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    int64_t expected;
    if (da == 1)
      expected = db;
    else if (db == 1)
      expected = da;
    else if (extentsAgree(da, db))
      expected = ShapedType::isDynamic(da) ? db : da;
    else
      return op->emitOpError() << "operands " << formatShape(a) << " and "
                               << formatShape(b) << " do not broadcast";
    if (!extentsAgree(expected, r[i]))
      return op->emitOpError() << "result " << formatShape(r)
                               << " is not the broadcast of " << formatShape(a)
                               << " and " << formatShape(b);
  }
  return success();
}

LogicalResult AddOp::verify() {
  return verifyBroadcast(*this, getLhs(), getRhs(), getResult());
}

LogicalResult MulOp::verify() {
  return verifyBroadcast(*this, getLhs(), getRhs(), getResult());
}

LogicalResult MeanOp::verify() {
  if (failed(verifyRowsAgree(*this, getInput(), getResult(),
                             "input and result")))
    return failure();
  if (lastDim(getResult()) != 1)
    return emitOpError() << "result keeps the reduced dimension with size 1";
  return success();
}

LogicalResult ConstantOp::verify() {
  ShapedType valueType = getValue().getShapedType();
  if (!valueType.getElementType().isF32())
    return emitOpError() << "value must hold f32 elements, got "
                         << valueType.getElementType();
  if (valueType.getShape() != shapeOf(getResult()))
    return emitOpError() << "value shape "
                         << formatShape(valueType.getShape())
                         << " differs from the result shape "
                         << formatShape(shapeOf(getResult()));
  return success();
}

/// Shared checks of quantize and dequantize: positive scale, a zero point
/// inside the storage type, equal shapes.
static LogicalResult verifyQDQ(Operation *op, double scale, int64_t zeroPoint,
                               Value input, Value result, Type storage) {
  if (!(scale > 0.0))
    return op->emitOpError() << "scale must be positive, got " << scale;
  auto intType = cast<IntegerType>(storage);
  int64_t lo = intType.isUnsigned() ? 0 : -(int64_t(1) << (intType.getWidth() - 1));
  int64_t hi = intType.isUnsigned() ? (int64_t(1) << intType.getWidth()) - 1
                                    : (int64_t(1) << (intType.getWidth() - 1)) - 1;
  if (zeroPoint < lo || zeroPoint > hi)
    return op->emitOpError() << "zero_point " << zeroPoint << " is outside "
                             << storage << " [" << lo << ", " << hi << "]";
  if (shapeOf(input) != shapeOf(result))
    return op->emitOpError() << "input and result shapes differ";
  return success();
}

LogicalResult QuantizeOp::verify() {
  return verifyQDQ(*this, getScale().convertToDouble(), getZeroPoint(),
                   getInput(), getResult(),
                   getResult().getType().getElementType());
}

LogicalResult DequantizeOp::verify() {
  return verifyQDQ(*this, getScale().convertToDouble(), getZeroPoint(),
                   getInput(), getResult(),
                   getInput().getType().getElementType());
}

#define GET_OP_CLASSES
#include "spark/Dialect/SparkOps.cpp.inc"
