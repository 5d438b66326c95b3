//===- DriverEmitter.cpp - generate the step driver, header, manifest -----===//
//
// The driver is C printed by MLIR's C emitter from EmitC, in three parts:
// the kernels' declarations, the microkernel wrappers and one dispatch
// function per kernel of the plan (the function each ISA variant calls for
// it; the choice among the variants is driver_support.h's); the step
// function (the plan's step lowered to EmitC by spark-lower-step-to-emitc:
// one call per kernel in the order of the step, with the buffer views,
// cache slots and arena offsets the plan fixed at compile time); and the
// variants, the model's tables and its spark_model_def, filled field by
// field by spark_define_model() on the entry point's first call. The fixed
// helpers are targets/common/lib/driver_support.h.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PlanIR.h"
#include "spark/Kernels/DataFiles.h"

#include "spark/Passes/Passes.h"
#include "spark/model_abi.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/EmitC/Transforms/Passes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
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

/// A C string literal of `text` (quotes and backslashes escaped, other
/// bytes outside printable ASCII as octal escapes), for emitc.literal.
std::string cString(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char escape[5];
      snprintf(escape, sizeof(escape), "\\%03o", unsigned(c));
      out += escape;
    }
  }
  return out + "\"";
}

/// One part of the driver as EmitC ops in a module of its own, printed by
/// MLIR's C emitter: the includes, the declarations of the compiled kernels
/// and the microkernels, the wrappers of microkernels that take the layer's
/// constants (one per kernel, with the kernel's interface), the dispatch
/// function of each kernel, and the tables and definition of the model.
class DriverUnit {
public:
  explicit DriverUnit(mlir::MLIRContext *context)
      : context(context), b(context),
        module(mlir::ModuleOp::create(mlir::UnknownLoc::get(context))) {
    context->loadDialect<mlir::emitc::EmitCDialect>();
    b.setInsertionPointToEnd(module->getBody());
  }

