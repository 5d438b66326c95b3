//===- DriverEmitter.cpp - generate the step driver, header, manifest -----===//
//
// The driver is C: the kernel tables of the target's ISA variants and the
// variants' CPU checks (the choice among them is driver_support.h's), the
// step function (the plan's step lowered to EmitC by
// spark-lower-step-to-emitc and printed by MLIR's C emitter: one call per
// kernel in the order of the step, with the buffer views, cache slots and
// arena offsets the plan fixed at compile time), and the model's tables.
// The fixed helpers are targets/common/lib/driver_support.h.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PlanIR.h"

#include "spark/Passes/Passes.h"
#include "spark/model_abi.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/EmitC/Transforms/Passes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

using namespace llvm;
using mlir::MemRefType;
using mlir::Operation;

namespace spark {

std::string kernelSymbol(const KernelSpec &k, StringRef variant) {
  return "spark_" + k.name() + "_" + variant.str();
}

namespace {

/// The spark_layout enumerator of a pack tensor's layout.
const char *layoutName(int layout) {
  switch (layout) {
  case SPARK_LAYOUT_TABLE:
    return "SPARK_LAYOUT_TABLE";
  case SPARK_LAYOUT_GROUPED_ROWS:
    return "SPARK_LAYOUT_GROUPED_ROWS";
  default:
    return "SPARK_LAYOUT_ROW_MAJOR";
  }
}

/// The driver's wrapper of microkernel `m` for kernel `k`
/// (Microkernel::wrapper).
std::string wrapperName(const KernelSpec &k, const Microkernel &m) {
  return kernelSymbol(k, m.symbol);
}

/// The function `variant` calls for kernel `k`: its microkernel (or the
/// driver's wrapper of it), its own compiled kernel, or (recursively) its
/// fallback variant's.
std::string symbolFor(const TargetInfo &target, const TargetVariant &variant,
                      const KernelSpec &k) {
  if (const Microkernel *m = target.microkernelFor(variant, k))
    return m->arguments ? wrapperName(k, *m) : m->symbol;
  if (target.compilesKernel(variant, k))
    return kernelSymbol(k, variant.name);
  for (const TargetVariant &other : target.variants)
    if (other.name == variant.fallback)
      return symbolFor(target, other, k);
  return kernelSymbol(k, variant.fallback);
}

/// What a call runs, as profiles name it (spark_call_def::kind): the
/// kernel's kind; a matrix product on the head's rows is the "head", an
/// elementwise binary kernel its operation.
std::string callKind(kernel::KernelOp callee, kernel::CallOp call) {
  kernel::SpecAttr spec = callee.getSpec();
  if (spec.getKind() == kernel::Kind::Binary)
    return kernel::stringifyElementwise(spec.getOp()).str();
  if (spec.getKind() == kernel::Kind::Linear && call.getHeadRows())
    return "head";
  return kernel::stringifyKind(spec.getKind()).str();
}

/// The declarations of the compiled kernels and the microkernels, and the
/// wrappers of microkernels that take the layer's constants (one per kernel,
/// with the kernel's interface), as EmitC functions printed by MLIR's C
/// emitter.
class KernelDeclarations {
public:
  explicit KernelDeclarations(mlir::MLIRContext *context)
      : context(context), b(context),
        module(mlir::ModuleOp::create(mlir::UnknownLoc::get(context))) {
    context->loadDialect<mlir::emitc::EmitCDialect>();
    b.setInsertionPointToEnd(module->getBody());
  }

  /// The C argument types of a kernel, from one call of it: a Halide
  /// buffer per view, float or int32_t per scalar.
  SmallVector<mlir::Type> argumentTypes(kernel::CallOp call) {
    SmallVector<mlir::Type> types;
    for (mlir::Type type : call.getOperandTypes())
      types.push_back(isa<MemRefType>(type) ? buffer()
                      : type.isF32()        ? mlir::Type(b.getF32Type())
                                            : mlir::Type(b.getI32Type()));
    return types;
  }

