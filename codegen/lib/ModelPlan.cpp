//===- ModelPlan.cpp - lower the step function to kernel calls ------------===//
//
// The structure of the plan: kernels, pack tensors as stored, caches, steps.
// The tensors' data (conversion, quantization) is PlanWeights.cpp's.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/ModelPlan.h"
#include "spark/Codegen/PlanIR.h"

#include "spark/Dialect/SparkOps.h"
#include "spark/Targets/Target.h"
#include "spark/model_abi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cmath>
#include <map>

using namespace mlir;

namespace spark {

uint64_t fnv1a(llvm::StringRef text, uint64_t seed) {
  uint64_t h = seed;
  for (char c : text)
    h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

char PlanError::ID = 0;

void PlanError::log(llvm::raw_ostream &os) const {
  loc.print(os);
  os << ": " << message_;
}

std::string sideTensorName(llvm::StringRef tensor, PackTensor::Role role) {
  return (tensor + (role == PackTensor::Role::Scales ? ".scales" : ".zeros"))
      .str();
}

int64_t PackTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

uint64_t PackTensor::bytes() const {
  return uint64_t(elements()) * dtypeSize(dtype);
}

namespace {

llvm::Error error(Operation *op, const llvm::Twine &message) {
  return llvm::make_error<PlanError>(op->getLoc(), message.str());
}

/// The decoder layer an op was imported for (its location's #spark.layer,
/// the first one where fusion merged locations), or -1.
int layerOf(Location loc) {
  int layer = -1;
  loc->walk([&](Location inner) {
    auto fused = dyn_cast<FusedLoc>(inner);
    auto attr =
        fused ? dyn_cast_or_null<LayerAttr>(fused.getMetadata()) : LayerAttr();
    if (!attr)
      return WalkResult::advance();
    layer = int(attr.getIndex());
    return WalkResult::interrupt();
  });
  return layer;
}

int64_t width(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape().back();
}

/// Where an SSA value of the step function lives.
struct Storage {
  enum class Kind { Arena, Cache, Tokens, Positions, Logits, Weight } kind;
  int64_t index = 0;  // arena value or cache
  int64_t column = 0; // split results: offset into the parent's rows
  int64_t rowStride = 0;
};

class Planner {
public:
  explicit Planner(const BuildOptions &options) : options(options) {
    plan.options = options;
    if (llvm::Expected<TargetInfo> target =
            targetFor(options.target, options.amxKernel))
      groupedRows = target->groupedRows;
    else
      llvm::consumeError(target.takeError()); // reported by the build
  }

  llvm::Expected<ModelPlan> run(ModuleOp module);

private:
  llvm::Error lower(Operation *op);
  int kernel(const KernelSpec &spec);
  int weightTensor(Operation *op, FlatSymbolRefAttr symbol, DType dtype,
                   llvm::Error &err);
  std::array<int, 4> ropeTables(RopeTableOp table);
  int constantTensor(ConstantOp constant);
  int64_t newValue(Value v, int64_t features);
  View activation(Value v, std::vector<int64_t> innerExtents = {});
  View weightView(int tensor);
  /// The views a quantized matrix's kernel takes: its codes, then its
  /// scales and (asymmetric 4-bit) zero points, as the tensor stores them.
  std::vector<Step::Arg> quantizedViews(int tensor);
  llvm::Error cacheOf(Operation *op, Value cache, int &index);

  const BuildOptions &options;
  bool groupedRows = false; // TargetInfo::groupedRows
  ModelPlan plan;
  llvm::DenseMap<Value, Storage> storage;
  /// Kernels by their spec attribute: equal specs share one kernel.
  llvm::DenseMap<Attribute, int> kernelIndex;
  MLIRContext *context = nullptr;
  llvm::StringMap<int> tensorIndex;
  int currentStep() const { return int(plan.steps.size()); }
  // Read off the step function: one key and one value cache per layer, the
  // residual stream as wide as the embedding lookup's rows.
  int64_t numLayers = 0, hiddenSize = -1;
  std::map<int, int> layerOutputs; // decoder layer -> step of its output
};

int Planner::kernel(const KernelSpec &spec) {
  auto [it, inserted] = kernelIndex.try_emplace(specAttr(context, spec), 0);
  if (inserted) {
    it->second = int(plan.kernels.size());
    plan.kernels.push_back(spec);
  }
  return it->second;
}

int Planner::weightTensor(Operation *op, FlatSymbolRefAttr symbol, DType dtype,
                          llvm::Error &err) {
  auto it = tensorIndex.find(symbol.getValue());
  if (it != tensorIndex.end())
    return it->second;
  auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(op, symbol);
  if (!weight) {
    err = error(op, "weight " + symbol.getValue() +
                        " is not a spark.weight of the module");
    return -1;
  }
  PackTensor tensor;
  tensor.name = symbol.getValue().str();
  tensor.dtype = dtype;
  auto shape = weight.getTensorType().getShape();
  tensor.shape.assign(shape.begin(), shape.end());
  if (weight.getPartsAttr()) // stacked (spark-fuse-projections), row by row
    for (Attribute part : weight.getPartsAttr())
      tensor.sources.push_back(cast<FlatSymbolRefAttr>(part).getValue().str());
  else
    tensor.sources.push_back(tensor.name);
  QuantAttr quant = weight.getQuantAttr();
  if (quant && tensor.shape.size() != 2) {
    err =
        error(op, "quantized weight " + symbol.getValue() + " is not a matrix");
    return -1;
  }
  // A quantized weight's scales (and zero points) come before it in the
  // pack, as the weight pack has always ordered them.
  auto side = [&](PackTensor::Role role, DType type,
                  std::vector<int64_t> sideShape) {
    PackTensor t;
    t.role = role;
    t.name = sideTensorName(tensor.name, role);
    t.dtype = type;
    t.shape = std::move(sideShape);
    plan.tensors.push_back(std::move(t));
    return int(plan.tensors.size()) - 1;
  };
  const int64_t rows = tensor.shape[0], cols = tensor.shape.back();
  if (quant && (quant.getBits() == 4 || quant.getBits() == 6)) {
    // 4-bit codes in groups along the input dimension: asymmetric (w4a16)
    // or symmetric (w4a8, zero point 8, not stored). Grouped rows (the
    // target's layout): one tensor, each row's codes, scales and zero
    // points; else the scales and zero points are tensors of their own.
    // 6-bit codes (asymmetric) are always dense: each row's K/2 bytes of
    // low nibbles, then K/4 bytes of the codes' top two bits
    // (spark_six_bit_top).
    const int64_t group = quant.getGroupSize(), groups = cols / group;
    tensor.dtype = DType::U8;
    tensor.codeCols = cols;
    tensor.codeBits = int(quant.getBits());
    tensor.group = group;
    tensor.symmetricGroups = quant.getSymmetric();
    if (tensor.codeBits == 6) {
      tensor.scales =
          side(PackTensor::Role::Scales, DType::F16, {rows, groups});
      tensor.zeros = side(PackTensor::Role::Zeros, DType::F16, {rows, groups});
      tensor.shape = {rows, spark_six_bit_row_bytes(cols)};
    } else if (groupedRows) {
      tensor.rowBytes =
          spark_grouped_row_bytes(cols, group, tensor.symmetricGroups);
      tensor.layout = SPARK_LAYOUT_GROUPED_ROWS;
    } else {
      tensor.scales =
          side(PackTensor::Role::Scales, DType::F16, {rows, groups});
      if (!tensor.symmetricGroups)
        tensor.zeros =
            side(PackTensor::Role::Zeros, DType::F16, {rows, groups});
    }
    if (tensor.codeBits == 4)
      tensor.shape = {rows, groupedRows ? tensor.rowBytes : cols / 2}; // bytes
  } else if (quant) {
    // Symmetric int8, one f32 scale per output row.
    tensor.dtype = DType::I8;
    tensor.scales = side(PackTensor::Role::Scales, DType::F32, {rows});
  }
  int index = int(plan.tensors.size());
  plan.tensors.push_back(std::move(tensor));
  tensorIndex[symbol.getValue()] = index;
  return index;
}

std::array<int, 4> Planner::ropeTables(RopeTableOp table) {
  std::array<int, 4> indices;
  const double theta = table.getTheta().convertToDouble();
  const int64_t rotary = table.getRotaryDim(), half = rotary / 2,
                block = table.getBlock(),
                coarseRows = (table.getPositions() + block - 1) / block;
  // Angles in double precision: p * theta^(-2i/rd) reaches ~1e5 rad at long
  // contexts, where f32 arithmetic would lose the phase.
  const struct {
    const char *suffix;
    int64_t rows, step;
    bool cosine;
  } parts[] = {{"coarse_cos", coarseRows, block, true},
               {"coarse_sin", coarseRows, block, false},
               {"fine_cos", block, 1, true},
               {"fine_sin", block, 1, false}};
  for (int part = 0; part < 4; ++part) {
    std::string name = (table.getSymName() + "." + parts[part].suffix).str();
    auto it = tensorIndex.find(name);
    if (it != tensorIndex.end()) {
      indices[part] = it->second;
      continue;
    }
    PackTensor tensor;
    tensor.name = name;
    tensor.layout = SPARK_LAYOUT_TABLE;
    tensor.shape = {parts[part].rows, half};
    for (int64_t r = 0; r < parts[part].rows; ++r)
      for (int64_t i = 0; i < half; ++i) {
        double angle = double(r * parts[part].step) *
                       std::pow(theta, -2.0 * double(i) / double(rotary));
        tensor.values.push_back(
            float(parts[part].cosine ? std::cos(angle) : std::sin(angle)));
      }
    indices[part] = int(plan.tensors.size());
    tensorIndex[name] = indices[part];
    plan.tensors.push_back(std::move(tensor));
  }
  return indices;
}

int Planner::constantTensor(ConstantOp constant) {
  PackTensor tensor;
  tensor.name = llvm::formatv("constant.{0}", plan.tensors.size()).str();
  auto type = cast<RankedTensorType>(constant.getResult().getType());
  tensor.shape.assign(type.getShape().begin(), type.getShape().end());
  for (APFloat v :
       cast<DenseElementsAttr>(constant.getValue()).getValues<APFloat>())
    tensor.values.push_back(v.convertToFloat());
  int index = int(plan.tensors.size());
  plan.tensors.push_back(std::move(tensor));
  return index;
}

int64_t Planner::newValue(Value v, int64_t features) {
  // spark-plan-memory placed every value (its offset is in bytes).
  ArenaValue value;
  auto offset =
      v.getDefiningOp()->getAttrOfType<IntegerAttr>("spark.arena_offset");
  value.offset = offset ? offset.getInt() / 4 : -1;
  int64_t id = int64_t(plan.arena.size());
  plan.arena.push_back(value);
  storage[v] = {Storage::Kind::Arena, id, 0, features};
  return id;
}

View Planner::activation(Value v, std::vector<int64_t> inner) {
  const Storage &s = storage.lookup(v);
  View view;
  view.base =
      s.kind == Storage::Kind::Logits ? View::Base::Logits : View::Base::Arena;
  view.index = s.index;
  view.column = s.column;
  if (inner.empty())
    inner = {width(v)};
  view.extents = inner;
  int64_t stride = 1;
  for (int64_t e : inner) {
    view.strides.push_back(stride);
    stride *= e;
  }
  view.hasRows = true;
  view.rowStride = s.rowStride;
  return view;
}

View Planner::weightView(int tensor) {
  const PackTensor &t = plan.tensors[tensor];
  View view;
  view.base = View::Base::Weight;
  view.index = tensor;
  view.type = t.dtype;
  // Pack tensors are row-major [rows][cols]: Halide dims are (cols, rows).
  std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
  view.extents = dims;
  int64_t stride = 1;
  for (int64_t e : dims) {
    view.strides.push_back(stride);
    stride *= e;
  }
  return view;
}

llvm::Error Planner::cacheOf(Operation *op, Value cache, int &index) {
  auto it = storage.find(cache);
  if (it == storage.end() || it->second.kind != Storage::Kind::Cache)
    return error(op, "cache operand must be a cache argument of the step "
                     "function or a spark.kv_write of one");
  index = int(it->second.index);
  return llvm::Error::success();
}

static Step::Arg viewArg(View v) {
  Step::Arg a;
  a.view = std::move(v);
  return a;
}

static Step::Arg scalarArg(Step::Arg::Kind kind, int64_t bound = 0,
                           float value = 0.0f) {
  Step::Arg a;
  a.kind = kind;
  a.bound = bound;
  a.value = value;
  return a;
}

std::vector<Step::Arg> Planner::quantizedViews(int tensor) {
  const PackTensor &t = plan.tensors[tensor];
  std::vector<Step::Arg> args;
  if (t.rowBytes == 0) {
    args.push_back(viewArg(weightView(tensor)));
    if (t.dtype == DType::I8 || t.dtype == DType::U8)
      args.push_back(viewArg(weightView(t.scales)));
    if (t.dtype == DType::U8 && !t.symmetricGroups)
      args.push_back(viewArg(weightView(t.zeros)));
    return args;
  }
  // Grouped rows: [K/2, N] codes, then [K/group, N] f16 scales and zero
  // points at their place in each row (offsets and strides in elements).
  const int64_t rows = t.shape[0], groups = t.codeCols / t.group;
  auto part = [&](DType type, int64_t column, int64_t extent) {
    View view = weightView(tensor);
    const int64_t size = int64_t(dtypeSize(type));
    view.type = type;
    view.column = column / size;
    view.extents = {extent / size, rows};
    view.strides = {1, t.rowBytes / size};
    return viewArg(view);
  };
  const int64_t codeBytes = t.codeCols / 2;
  args.push_back(part(DType::U8, 0, codeBytes));
  args.push_back(part(DType::F16, codeBytes, 2 * groups));
  if (!t.symmetricGroups)
    args.push_back(part(DType::F16, codeBytes + 2 * groups, 2 * groups));
  return args;
}

llvm::Error Planner::lower(Operation *op) {
  const DType matrixType = options.dtype;
  llvm::Error err = llvm::Error::success();
  Step step;
  step.comment = op->getName().getStringRef().str();

  auto output = [&](Value result, std::vector<int64_t> inner = {}) {
    newValue(result, width(result));
    return viewArg(activation(result, std::move(inner)));
  };
  auto input = [&](Value v, std::vector<int64_t> inner = {}) {
    const Storage &s = storage.lookup(v);
    if (s.kind == Storage::Kind::Weight)
      return viewArg(weightView(int(s.index)));
    return viewArg(activation(v, std::move(inner)));
  };

  if (auto embed = dyn_cast<EmbedOp>(op)) {
    int table = weightTensor(op, embed.getTableAttr(), matrixType, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::Embed;
    spec.in = width(embed.getResult());
    spec.out = plan.tensors[table].shape[0];
    spec.weightType = plan.tensors[table].dtype;
    spec.group = plan.tensors[table].group;
    spec.codeBits = plan.tensors[table].codeBits;
    spec.symmetricGroups = plan.tensors[table].symmetricGroups;
    spec.rowBytes = plan.tensors[table].rowBytes;
    step.kernel = kernel(spec);
    View ids;
    ids.base = View::Base::Tokens;
    ids.isInt32 = true;
    ids.hasRows = true;
    ids.rowStride = 1;
    step.args = {viewArg(ids)};
    llvm::append_range(step.args, quantizedViews(table));
    step.args.push_back(output(embed.getResult()));
  } else if (auto norm = dyn_cast<RMSNormOp>(op)) {
    if (norm.getOutputScale())
      return error(op, "rms_norm with a folded output quantization is not "
                       "supported by the host codegen yet");
    int w = weightTensor(op, norm.getWeightAttr(), DType::F32, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::RMSNorm;
    spec.in = width(norm.getInput());
    spec.epsilon = norm.getEpsilon().convertToDouble();
    step.kernel = kernel(spec);
    step.headRows = norm->hasOneUse() && isa<LogitsOp>(*norm->user_begin());
    step.args = {input(norm.getInput()), viewArg(weightView(w))};
    step.args.push_back(output(norm.getResult()));
  } else if (isa<LinearOp, LogitsOp>(op)) {
    Value in = op->getOperand(0), result = op->getResult(0);
    auto symbol = isa<LinearOp>(op) ? cast<LinearOp>(op).getWeightAttr()
                                    : cast<LogitsOp>(op).getHeadAttr();
    int w = weightTensor(op, symbol, matrixType, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::Linear;
    spec.in = width(in);
    spec.out = width(result);
    spec.weightType = plan.tensors[w].dtype;
    spec.group = plan.tensors[w].group;
    spec.codeBits = plan.tensors[w].codeBits;
    spec.symmetricGroups = plan.tensors[w].symmetricGroups;
    spec.rowBytes = plan.tensors[w].rowBytes;
    if (auto inputQuant = op->getAttrOfType<QuantAttr>("input_quant")) {
      spec.inputBits = inputQuant.getBits();
      spec.inputBlock = inputQuant.getGroupSize();
    }
    if (auto inputType = op->getAttrOfType<TypeAttr>("input_type"))
      spec.inputType = inputType.getValue().isBF16() ? DType::BF16 : DType::F16;
    spec.phase = Phase::Prefill;
    step.kernel = kernel(spec);
    spec.phase = Phase::Decode;
    step.decodeKernel = kernel(spec);
    step.args = {input(in)};
    llvm::append_range(step.args, quantizedViews(w));
    if (options.probeInputs) {
      step.probeInput = int(numLayers + int64_t(plan.inputProbes.size()));
      plan.inputProbes.push_back(symbol.getValue().str());
    }
    if (spec.inputBits == 8) { // the static input scale, or 0: per token
      auto scale = op->getAttrOfType<FloatAttr>("input_scale");
      step.args.push_back(
          scalarArg(Step::Arg::Kind::Float, 0,
                    scale ? float(scale.getValueAsDouble()) : 0.0f));
    }
    if (isa<LogitsOp>(op)) {
      step.headRows = true;
      storage[result] = {Storage::Kind::Logits, 0, 0, width(result)};
      step.args.push_back(viewArg(activation(result)));
    } else {
      step.args.push_back(output(result));
    }
  } else if (auto split = dyn_cast<SplitOp>(op)) {
    Storage parent = storage.lookup(split.getInput());
    int64_t column = parent.column;
    for (auto [result, size] :
         llvm::zip(split.getResults(), split.getSizes())) {
      Storage piece = parent;
      piece.column = column;
      storage[result] = piece;
      column += size;
    }
    return llvm::Error::success(); // a view, no step
  } else if (auto rope = dyn_cast<RopeOp>(op)) {
    RopeTableOp table;
    if (rope.getTableAttr())
      table = SymbolTable::lookupNearestSymbolFrom<RopeTableOp>(
          op, rope.getTableAttr());
    if (!table)
      return error(op, "spark.rope has no table (run spark-rope-tables)");
    if (int64_t(table.getPositions()) < options.maxContext)
      return error(op, llvm::formatv("RoPE table {0} covers {1} positions, "
                                     "the build holds {2}",
                                     table.getSymName(), table.getPositions(),
                                     options.maxContext));
    KernelSpec spec;
    spec.kind = KernelKind::Rope;
    spec.heads = rope.getNumHeads();
    spec.headDim = rope.getHeadDim();
    spec.rotaryDim = rope.getRotaryDim();
    spec.out = table.getPositions();
    spec.block = table.getBlock();
    step.kernel = kernel(spec);
    step.args = {input(rope.getInput())};
    for (int tensor : ropeTables(table))
      step.args.push_back(viewArg(weightView(tensor)));
    step.args.push_back(scalarArg(Step::Arg::Kind::Position));
    step.args.push_back(output(rope.getResult()));
  } else if (auto attn = dyn_cast<AttentionOp>(op)) {
    int kc, vc;
    if (llvm::Error e = cacheOf(op, attn.getKeyCache(), kc))
      return e;
    if (llvm::Error e = cacheOf(op, attn.getValueCache(), vc))
      return e;
    const CacheSpec &cache = plan.caches[kc];
    KernelSpec spec;
    spec.kind = KernelKind::Attention;
    spec.heads = attn.getNumHeads();
    spec.kvHeads = attn.getNumKvHeads();
    spec.headDim = attn.getHeadDim();
    spec.window = attn.getWindow().value_or(0);
    spec.slots = cache.slots;
    spec.ring = cache.ring;
    spec.scale = attn.getScale().convertToDouble();
    spec.weightType = cache.dtype; // the caches' elements
    spec.gated = bool(attn.getGate());
    step.kernel = kernel(spec);
    const int64_t hd = spec.headDim;
    auto cacheView = [&](int index) {
      View v;
      v.base = View::Base::Cache;
      v.index = index;
      v.type = plan.caches[index].dtype;
      v.extents = {hd, spec.kvHeads, spec.slots};
      v.strides = {1, hd, hd * spec.kvHeads};
      return viewArg(v);
    };
    step.args = {input(attn.getQuery(), {hd, spec.heads}),
                 input(attn.getKey(), {hd, spec.kvHeads}),
                 input(attn.getValue(), {hd, spec.kvHeads}), cacheView(kc),
                 cacheView(vc)};
    if (spec.gated)
      step.args.push_back(input(attn.getGate()));
    step.args.push_back(scalarArg(Step::Arg::Kind::Position));
    step.args.push_back(scalarArg(Step::Arg::Kind::CachedRows, spec.slots));
    step.args.push_back(output(attn.getResult(), {hd, spec.heads}));
  } else if (auto write = dyn_cast<KVWriteOp>(op)) {
    int cache;
    if (llvm::Error e = cacheOf(op, write.getCache(), cache))
      return e;
    step.kind = Step::Kind::CacheWrite;
    step.cache = cache;
    step.source = activation(write.getValues());
    storage[write.getResult()] = storage.lookup(write.getCache());
  } else if (auto gate = dyn_cast<HeadGateOp>(op)) {
    KernelSpec spec;
    spec.kind = KernelKind::HeadGate;
    spec.heads = gate.getNumHeads();
    spec.headDim = width(gate.getInput()) / spec.heads;
    step.kernel = kernel(spec);
    step.args = {input(gate.getInput()), input(gate.getGate())};
    step.args.push_back(output(gate.getResult()));
  } else if (auto get = dyn_cast<GetWeightOp>(op)) {
    int w = weightTensor(op, get.getWeightAttr(), DType::F32, err);
    if (err)
      return err;
    storage[get.getResult()] = {Storage::Kind::Weight, w, 0, 0};
    return llvm::Error::success(); // data in the pack, no step
  } else if (auto constant = dyn_cast<ConstantOp>(op)) {
    storage[constant.getResult()] = {Storage::Kind::Weight,
                                     constantTensor(constant), 0, 0};
    return llvm::Error::success();
  } else if (isa<AddOp, MulOp>(op)) {
    Value result = op->getResult(0);
    auto rowsOf = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).getRank() == 2;
    };
    if (!rowsOf(result))
      return error(op, "the host codegen supports elementwise ops on "
                       "[tokens, features] values only");
    KernelSpec spec;
    spec.kind = KernelKind::Binary;
    spec.op = isa<AddOp>(op) ? ElementwiseOp::Add : ElementwiseOp::Mul;
    spec.in = width(result);
    spec.lhsWidth = width(op->getOperand(0));
    spec.rhsWidth = width(op->getOperand(1));
    spec.lhsRows = rowsOf(op->getOperand(0));
    spec.rhsRows = rowsOf(op->getOperand(1));
    step.kernel = kernel(spec);
    step.args = {input(op->getOperand(0)), input(op->getOperand(1))};
    step.args.push_back(output(result));
  } else if (isa<GegluOp, RsqrtOp, SigmoidOp, GeluOp, PowOp, MeanOp>(op)) {
    KernelSpec spec;
    spec.in = width(op->getOperand(0));
    spec.kind = isa<GegluOp>(op)  ? KernelKind::Geglu
                : isa<MeanOp>(op) ? KernelKind::Mean
                                  : KernelKind::Unary;
    if (auto gelu = dyn_cast<GeluOp>(op))
      spec.op =
          gelu.getApproximate() ? ElementwiseOp::GeluTanh : ElementwiseOp::Gelu;
    else if (auto pow = dyn_cast<PowOp>(op)) {
      spec.op = ElementwiseOp::Pow;
      spec.parameter = pow.getExponent().convertToDouble();
    } else if (isa<RsqrtOp>(op))
      spec.op = ElementwiseOp::Rsqrt;
    else if (isa<SigmoidOp>(op))
      spec.op = ElementwiseOp::Sigmoid;
    step.kernel = kernel(spec);
    for (Value operand : op->getOperands())
      step.args.push_back(input(operand));
    step.args.push_back(output(op->getResult(0)));
  } else if (isa<func::ReturnOp>(op)) {
    if (op->getNumOperands() < 1 ||
        storage.lookup(op->getOperand(0)).kind != Storage::Kind::Logits)
      return error(op, "the step function must return the logits first");
    return llvm::Error::success();
  } else {
    return error(op, "the host codegen cannot lower '" +
                         op->getName().getStringRef() +
                         "' (decomposed and quantized ops need the fusion "
                         "passes, which are not in this build yet)");
  }
  step.layer = layerOf(op->getLoc());
  // The last residual add of a decoder layer is that layer's output.
  if (step.layer >= 0 && isa<AddOp>(op) &&
      width(op->getResult(0)) == hiddenSize)
    layerOutputs[step.layer] = currentStep();
  plan.steps.push_back(std::move(step));
  return llvm::Error::success();
}

llvm::Expected<ModelPlan> Planner::run(ModuleOp module) {
  context = module.getContext();
  context->getOrLoadDialect<kernel::KernelDialect>(); // the specs' dialect
  auto step = module.lookupSymbol<func::FuncOp>("step");
  if (!step)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the module has no func.func @step");
  Block &body = step.getBody().front();
  if (body.getNumArguments() < 2 || (body.getNumArguments() - 2) % 2 != 0)
    return error(step, "@step takes (ids, positions, k/v caches...)");
  numLayers = (body.getNumArguments() - 2) / 2;
  for (EmbedOp embed : step.getOps<EmbedOp>()) {
    hiddenSize = width(embed.getResult());
    break;
  }
  storage[body.getArgument(0)] = {Storage::Kind::Tokens, 0, 0, 1};
  storage[body.getArgument(1)] = {Storage::Kind::Positions, 0, 0, 1};

  // Cache layouts come from the IR (spark-kv-layout decides them): the
  // slots are the cache type's first dim, the layout the attention's.
  llvm::DenseMap<Value, bool> cacheIsRing;
  for (AttentionOp attn : step.getOps<AttentionOp>())
    for (Value cache : {attn.getKeyCache(), attn.getValueCache()})
      cacheIsRing[cache] = attn.getLayout() == CacheLayout::Ring;
  for (unsigned i = 2; i < body.getNumArguments(); ++i) {
    Value arg = body.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    auto it = cacheIsRing.find(arg);
    if (it == cacheIsRing.end())
      return error(step, llvm::formatv("cache argument {0} is not read by any "
                                       "spark.attention",
                                       i));
    CacheSpec cache;
    cache.layer = int((i - 2) / 2);
    cache.keys = (i - 2) % 2 == 0;
    cache.ring = it->second;
    cache.slots = type.getShape()[0];
    cache.kvHeads = type.getShape()[1];
    cache.headDim = type.getShape()[2];
    Type element = type.getElementType();
    if (element.isBF16())
      cache.dtype = DType::BF16;
    else if (element.isF16())
      cache.dtype = DType::F16;
    else if (!element.isF32())
      return error(step, llvm::formatv("cache argument {0} has elements of "
                                       "neither f32, bf16 nor f16",
                                       i));
    storage[arg] = {Storage::Kind::Cache, int64_t(plan.caches.size()), 0, 0};
    plan.caches.push_back(cache);
  }
  auto arena = module->getAttrOfType<DictionaryAttr>("spark.arena");
  auto arenaBytes = arena ? arena.getAs<IntegerAttr>("bytes") : IntegerAttr();
  auto arenaRows = arena ? arena.getAs<IntegerAttr>("rows") : IntegerAttr();
  if (!arenaBytes || !arenaRows)
    return error(module,
                 "the module has no spark.arena (run spark-plan-memory)");
  const int64_t neededRows =
      spark::arenaRows(options.maxChunk, kPrefillRowMultiple);
  if (arenaRows.getInt() < neededRows)
    return error(module, llvm::formatv("the arena holds {0} rows per value; "
                                       "max chunk {1} needs {2}",
                                       arenaRows.getInt(), options.maxChunk,
                                       neededRows));
  plan.arenaFloats = arenaBytes.getInt() / 4;
  for (Operation &op : body)
    if (llvm::Error e = lower(&op))
      return e;
  for (auto [layer, stepIndex] : layerOutputs)
    plan.steps[stepIndex].probeLayer = layer;
  for (const ArenaValue &v : plan.arena)
    if (v.offset < 0)
      return error(module, "a value has no spark.arena_offset (run "
                           "spark-plan-memory)");

  return std::move(plan);
}

} // namespace

llvm::Expected<ModelPlan> planModel(ModuleOp module,
                                    const BuildOptions &options) {
  return Planner(options).run(module);
}

void setPlanConfig(ModelPlan &plan, const ModelConfig &config) {
  plan.config = config;
  plan.configHash =
      fnv1a(llvm::formatv("{0}", llvm::json::Value(config.toJSON())).str());
  // Everything the driver and the pack must agree on.
  std::string abi =
      llvm::formatv("abi2;ctx{0};chunk{1};", plan.options.maxContext,
                    plan.options.maxChunk)
          .str();
  for (const KernelSpec &k : plan.kernels)
    abi += k.name() + ";";
  // 6-bit rows: their top bits in blocks of 128 codes (spark_six_bit_top;
  // earlier packs, four codes a byte in order, do not open).
  for (const PackTensor &t : plan.tensors)
    abi += llvm::formatv("{0}:{1}:{2}{3};", t.name, int(t.dtype), t.bytes(),
                         t.codeBits == 6 ? ":tops128" : "")
               .str();
  for (const CacheSpec &c : plan.caches)
    abi += llvm::formatv("{0}:{1}:{2};", c.ring, c.slots, c.kvHeads * c.headDim)
               .str();
  plan.abiHash = fnv1a(abi, plan.configHash);
}

llvm::Expected<ModelPlan> planModel(ModuleOp module, const Checkpoint &ckpt,
                                    const BuildOptions &options) {
  llvm::Expected<ModelPlan> plan = planModel(module, options);
  if (!plan)
    return plan.takeError();
  if (llvm::Error e = loadWeights(*plan, ckpt))
    return e;
  return plan;
}

} // namespace spark