  void comment(StringRef text) {
    mlir::emitc::VerbatimOp::create(b, b.getUnknownLoc(),
                                    b.getStringAttr("/* " + text + " */"));
  }
  void include(StringRef header) {
    mlir::emitc::IncludeOp::create(b, b.getUnknownLoc(), header);
  }
  void blankLine() {
    mlir::emitc::VerbatimOp::create(b, b.getUnknownLoc(), b.getStringAttr(""));
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
    if (defined.count(name))
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
    mlir::emitc::FuncOp wrapper = function(name, kernelTypes, i32);
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
        operands.push_back(literal(type, "NULL"));
        break;
      case MicrokernelArg::Kind::Float:
        operands.push_back(mlir::emitc::ConstantOp::create(
            b, loc, type, b.getF32FloatAttr(float(arg.value))));
        break;
      case MicrokernelArg::Kind::Int:
        operands.push_back(literal(type, std::to_string(int64_t(arg.value))));
        break;
      }
    }
    auto result =
        mlir::emitc::CallOp::create(b, loc, *callee, operands).getResult(0);
    mlir::emitc::ReturnOp::create(b, loc, result);
    return Error::success();
  }

  /// Defines the dispatch function of the plan's kernel `index`
  /// (kernelDispatchName): `variant` position i calls symbols[i], declared
  /// or defined above with the kernel's argument types `types`; -1 for a
  /// position no variant has.
  Error dispatch(int64_t index, ArrayRef<mlir::Type> types,
                 ArrayRef<std::string> symbols) {
    mlir::Location loc = b.getUnknownLoc();
    mlir::Type i32 = b.getI32Type();
    SmallVector<mlir::Type> argTypes{i32};
    argTypes.append(types.begin(), types.end());
    mlir::emitc::FuncOp func =
        function(kernelDispatchName(index), argTypes, i32);
    mlir::Block *entry = func.addEntryBlock();
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(entry);
    SmallVector<mlir::Value> operands(entry->getArguments().drop_front());
    mlir::Value variant = entry->getArgument(0);
    // The variants that call each function, in order of first use.
    SmallVector<std::pair<std::string, SmallVector<int64_t>>> callers;
    for (auto [position, symbol] : llvm::enumerate(symbols)) {
      auto *it = llvm::find_if(
          callers, [&](const auto &c) { return c.first == symbol; });
      if (it == callers.end())
        callers.push_back({symbol, {}}), it = callers.end() - 1;
      it->second.push_back(int64_t(position));
    }
    auto callOf = [&](const std::string &symbol) -> Expected<mlir::Value> {
      auto callee = module->lookupSymbol<mlir::emitc::FuncOp>(symbol);
      if (!callee)
        return createStringError(inconvertibleErrorCode(),
                                 "the driver calls %s, which it does not "
                                 "declare",
                                 symbol.c_str());
      if (callee.getFunctionType().getInputs() != types)
        return createStringError(
            inconvertibleErrorCode(),
            "%s does not take the arguments of kernel %lld", symbol.c_str(),
            (long long)index);
      return mlir::emitc::CallOp::create(b, loc, callee, operands).getResult(0);
    };
    if (callers.size() == 1) { // every variant calls one function
      Expected<mlir::Value> result = callOf(callers.front().first);
      if (!result)
        return result.takeError();
      mlir::emitc::ReturnOp::create(b, loc, *result);
      return Error::success();
    }
    // rc = -1; if (variant == i || ...) rc = f(...); else if ...; return rc.
    mlir::Value rc = mlir::emitc::VariableOp::create(
        b, loc, mlir::emitc::LValueType::get(i32), b.getI32IntegerAttr(-1));
    for (const auto &[symbol, positions] : callers) {
      mlir::Value cond;
      for (int64_t position : positions) {
        mlir::Value is = mlir::emitc::CmpOp::create(
            b, loc, b.getI1Type(), mlir::emitc::CmpPredicate::eq, variant,
            literal(i32, std::to_string(position)));
        cond = cond ? mlir::Value(mlir::emitc::LogicalOrOp::create(
                          b, loc, b.getI1Type(), cond, is))
                    : is;
      }
      auto ifOp = mlir::emitc::IfOp::create(b, loc, cond, false, false);
      b.setInsertionPointToEnd(b.createBlock(&ifOp.getThenRegion()));
      Expected<mlir::Value> result = callOf(symbol);
      if (!result)
        return result.takeError();
      mlir::emitc::AssignOp::create(b, loc, rc, *result);
      mlir::emitc::YieldOp::create(b, loc);
      b.setInsertionPointAfter(ifOp);
    }
    mlir::emitc::ReturnOp::create(b, loc,
                                  mlir::emitc::LoadOp::create(b, loc, i32, rc));
    return Error::success();
  }

  /// `static TYPE name[count];`, zero until the definition function fills
  /// it.
  void table(StringRef name, StringRef type, size_t count) {
    global(name, mlir::emitc::ArrayType::get({int64_t(count)}, opaque(type)));
  }
  /// `static TYPE name;`, zero until filled.
  void global(StringRef name, mlir::Type type) {
    mlir::emitc::GlobalOp::create(b, b.getUnknownLoc(), name, type,
                                  /*initialValue=*/nullptr,
                                  /*externSpecifier=*/false,
                                  /*staticSpecifier=*/true,
                                  /*constSpecifier=*/false);
  }

  /// A function `name(types...) -> result` (static unless `exported`),
  /// added at the end of the unit.
  mlir::emitc::FuncOp function(StringRef name, ArrayRef<mlir::Type> types,
                               mlir::Type result, bool exported = false) {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module->getBody());
    auto func = mlir::emitc::FuncOp::create(
        b, b.getUnknownLoc(), name,
        b.getFunctionType(types, result ? mlir::TypeRange(result)
                                        : mlir::TypeRange()));
    if (!exported)
      func.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
    defined.insert(name.str());
    return func;
  }

  /// The statements of a function body: `lhs.member = value;` and calls.
  class Body {
  public:
    Body(DriverUnit &unit, mlir::emitc::FuncOp func)
        : unit(unit), guard(unit.b) {
      unit.b.setInsertionPointToEnd(func.addEntryBlock());
    }
    /// The lvalue of the global `name` (an array or a struct).
    mlir::Value global(StringRef name, mlir::Type type) {
      return mlir::emitc::GetGlobalOp::create(unit.b, unit.b.getUnknownLoc(),
                                              type, name);
    }
    /// `array[index]`, an element of a table.
    mlir::Value element(mlir::Value array, size_t index) {
      return mlir::emitc::SubscriptOp::create(
          unit.b, unit.b.getUnknownLoc(),
          cast<mlir::TypedValue<mlir::emitc::ArrayType>>(array),
          mlir::ValueRange{
              unit.literal(unit.b.getI32Type(), std::to_string(index))});
    }
    /// `record.member = text;`, text a C expression of a constant, an
    /// enumerator or a function.
    void set(mlir::Value record, StringRef member, StringRef text) {
      mlir::Type type = unit.opaque("spark_field"); // not printed
      mlir::Value field = mlir::emitc::MemberOp::create(
          unit.b, unit.b.getUnknownLoc(), mlir::emitc::LValueType::get(type),
          member, record);
      mlir::emitc::AssignOp::create(unit.b, unit.b.getUnknownLoc(), field,
                                    unit.literal(type, text));
    }
    void set(mlir::Value record, StringRef member, int64_t value) {
      set(record, member, std::to_string(value));
    }
    void setString(mlir::Value record, StringRef member, StringRef text) {
      set(record, member, cString(text));
    }
    void call(StringRef callee, ArrayRef<std::string> arguments) {
      SmallVector<mlir::Value> operands;
      for (const std::string &argument : arguments)
        operands.push_back(unit.literal(unit.opaque("argument"), argument));
      mlir::emitc::CallOpaqueOp::create(unit.b, unit.b.getUnknownLoc(),
                                        mlir::TypeRange(), callee, operands);
    }
    void ret(mlir::Value value = nullptr) {
      mlir::emitc::ReturnOp::create(unit.b, unit.b.getUnknownLoc(), value);
    }
    mlir::OpBuilder &builder() { return unit.b; }

  private:
    DriverUnit &unit;
    mlir::OpBuilder::InsertionGuard guard;
  };

  /// The unit, verified, its functions' C expressions formed (EmitC's
  /// form-expressions), in the order made, as C.
  Error print(raw_ostream &os) {
    mlir::PassManager pm(context);
    pm.addNestedPass<mlir::emitc::FuncOp>(
        mlir::emitc::createFormExpressionsPass());
    if (mlir::failed(mlir::verify(*module)) || mlir::failed(pm.run(*module)))
      return createStringError(inconvertibleErrorCode(),
                               "the generated driver does not verify");
    for (mlir::Operation &op : module->getBody()->getOperations())
      if (mlir::failed(mlir::emitc::translateToCpp(&op, os)))
        return createStringError(inconvertibleErrorCode(),
                                 "printing the generated driver failed");
    return Error::success();
  }

  mlir::Type opaque(StringRef text) {
    return mlir::emitc::OpaqueType::get(context, text);
  }
  mlir::Value literal(mlir::Type type, StringRef text) {
    return mlir::emitc::LiteralOp::create(b, b.getUnknownLoc(), type,
                                          b.getStringAttr(text));
  }