  /// Declares `symbol` (once): `int symbol(types...)`.
  Error declare(const std::string &symbol, ArrayRef<mlir::Type> types) {
    return declaration(symbol, types).takeError();
  }

  /// Declares `m` (once) and defines `name`, kernel `spec`'s wrapper of it;
  /// `call` is one call of the kernel (its argument types).
  Error wrap(const Microkernel &m, const std::string &name,
             const KernelSpec &spec, kernel::CallOp call) {
    if (wrapped.count(name))
      return Error::success();
    mlir::Location loc = b.getUnknownLoc();
    mlir::Type i32 = b.getI32Type();
    mlir::Type buffer = this->buffer();
    SmallVector<mlir::Type> kernelTypes = argumentTypes(call);
    const std::vector<MicrokernelArg> args = m.arguments(spec);
    SmallVector<mlir::Type> types;
    for (const MicrokernelArg &arg : args) {
      switch (arg.kind) {
      case MicrokernelArg::Kind::Operand:
        if (arg.operand < 0 || arg.operand >= int64_t(kernelTypes.size()))
          return createStringError(
              inconvertibleErrorCode(),
              "microkernel %s: argument %lld of kernel %s, which has %zu",
              m.symbol, (long long)arg.operand, spec.name().c_str(),
              kernelTypes.size());
        types.push_back(kernelTypes[arg.operand]);
        break;
      case MicrokernelArg::Kind::NullBuffer:
        types.push_back(buffer);
        break;
      case MicrokernelArg::Kind::Float:
        types.push_back(b.getF32Type());
        break;
      case MicrokernelArg::Kind::Int:
        types.push_back(i32);
        break;
      }
    }
    Expected<mlir::emitc::FuncOp> callee = declaration(m.symbol, types);
    if (!callee)
      return callee.takeError();
    auto wrapper = mlir::emitc::FuncOp::create(
        b, loc, name, b.getFunctionType(kernelTypes, {i32}));
    wrapper.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
    mlir::Block *entry = wrapper.addEntryBlock();
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(entry);
    SmallVector<mlir::Value> operands;
    for (auto [arg, type] : llvm::zip(args, types)) {
      switch (arg.kind) {
      case MicrokernelArg::Kind::Operand:
        operands.push_back(entry->getArgument(arg.operand));
        break;
      case MicrokernelArg::Kind::NullBuffer:
        operands.push_back(mlir::emitc::LiteralOp::create(
            b, loc, type, b.getStringAttr("NULL")));
        break;
      case MicrokernelArg::Kind::Float:
        operands.push_back(mlir::emitc::ConstantOp::create(
            b, loc, type, b.getF32FloatAttr(float(arg.value))));
        break;
      case MicrokernelArg::Kind::Int:
        operands.push_back(mlir::emitc::LiteralOp::create(
            b, loc, type, b.getStringAttr(std::to_string(int64_t(arg.value)))));
        break;
      }
    }
    auto result =
        mlir::emitc::CallOp::create(b, loc, *callee, operands).getResult(0);
    mlir::emitc::ReturnOp::create(b, loc, result);
    wrapped.insert(name);
    return Error::success();
  }

  /// The declarations and wrappers, in the order made, as C.
  Error print(raw_ostream &os) {
    if (mlir::failed(mlir::verify(*module)))
      return createStringError(inconvertibleErrorCode(),
                               "the microkernel wrappers do not verify");
    for (mlir::Operation &op : module->getBody()->getOperations())
      if (mlir::failed(mlir::emitc::translateToCpp(&op, os)))
        return createStringError(inconvertibleErrorCode(),
                                 "printing the microkernel wrappers failed");
    return Error::success();
  }

private:
  mlir::Type buffer() {
    return mlir::emitc::PointerType::get(
        mlir::emitc::OpaqueType::get(context, "halide_buffer_t"));
  }

  /// The declaration of `symbol`, made on first use; an error when it was
  /// declared with other argument types.
  Expected<mlir::emitc::FuncOp> declaration(const std::string &symbol,
                                            ArrayRef<mlir::Type> types) {
    auto type = b.getFunctionType(types, {b.getI32Type()});
    auto [it, inserted] = declared.try_emplace(symbol);
    if (inserted) {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(module->getBody());
      it->second =
          mlir::emitc::FuncOp::create(b, b.getUnknownLoc(), symbol, type);
      it->second.setSpecifiersAttr(b.getStrArrayAttr({"extern"}));
      it->second.setPrivate();
    } else if (it->second.getFunctionType() != type) {
      return createStringError(inconvertibleErrorCode(),
                               "%s is called with two sets of argument types",
                               symbol.c_str());
    }
    return it->second;
  }

  mlir::MLIRContext *context;
  mlir::OpBuilder b;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::map<std::string, mlir::emitc::FuncOp> declared;
  std::set<std::string> wrapped;
};

class DriverWriter {
public:
  DriverWriter(const ModelPlan &plan, raw_ostream &os) : plan(plan), os(os) {}

  /// The driver around `step`, the step function as C.
  Error write(const TargetInfo &target, kernel::PlanOp planOp, StringRef step) {
    const kernel::PlanSymbols symbols(planOp);
    const llvm::StringMap<int> &kernelIndex = symbols.kernelIndex;
    const std::vector<TargetVariant> &variants = target.variants;
    const std::string env =
        "SPARK_" + StringRef(target.family).upper() + "_VARIANT";
    os << "/* Generated by spark-compile; do not edit. Step driver for a "
       << plan.config.numLayers << "-layer Spark-X2.5 model, target "
       << stringifyTargetKind(plan.options.target) << ". */\n";
    os << "#include \"driver_support.h\"\n#include \"" << target.dispatchHeader
       << "\"\n\n";
    // Kernel prototypes and one table per ISA variant.
    std::vector<kernel::CallOp> calls(plan.kernels.size()); // one of each
    planOp.walk([&](kernel::CallOp call) {
      calls[kernelIndex.lookup(call.getKernel())] = call;
      if (std::optional<StringRef> decode = call.getDecode())
        calls[kernelIndex.lookup(*decode)] = call;
    });
    // The compiled kernels and the microkernels, declared; a microkernel
    // takes the arguments of the kernels it stands for, and one taking the
    // layer's constants is called through a wrapper per kernel (EmitC
    // functions, printed as C).
    KernelDeclarations declarations(planOp.getContext());
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (target.compilesKernel(variant, plan.kernels[i]))
          if (Error e = declarations.declare(
                  kernelSymbol(plan.kernels[i], variant.name),
                  declarations.argumentTypes(calls[i])))
            return e;
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (const Microkernel *m =
                target.microkernelFor(variant, plan.kernels[i]))
          if (Error e =
                  m->arguments
                      ? declarations.wrap(*m, wrapperName(plan.kernels[i], *m),
                                          plan.kernels[i], calls[i])
                      : declarations.declare(
                            m->symbol, declarations.argumentTypes(calls[i])))
            return e;
    if (Error e = declarations.print(os))
      return e;
    os << "\n";
    // Each kernel's function-pointer type is that of the function the best
    // variant calls for it, as declared above (every variant's has the
    // kernel's interface: the tables below check it).
    for (size_t i = 0; i < plan.kernels.size(); ++i)
      os << formatv("typedef __typeof__({0}) *spark_k{1}_fn; /* {2} */\n",
                    symbolFor(target, variants.front(), plan.kernels[i]), i,
                    plan.kernels[i].name());
    os << "\ntypedef struct spark_kernels {\n";
    for (size_t i = 0; i < plan.kernels.size(); ++i)
      os << formatv("  spark_k{0}_fn k{0};\n", i);
    os << "} spark_kernels;\n\n";
    for (const TargetVariant &variant : variants) {
      os << "static const spark_kernels kernels_" << variant.name << " = {";
      for (const KernelSpec &k : plan.kernels)
        os << (&k == &plan.kernels.front() ? "\n    " : ",\n    ")
           << symbolFor(target, variant, k);
      os << "};\n";
    }
    // The variants, best first, and their dispatch (driver_support.h).
    os << "\nstatic const spark_variant_def variants[] = {\n";
    std::string names;
    for (const TargetVariant &v : variants) {
      os << formatv("    {{.name = \"{0}\", .full_name = \"{1}-{0}\", "
                    ".cpu_has = {2}, .kernels = &kernels_{0}},\n",
                    v.name, target.family, v.cpuCheck);
      names += (names.empty() ? "" : ", ") + v.name;
    }
    os << "};\n\n";
    os << formatv("static spark_dispatch spark_driver_dispatch = {{\n"
                  "    .env = \"{0}\",\n"
                  "    .restricted = \"{0} names no variant this CPU can run "
                  "({1})\",\n"
                  "    .unsupported = \"{2}\",\n"
                  "    .count = {3},\n"
                  "    .variants = variants};\n\n",
                  env, names, target.unsupportedMessage, variants.size());
    os << step << "\n";

    // Tensor and cache tables, and the definition.
    // Every table and the definition by field name (model_abi.h).
    os << "static const spark_tensor_def tensors[] = {\n";
    for (const PackTensor &t : plan.tensors)
      os << formatv("    {{.name = \"{0}\", .dtype = {1}, .layout = {2}, "
                    ".bytes = {3}ull},\n",
                    t.name, "SPARK_DTYPE_" + dtypeName(t.dtype).str(),
                    layoutName(t.layout), t.bytes());
    os << "};\n\nstatic const spark_cache_def caches[] = {\n";
    for (const CacheSpec &c : plan.caches)
      os << formatv("    {{.layout = {0}, .dtype = SPARK_DTYPE_{4}, .slots = "
                    "{1}, .kv_heads = {2}, .head_dim = {3}},\n",
                    c.ring ? "SPARK_CACHE_RING" : "SPARK_CACHE_LINEAR", c.slots,
                    c.kvHeads, c.headDim, dtypeName(c.dtype));
    os << "};\n\n";
    // One entry per call and cache write of the plan's step, in order.
    os << "static const spark_call_def calls[] = {\n";
    size_t steps = 0;
    planOp.walk([&](Operation *op) {
      std::string kind;
      int64_t layer = -1;
      if (auto call = dyn_cast<kernel::CallOp>(op)) {
        kind = callKind(symbols.kernels.lookup(call.getKernel()), call);
        if (std::optional<uint64_t> l = call.getLayer())
          layer = int64_t(*l);
      } else if (auto write = dyn_cast<kernel::CacheWriteOp>(op)) {
        kind = "cache_write";
        layer = int64_t(symbols.caches.lookup(write.getCache()).getLayer());
      } else {
        return;
      }
      os << formatv("    {{.kind = \"{0}\", .layer = {1}},\n", kind, layer);
      ++steps;
    });
    os << "};\n\n";
    os << formatv(
        "static const spark_model_def definition = {{\n"
        "    .abi_version = SPARK_MODEL_ABI_VERSION,\n"
        "    .abi_hash = {0}ull,\n"
        "    .config_hash = {1}ull,\n"
        "    .target = \"{2}\",\n"
        "    .vocab_size = {3},\n"
        "    .hidden_size = {4},\n"
        "    .num_layers = {5},\n"
        "    .max_context = {6},\n"
        "    .max_chunk = {7},\n"
        "    .logits_rows = {11},\n"
        "    .arena_bytes = {8}ull,\n"
        "    .num_tensors = {9},\n"
        "    .tensors = tensors,\n"
        "    .num_caches = {10},\n"
        "    .caches = caches,\n"
        "    .unsupported_reason = unsupported_reason,\n"
        "    .dispatch_name = dispatch_name,\n"
        "    .set_num_threads = {14},\n"
        "    .step = step,\n"
        "    .dispatch_reason = {15},\n"
        "    .set_layer_probe = set_layer_probe,\n"
        "    .num_calls = {12},\n"
        "    .calls = calls,\n"
        "    .set_profile = set_profile,\n"
        "};\n\n"
        "const spark_model_def *{13}(void) {{\n"
        "  return &definition;\n}\n",
        plan.abiHash, plan.configHash, stringifyTargetKind(plan.options.target),
        plan.config.vocabSize, plan.config.hiddenSize, plan.config.numLayers,
        plan.options.maxContext, plan.options.maxChunk,
        uint64_t(plan.arenaFloats) * 4, plan.tensors.size(), plan.caches.size(),
        prefillRows(plan.options.maxChunk), steps, plan.options.entryPoint,
        target.threadPool ? "spark_pool_set_threads"
                          : "spark_halide_set_threads",
        target.dispatchReason.empty() ? "spark_no_dispatch_reason"
                                      : target.dispatchReason);
    return Error::success();
  }

private:
  const ModelPlan &plan;
  raw_ostream &os;
};

} // namespace

Expected<std::string> emitDriverSource(const ModelPlan &plan,
                                       const TargetInfo &target) {
  mlir::MLIRContext context;
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> planIR = planToIR(plan, context);
  if (!planIR)
    return planIR.takeError();
  mlir::ModuleOp module = **planIR;
  kernel::PlanOp planOp = *module.getOps<kernel::PlanOp>().begin();
  // The step function: lowered to EmitC, C expressions formed, printed by
  // MLIR's C emitter.
  std::string diagnostics;
  {
    mlir::PassManager pm(&context);
    pm.addPass(createSparkLowerStepToEmitC());
    pm.addNestedPass<mlir::emitc::FuncOp>(
        mlir::emitc::createFormExpressionsPass());
    raw_string_ostream diag(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diag << d << "\n";
      return mlir::success();
    });
    if (mlir::failed(pm.run(module)))
      return createStringError(inconvertibleErrorCode(),
                               "lowering the step to EmitC failed: %s",
                               diagnostics.c_str());
  }
  auto stepFunc = mlir::cast<mlir::emitc::FuncOp>(module.lookupSymbol("step"));
  std::string step;
  raw_string_ostream stepOs(step);
  if (mlir::failed(mlir::emitc::translateToCpp(stepFunc, stepOs)))
    return createStringError(inconvertibleErrorCode(),
                             "printing the step function as C failed");
  std::string text;
  raw_string_ostream os(text);
  if (Error e = DriverWriter(plan, os).write(target, planOp, step))
    return e;
  return text;
}