private:
  mlir::Type buffer() {
    return mlir::emitc::PointerType::get(opaque("halide_buffer_t"));
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
  std::set<std::string> defined;
};

class DriverWriter {
public:
  DriverWriter(const ModelPlan &plan, raw_ostream &os) : plan(plan), os(os) {}

  /// The driver around `step`, the step function as C.
  Error write(const TargetInfo &target, kernel::PlanOp planOp, StringRef step) {
    const kernel::PlanSymbols symbols(planOp);
    const llvm::StringMap<int> &kernelIndex = symbols.kernelIndex;
    const std::vector<TargetVariant> &variants = target.variants;
    mlir::MLIRContext *context = planOp.getContext();
    DriverUnit head(context);
    head.comment(("Generated by spark-compile; do not edit. Step driver for "
                  "a " +
                  Twine(plan.config.numLayers) +
                  "-layer Spark-X2.5 model, target " +
                  stringifyTargetKind(plan.options.target) + ".")
                     .str());
    head.include("driver_support.h");
    head.include(target.dispatchHeader);
    // The model's header, for the entry point's prototype (the library
    // build writes it beside the driver).
    head.include("spark_model.h");
    head.blankLine();
    std::vector<kernel::CallOp> calls(plan.kernels.size()); // one of each
    planOp.walk([&](kernel::CallOp call) {
      calls[kernelIndex.lookup(call.getKernel())] = call;
      if (std::optional<StringRef> decode = call.getDecode())
        calls[kernelIndex.lookup(*decode)] = call;
    });
    // The compiled kernels and the microkernels, declared; a microkernel
    // takes the arguments of the kernels it stands for, and one taking the
    // layer's constants is called through a wrapper per kernel.
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (target.compilesKernel(variant, plan.kernels[i]))
          if (Error e =
                  head.declare(kernelSymbol(plan.kernels[i], variant.name),
                               head.argumentTypes(calls[i])))
            return e;
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (const Microkernel *m =
                target.microkernelFor(variant, plan.kernels[i]))
          if (Error e =
                  m->arguments
                      ? head.wrap(*m, wrapperName(plan.kernels[i], *m),
                                  plan.kernels[i], calls[i])
                      : head.declare(m->symbol, head.argumentTypes(calls[i])))
            return e;
    // Each kernel's dispatch: the function each variant calls for it.
    for (size_t i = 0; i < plan.kernels.size(); ++i) {
      std::vector<std::string> chosen;
      for (const TargetVariant &variant : variants)
        chosen.push_back(symbolFor(target, variant, plan.kernels[i]));
      if (Error e =
              head.dispatch(int64_t(i), head.argumentTypes(calls[i]), chosen))
        return e;
    }
    if (Error e = head.print(os))
      return e;
    os << step << "\n";
    DriverUnit tail(context);
    if (Error e = writeDefinition(tail, target, planOp, symbols))
      return e;
    return tail.print(os);
  }

private:
  /// The variants, the tables and the definition, zero in the library
  /// image, filled by spark_define_model() when the entry point is first
  /// called (driver_support.h's spark_defined), every field by name
  /// (model_abi.h).
  Error writeDefinition(DriverUnit &unit, const TargetInfo &target,
                        kernel::PlanOp planOp,
                        const kernel::PlanSymbols &symbols) {
    const std::vector<TargetVariant> &variants = target.variants;
    // One entry per call and cache write of the plan's step, in order.
    std::vector<std::pair<std::string, int64_t>> stepCalls;
    planOp.walk([&](Operation *op) {
      if (auto call = dyn_cast<kernel::CallOp>(op)) {
        std::optional<uint64_t> layer = call.getLayer();
        stepCalls.push_back(
            {callKind(symbols.kernels.lookup(call.getKernel()), call),
             layer ? int64_t(*layer) : -1});
      } else if (auto write = dyn_cast<kernel::CacheWriteOp>(op)) {
        stepCalls.push_back(
            {"cache_write",
             int64_t(symbols.caches.lookup(write.getCache()).getLayer())});
      }
    });
    auto arrayOf = [&](StringRef type, size_t count) {
      return mlir::emitc::ArrayType::get({int64_t(count)}, unit.opaque(type));
    };
    unit.table("variants", "spark_variant_def", variants.size());
    unit.table("tensors", "spark_tensor_def", plan.tensors.size());
    unit.table("caches", "spark_cache_def", plan.caches.size());
    unit.table("calls", "spark_call_def", stepCalls.size());
    mlir::Type definitionType = unit.opaque("spark_model_def");
    unit.global("definition", definitionType);
    mlir::emitc::FuncOp define =
        unit.function("spark_define_model", {}, nullptr);
    {
      DriverUnit::Body body(unit, define);
      mlir::Value table = body.global(
          "variants", arrayOf("spark_variant_def", variants.size()));
      std::string names;
      for (auto [i, v] : llvm::enumerate(variants)) {
        mlir::Value e = body.element(table, i);
        body.setString(e, "name", v.name);
        body.setString(e, "full_name", target.family + "-" + v.name);
        body.set(e, "cpu_has", v.cpuCheck);
        names += (names.empty() ? "" : ", ") + v.name;
      }
      const std::string env =
          "SPARK_" + StringRef(target.family).upper() + "_VARIANT";
      body.call(
          "spark_set_driver_dispatch",
          {cString(env),
           cString(env + " names no variant this CPU can run (" + names + ")"),
           cString(target.unsupportedMessage), std::to_string(variants.size()),
           "variants"});
      table = body.global("tensors",
                          arrayOf("spark_tensor_def", plan.tensors.size()));
      for (auto [i, t] : llvm::enumerate(plan.tensors)) {
        mlir::Value e = body.element(table, i);
        body.setString(e, "name", t.name);
        body.set(e, "dtype", "SPARK_DTYPE_" + dtypeName(t.dtype).str());
        body.set(e, "layout", layoutName(t.layout));
        body.set(e, "bytes", std::to_string(t.bytes()) + "ull");
      }
      table =
          body.global("caches", arrayOf("spark_cache_def", plan.caches.size()));
      for (auto [i, c] : llvm::enumerate(plan.caches)) {
        mlir::Value e = body.element(table, i);
        body.set(e, "layout",
                 c.ring ? "SPARK_CACHE_RING" : "SPARK_CACHE_LINEAR");
        body.set(e, "dtype", "SPARK_DTYPE_" + dtypeName(c.dtype).str());
        body.set(e, "slots", c.slots);
        body.set(e, "kv_heads", c.kvHeads);
        body.set(e, "head_dim", c.headDim);
      }
      table = body.global("calls", arrayOf("spark_call_def", stepCalls.size()));
      for (auto [i, c] : llvm::enumerate(stepCalls)) {
        mlir::Value e = body.element(table, i);
        body.setString(e, "kind", c.first);
        body.set(e, "layer", c.second);
      }
      mlir::Value d = body.global("definition",
                                  mlir::emitc::LValueType::get(definitionType));
      body.set(d, "abi_version", "SPARK_MODEL_ABI_VERSION");
      body.set(d, "abi_hash", std::to_string(plan.abiHash) + "ull");
      body.set(d, "config_hash", std::to_string(plan.configHash) + "ull");
      body.setString(d, "target", stringifyTargetKind(plan.options.target));
      body.set(d, "vocab_size", plan.config.vocabSize);
      body.set(d, "hidden_size", plan.config.hiddenSize);
      body.set(d, "num_layers", plan.config.numLayers);
      body.set(d, "max_context", plan.options.maxContext);
      body.set(d, "max_chunk", plan.options.maxChunk);
      body.set(d, "logits_rows", prefillRows(plan.options.maxChunk));
      body.set(d, "arena_bytes",
               std::to_string(uint64_t(plan.arenaFloats) * 4) + "ull");
      body.set(d, "num_tensors", int64_t(plan.tensors.size()));
      body.set(d, "tensors", "tensors");
      body.set(d, "num_caches", int64_t(plan.caches.size()));
      body.set(d, "caches", "caches");
      body.set(d, "unsupported_reason", "unsupported_reason");
      body.set(d, "dispatch_name", "dispatch_name");
      body.set(d, "set_num_threads",
               target.threadPool ? "spark_pool_set_threads"
                                 : "spark_halide_set_threads");
      body.set(d, "step", "step");
      body.set(d, "dispatch_reason",
               target.dispatchReason.empty() ? "spark_no_dispatch_reason"
                                             : target.dispatchReason);
      body.set(d, "set_layer_probe", "set_layer_probe");
      body.set(d, "num_calls", int64_t(stepCalls.size()));
      body.set(d, "calls", "calls");
      body.set(d, "set_profile", "set_profile");
      body.ret();
    }
    // The entry point: spark_defined(&definition), declared with its
    // prototype by spark_model.h.
    mlir::Type result =
        mlir::emitc::PointerType::get(unit.opaque("const spark_model_def"));
    mlir::emitc::FuncOp entry =
        unit.function(plan.options.entryPoint, {}, result, /*exported=*/true);
    {
      DriverUnit::Body body(unit, entry);
      mlir::OpBuilder &b = body.builder();
      mlir::Value d = body.global("definition",
                                  mlir::emitc::LValueType::get(definitionType));
      mlir::Value address = mlir::emitc::AddressOfOp::create(
          b, b.getUnknownLoc(), mlir::emitc::PointerType::get(definitionType),
          d);
      mlir::Value defined = mlir::emitc::CallOpaqueOp::create(
                                b, b.getUnknownLoc(), mlir::TypeRange(result),
                                "spark_defined", mlir::ValueRange{address})
                                .getResult(0);
      body.ret(defined);
    }
    return Error::success();
  }

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

Expected<std::string> emitModelHeader(const ModelPlan &plan) {
  const std::string path = dataPath("targets/common/lib/spark_model.h.in");
  ErrorOr<std::unique_ptr<MemoryBuffer>> file = MemoryBuffer::getFile(path);
  if (!file)
    return createStringError(file.getError(), "%s: %s", path.c_str(),
                             file.getError().message().c_str());
  // The template after its own comment, the placeholders replaced.
  StringRef text = (*file)->getBuffer();
  text = text.substr(std::min(text.size(), text.find("\n\n") + 2));
  const std::pair<StringRef, std::string> values[] = {
      {"@VOCAB_SIZE@", std::to_string(plan.config.vocabSize)},
      {"@HIDDEN_SIZE@", std::to_string(plan.config.hiddenSize)},
      {"@NUM_LAYERS@", std::to_string(plan.config.numLayers)},
      {"@MAX_CONTEXT@", std::to_string(plan.options.maxContext)},
      {"@MAX_CHUNK@", std::to_string(plan.options.maxChunk)},
      {"@ABI_HASH@", utohexstr(plan.abiHash, /*LowerCase=*/true)},
      {"@ENTRY_POINT@", plan.options.entryPoint}};
  std::string header;
  while (!text.empty()) {
    size_t at = text.find('@');
    header += text.take_front(at);
    if (at == StringRef::npos)
      break;
    text = text.drop_front(at);
    const auto *value = llvm::find_if(
        values, [&](const auto &v) { return text.starts_with(v.first); });
    if (value == std::end(values))
      return createStringError(inconvertibleErrorCode(),
                               "%s: unknown placeholder at \"%s\"",
                               path.c_str(), text.take_front(24).str().c_str());
    header += value->second;
    text = text.drop_front(value->first.size());
  }
  return header;
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
    if (t.group > 0) { // 4/6-bit codes + an f16 scale (and zero) per group
                       // (grouped rows' padding not counted)
      double weights = double(t.shape[0]) * double(t.codeCols);
      parameters += weights;
      bits += double(t.codeBits) * weights +
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
      precision = "int" + std::to_string(t.codeBits) + " g" +
                  std::to_string(t.group) +
                  (t.symmetricGroups ? " symmetric" : " asymmetric") +
                  (t.gridImported ? ", grid from the checkpoint" : "");
    else if (t.dtype == DType::I8)
      precision = "int8 per row";
    else
      precision = dtypeName(t.dtype).lower();
    out[t.name] = precision;
  }
  return out;
}

/// Whether every 4-bit matrix took the grid its checkpoint brought (the
/// others say so in "matrices").
static bool allImported(const ModelPlan &plan) {
  bool any = false;
  for (const PackTensor &t : plan.tensors)
    if (t.group > 0) {
      if (!t.gridImported)
        return false;
      any = true;
    }
  return any;
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
  Expected<TargetInfo> target = targetFor(
      plan.options.target, plan.options.amxKernel, plan.options.halideKernels);
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
  bool fourBit = false; // any matrix stored in 4- or 6-bit groups
  for (const PackTensor &t : plan.tensors) {
    if (t.layout == 1)
      ropeBytes += t.bytes();
    fourBit |= isMatrix(t) && t.group > 0;
  }
  json::Object manifest{
      {"format", "spark-compile manifest 1"},
      {"target", stringifyTargetKind(plan.options.target)},
      {"dtype", dtypeName(plan.options.dtype).lower()},
      {"quant", stringifyQuantScheme(plan.options.quant)},
      {"bits_per_weight", bitsPerWeight(plan)},
      {"group_size",
       fourBit ? json::Value(plan.options.groupSize) : json::Value(nullptr)},
      // How the 4-bit codes were chosen: GPTQ (--gptq), or each group's
      // grid search, weighted by calibrated input importance or not.
      {"four_bit_rounding", !fourBit ? json::Value(nullptr)
                            : allImported(plan)
                                ? json::Value("from the checkpoint")
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