std::string emitModelHeader(const ModelPlan &plan) {
  return formatv(R"(/* spark_model.h - generated by spark-compile; do not edit.
 * Link libspark_model.a (this model) and libspark_runtime.a, then:
 *   spark_model_open({6}(), "model.spkw", &params, &model);
 * {6} is the library's only global symbol (spark-compile
 * --entry-point names it), so one program can link several models; the
 * SPARK_MODEL_* macros describe one model: include one model's header per
 * source file.
 */
#ifndef SPARK_MODEL_H
#define SPARK_MODEL_H

#include "spark/model_abi.h"

#define SPARK_MODEL_VOCAB_SIZE {0}
#define SPARK_MODEL_HIDDEN_SIZE {1}
#define SPARK_MODEL_NUM_LAYERS {2}
#define SPARK_MODEL_MAX_CONTEXT {3}
#define SPARK_MODEL_MAX_CHUNK {4}
#define SPARK_MODEL_ABI_HASH 0x{5:x-}ull
/* The entry point: SPARK_MODEL_DEFINITION() is {6}(). */
#define SPARK_MODEL_DEFINITION {6}

#ifdef __cplusplus
extern "C" {{
#endif

/* The compiled model: kernels, tensor table, cache shapes, step function. */
const spark_model_def *{6}(void);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_MODEL_H */
)",
                 plan.config.vocabSize, plan.config.hiddenSize,
                 plan.config.numLayers, plan.options.maxContext,
                 plan.options.maxChunk, plan.abiHash, plan.options.entryPoint)
      .str();
}

/// A matrix of the model (embedding, projection, head), not a norm, a table
/// or a matrix's scales or zero points.
static bool isMatrix(const PackTensor &t) {
  return (t.layout == SPARK_LAYOUT_ROW_MAJOR ||
          t.layout == SPARK_LAYOUT_GROUPED_ROWS) &&
         t.shape.size() == 2 && t.role == PackTensor::Role::Data;
}

/// Average stored bits per weight of the matrices (embedding, projections,
/// head): codes plus scales, divided by the parameter count.
static double bitsPerWeight(const ModelPlan &plan) {
  double bits = 0, parameters = 0;
  for (const PackTensor &t : plan.tensors) {
    if (!isMatrix(t))
      continue;        // scales and zeros are counted with their matrix
    if (t.group > 0) { // 4-bit codes + an f16 scale (and zero) per group
                       // (grouped rows' padding not counted)
      double weights = double(t.shape[0]) * double(t.codeCols);
      parameters += weights;
      bits += 4.0 * weights +
              (t.symmetricGroups ? 16.0 : 32.0) * weights / double(t.group);
      continue;
    }
    parameters += double(t.elements());
    bits += 8.0 * double(t.bytes());
    if (t.dtype == DType::I8)
      bits += 32.0 * double(t.shape[0]); // one f32 scale per row
  }
  return parameters > 0 ? bits / parameters : 0.0;
}

/// Each matrix's stored precision ("int4 g128 asymmetric", "int8 per row",
/// or its dtype), by pack tensor name: what the quantization recipe chose.
static json::Object matrixPrecisions(const ModelPlan &plan) {
  json::Object out;
  for (const PackTensor &t : plan.tensors) {
    if (!isMatrix(t))
      continue;
    std::string precision;
    if (t.group > 0)
      precision = "int4 g" + std::to_string(t.group) +
                  (t.symmetricGroups ? " symmetric" : " asymmetric");
    else if (t.dtype == DType::I8)
      precision = "int8 per row";
    else
      precision = dtypeName(t.dtype).lower();
    out[t.name] = precision;
  }
  return out;
}

/// Bytes of the weight pack one decode step reads: every tensor a kernel
/// reads whole (the matrices, their scales and zero points, the norms), not
/// the tables a step reads one row of (the embedding lookup, RoPE tables;
/// a tied embedding is still counted, as the head reads it whole).
static uint64_t decodeWeightBytes(const ModelPlan &plan) {
  std::set<int64_t> read;
  for (const Step &s : plan.steps) {
    if (s.kind != Step::Kind::Call)
      continue;
    KernelKind kind = plan.kernels[s.kernel].kind;
    if (kind == KernelKind::Embed || kind == KernelKind::Rope)
      continue;
    for (const Step::Arg &a : s.args)
      if (!a.scalar() && a.view.base == View::Base::Weight)
        read.insert(a.view.index);
  }
  uint64_t bytes = 0;
  for (int64_t index : read)
    bytes += plan.tensors[index].bytes();
  return bytes;
}

std::string emitManifest(const ModelPlan &plan, uint64_t packBytes,
                         StringRef commandLine) {
  json::Array files{"libspark_model.a"}, variantNames;
  Expected<TargetInfo> target =
      targetFor(plan.options.target, plan.options.amxKernel);
  if (target) {
    if (target->native)
      files.push_back("libspark_model.so");
    for (const TargetVariant &v : target->variants)
      variantNames.push_back(target->family + "-" + v.name);
  } else {
    consumeError(target.takeError());
  }
  for (const char *name : {"spark_model.h", "model.spkw", "manifest.json"})
    files.push_back(name);
  if (plan.options.executable)
    files.push_back("spark-run");
  if (plan.options.calibrated)
    files.push_back("calibration.json");
  json::Array kernels, caches, tensors;
  for (const KernelSpec &k : plan.kernels)
    kernels.push_back(k.name());
  uint64_t cacheBytes = 0;
  for (const CacheSpec &c : plan.caches) {
    caches.push_back(json::Object{{"layer", c.layer},
                                  {"tensor", c.keys ? "keys" : "values"},
                                  {"layout", c.ring ? "ring" : "linear"},
                                  {"slots", c.slots},
                                  {"kv_heads", c.kvHeads},
                                  {"head_dim", c.headDim},
                                  {"dtype", dtypeName(c.dtype).lower()},
                                  {"bytes", c.bytes()}});
    cacheBytes += c.bytes();
  }
  uint64_t ropeBytes = 0;
  for (const PackTensor &t : plan.tensors)
    if (t.layout == 1)
      ropeBytes += t.bytes();
  json::Object manifest{
      {"format", "spark-compile manifest 1"},
      {"target", stringifyTargetKind(plan.options.target)},
      {"dtype", dtypeName(plan.options.dtype).lower()},
      {"quant", stringifyQuantScheme(plan.options.quant)},
      {"bits_per_weight", bitsPerWeight(plan)},
      {"group_size", hasFourBitWeights(plan.options.quant)
                         ? json::Value(plan.options.groupSize)
                         : json::Value(nullptr)},
      // How the 4-bit codes were chosen: GPTQ (--gptq), or each group's
      // grid search, weighted by calibrated input importance or not.
      {"four_bit_rounding", !hasFourBitWeights(plan.options.quant)
                                ? json::Value(nullptr)
                            : plan.options.secondMoments ? json::Value("gptq")
                            : !plan.options.importance.empty()
                                ? json::Value("importance-weighted search")
                                : json::Value("search")},
      {"quant_recipe", json::Array(plan.options.quantRecipe)},
      {"matrices", matrixPrecisions(plan)},
      {"max_context", plan.options.maxContext},
      {"max_chunk", plan.options.maxChunk},
      {"abi_hash", formatv("{0:x-16}", plan.abiHash).str()},
      {"config_hash", formatv("{0:x-16}", plan.configHash).str()},
      {"model", json::Object{{"layers", plan.config.numLayers},
                             {"hidden_size", plan.config.hiddenSize},
                             {"vocab_size", plan.config.vocabSize}}},
      {"kernels", std::move(kernels)},
      {"arena_bytes", uint64_t(plan.arenaFloats) * 4},
      {"caches", std::move(caches)},
      {"cache_bytes", cacheBytes},
      {"rope_table_bytes", ropeBytes},
      {"pack_bytes", packBytes},
      {"decode_weight_bytes", decodeWeightBytes(plan)},
      {"pack_tensors", plan.tensors.size()},
      {"variants", std::move(variantNames)},
      // Into the quantized products: dynamic / static int8, or f32 / bf16 /
      // f16 (what --activations chose); f32 without quantization.
      {"activations", plan.options.quant == QuantScheme::None ||
                              plan.options.activations == Activations::None
                          ? StringRef("f32")
                          : stringifyActivations(plan.options.activations)},
      {"files", std::move(files)},
      {"entry_point", plan.options.entryPoint},
      {"reproduce", commandLine}};
  if (plan.options.probeInputs) {
    json::Array names;
    for (const std::string &name : plan.inputProbes)
      names.push_back(name);
    // Probe ids num_layers + i: the input of the product reading names[i].
    manifest["input_probes"] = std::move(names);
  }
  return formatv("{0:2}", json::Value(std::move(manifest))).str() + "\n";
}

} // namespace spark
