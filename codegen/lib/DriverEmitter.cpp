//===- DriverEmitter.cpp - generate the step driver, header, manifest -----===//
//
// The driver is C: one call per kernel in the order of the step function,
// with the buffer views, cache slots and arena offsets the plan fixed at
// compile time. Nothing in it is written by hand per model.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Emit.h"
#include "spark/Codegen/PlanIR.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <map>
#include <set>

using namespace llvm;
using mlir::BlockArgument;
using mlir::FloatAttr;
using mlir::IntegerAttr;
using mlir::MemRefType;
using mlir::NameLoc;
using mlir::Operation;
namespace arith = mlir::arith;

namespace spark {

std::string kernelSymbol(const KernelSpec &k, StringRef variant) {
  return "spark_" + k.name() + "_" + variant.str();
}

namespace {

const char *kDriverPrelude = R"(#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "HalideRuntime.h"
#include "spark/model_abi.h"

extern int halide_set_num_threads(int n);
extern void spark_pool_set_threads(int n); /* thread_pool.c */

/* Describes host memory as a Halide buffer: dims inner first, min 0. Not
   inlined: a step calls it a few hundred times (tens of nanoseconds in all),
   and inlined into every call it doubled the time clang takes over this
   file. */
__attribute__((noinline)) static halide_buffer_t *
spark_view(halide_buffer_t *b, halide_dimension_t *d, const void *host,
           uint8_t code, uint8_t bits, int rank, const int32_t *extent,
           const int32_t *stride) {
  memset(b, 0, sizeof(*b));
  b->host = (uint8_t *)host;
  b->type.code = code;
  b->type.bits = bits;
  b->type.lanes = 1;
  b->dimensions = rank;
  b->dim = d;
  for (int i = 0; i < rank; ++i) {
    d[i].min = 0;
    d[i].extent = extent[i];
    d[i].stride = stride[i];
    d[i].flags = 0;
  }
  return b;
}

/* Cache rows of 16-bit elements: each f32 key or value rounded to nearest
   even (NaN stays NaN, f16 overflow goes to infinity, f16 subnormals kept). */
static inline uint16_t spark_bf16_bits(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline uint16_t spark_f16_bits(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) /* 65520 and above (and infinity) */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) /* a normal f16 */
    return (uint16_t)(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
  if (a <= 0x33000000u) /* at most half the least subnormal */
    return (uint16_t)sign;
  const int shift = 126 - (int)(a >> 23); /* 14 .. 24 */
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, half = 1u << (shift - 1);
  const uint32_t rest = m & ((half << 1) - 1u);
  uint32_t k = m >> shift;
  if (rest > half || (rest == half && (k & 1u)))
    ++k;
  return (uint16_t)(sign | k);
}

static inline void spark_round_row_bf16(uint16_t *out, const float *in, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = spark_bf16_bits(in[i]);
}

static inline void spark_round_row_f16(uint16_t *out, const float *in, int n) {
  for (int i = 0; i < n; ++i)
    out[i] = spark_f16_bits(in[i]);
}
)";

/// `value` as an exact C float literal (hexadecimal).
std::string floatLiteral(float value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%af", double(value));
  return text;
}

/// The C parameter list of a kernel, from a call of it: a Halide buffer per
/// view, int32_t or float per scalar, the output last.
std::string prototype(kernel::CallOp call) {
  std::string args;
  for (mlir::Type type : call.getOperandTypes())
    args += std::string(args.empty() ? "" : ", ") +
            (isa<MemRefType>(type) ? "halide_buffer_t *"
             : type.isF32()        ? "float"
                                   : "int32_t");
  return args;
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
    return m->wrapper ? wrapperName(k, *m) : m->symbol;
  if (target.compilesKernel(variant, k))
    return kernelSymbol(k, variant.name);
  for (const TargetVariant &other : target.variants)
    if (other.name == variant.fallback)
      return symbolFor(target, other, k);
  return kernelSymbol(k, variant.fallback);
}

/// What a step runs, as profiles name it (spark_call_def::kind).
const char *callKind(const ModelPlan &plan, const Step &step) {
  if (step.kind == Step::Kind::CacheWrite)
    return "cache_write";
  const KernelSpec &k = plan.kernels[step.kernel];
  switch (k.kind) {
  case KernelKind::Embed:
    return "embed";
  case KernelKind::RMSNorm:
    return "rms_norm";
  case KernelKind::Linear:
    return step.headRows ? "head" : "linear";
  case KernelKind::Rope:
    return "rope";
  case KernelKind::Attention:
    return "attention";
  case KernelKind::HeadGate:
    return "head_gate";
  case KernelKind::Geglu:
    return "geglu";
  case KernelKind::Binary:
    return k.op == ElementwiseOp::Add ? "add" : "mul";
  case KernelKind::Unary:
    return "unary";
  case KernelKind::Mean:
    return "mean";
  }
  return "other";
}

class DriverWriter {
public:
  DriverWriter(const ModelPlan &plan, raw_ostream &os) : plan(plan), os(os) {}

  /// Indices of the plan's kernels, tensors and caches by symbol.
  void indexSymbols(kernel::PlanOp planOp) {
    for (Operation &op : planOp.getBody().front()) {
      if (auto k = dyn_cast<kernel::KernelOp>(op))
        kernelIndex[k.getSymName()] = int(kernelIndex.size());
      else if (auto t = dyn_cast<kernel::TensorOp>(op))
        tensorIndex[t.getSymName()] = int(tensorIndex.size());
      else if (auto c = dyn_cast<kernel::CacheOp>(op))
        cacheIndex[c.getSymName()] = int(cacheIndex.size());
    }
  }

  /// What a view's memref says: element offset, inner-first extents and
  /// strides, and the row stride of a dynamic outermost (rows) dimension.
  struct Layout {
    int64_t offset = 0, rowStride = 0;
    bool hasRows = false;
    SmallVector<int64_t> extents, strides;
  };
  static Layout layoutOf(MemRefType type) {
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

  /// Halide type code and bits of a view's elements.
  static std::pair<int, int> typeOf(mlir::Type element) {
    if (element.isSignlessInteger(32))
      return {0, 32};
    Halide::Type type = halideType(elementDType(element));
    return {int(type.code()), type.bits()};
  }

  void viewExpr(kernel::ViewOp v, int slot, const char *rows,
                const char *firstRow) {
    const Layout l = layoutOf(v.getType());
    std::string host;
    switch (v.getBase()) {
    case kernel::Buffer::Arena:
      host = formatv("A + {0} + (size_t)({1}) * {2}", l.offset, firstRow,
                     l.rowStride);
      break;
    case kernel::Buffer::Weight:
      host = formatv("W[{0}]", tensorIndex.lookup(*v.getSource()));
      break;
    case kernel::Buffer::Cache:
      host = formatv("C[{0}]", cacheIndex.lookup(*v.getSource()));
      break;
    case kernel::Buffer::Tokens:
      host = formatv("ids + ({0})", firstRow);
      break;
    case kernel::Buffer::Logits:
      host = formatv("logits + {0}", l.offset);
      break;
    }
    auto [code, bits] = typeOf(v.getType().getElementType());
    std::string extents, strides;
    for (size_t i = 0; i < l.extents.size(); ++i) {
      extents += formatv("{0}{1}", i ? ", " : "", l.extents[i]);
      strides += formatv("{0}{1}", i ? ", " : "", l.strides[i]);
    }
    size_t rank = l.extents.size();
    if (l.hasRows) {
      extents += formatv("{0}{1}", rank ? ", " : "", rows);
      strides += formatv("{0}{1}", rank ? ", " : "", l.rowStride);
      ++rank;
    }
    os << formatv("spark_view(&b[{0}], d[{0}], {1}, {2}, {3}, {4}, "
                  "(const int32_t[]){{{5}}, (const int32_t[]){{{6}})",
                  slot, host, code, bits, rank, extents, strides);
  }

  /// A scalar operand: the first row's position, the rows a cache holds
  /// (min(pos0, slots)), or a float constant.
  void scalarExpr(mlir::Value v) {
    if (isa<BlockArgument>(v)) {
      os << "pos0";
    } else if (auto min = v.getDefiningOp<arith::MinSIOp>()) {
      int64_t bound =
          cast<IntegerAttr>(
              min.getRhs().getDefiningOp<arith::ConstantOp>().getValue())
              .getInt();
      os << formatv("(pos0 < {0} ? pos0 : {0})", bound);
    } else {
      auto constant = v.getDefiningOp<arith::ConstantOp>();
      os << floatLiteral(
          float(cast<FloatAttr>(constant.getValue()).getValueAsDouble()));
    }
  }

  void callWith(kernel::CallOp call, StringRef kernel, const char *rows,
                const char *first, const char *indent) {
    os << indent << "rc = K->k" << kernelIndex.lookup(kernel) << "(";
    for (auto [i, operand] : llvm::enumerate(call.getOperands())) {
      os << (i ? ",\n        " : "") << (i ? indent : "");
      if (auto view = operand.getDefiningOp<kernel::ViewOp>())
        viewExpr(view, int(i), rows, first);
      else
        scalarExpr(operand);
    }
    os << ");\n";
  }

  static std::string commentOf(Operation *op) {
    auto name = dyn_cast<NameLoc>(op->getLoc());
    return name ? name.getName().str() : op->getName().getStringRef().str();
  }

  void call(kernel::CallOp step, size_t index) {
    const bool headRows = step.getHeadRows();
    const char *rows = headRows ? "n_logits" : "n";
    const char *first = headRows ? "head_row" : "0";
    if (headRows)
      os << "  if (n_logits > 0)\n";
    os << formatv("  /* {0}: {1} */\n  {{\n", index, commentOf(step));
    os << "    if (profile)\n      started = profile_clock();\n";
    os << formatv("    halide_buffer_t b[{0}];\n    halide_dimension_t "
                  "d[{0}][4];\n",
                  step.getOperands().size());
    if (std::optional<int64_t> probe = step.getProbeInput()) {
      // Calibration builds: the product's input.
      const Layout l = layoutOf(
          step.getOperands().front().getDefiningOp<kernel::ViewOp>().getType());
      os << formatv("    if (layer_probe)\n      layer_probe(layer_probe_user, "
                    "{0}, {1}, {2}, A + {3} + (size_t)({4}) * {5}, {5});\n",
                    *probe, rows, l.extents.front(), l.offset, first,
                    l.rowStride);
    }
    if (std::optional<StringRef> decode = step.getDecode()) {
      // Matrix kernels: the GEMV for one row; the blocked GEMM for more, on
      // a multiple of kPrefillRowMultiple rows (arena values have room).
      os << "    if (" << rows << " == 1) {\n";
      callWith(step, *decode, rows, first, "      ");
      os << "    } else {\n";
      std::string rounded =
          formatv("((({0}) + {1}) / {2} * {2})", rows, kPrefillRowMultiple - 1,
                  kPrefillRowMultiple)
              .str();
      callWith(step, step.getKernel(), rounded.c_str(), first, "      ");
      os << "    }\n";
    } else {
      callWith(step, step.getKernel(), rows, first, "    ");
    }
    os << "    if (rc != 0)\n      return rc;\n";
    os << formatv("    if (profile)\n      profile[{0}] += profile_clock() - "
                  "started;\n",
                  index);
    if (std::optional<int64_t> layer = step.getProbeLayer()) {
      const Layout l = layoutOf(
          step.getOperands().back().getDefiningOp<kernel::ViewOp>().getType());
      os << formatv("    if (layer_probe)\n      layer_probe(layer_probe_user, "
                    "{0}, n, {1}, A + {2}, {3});\n",
                    *layer, plan.config.hiddenSize, l.offset, l.rowStride);
    }
    os << "  }\n";
  }

  void cacheWrite(kernel::CacheWriteOp write, size_t index) {
    const int cacheNumber = cacheIndex.lookup(write.getCache());
    const CacheSpec &cache = plan.caches[cacheNumber];
    const Layout l = layoutOf(write.getSource().getType());
    const int64_t width = l.extents.front();
    os << formatv("  /* {0}: {1} -> cache {2} ({3}, {4} slots) */\n", index,
                  commentOf(write), cacheNumber, cache.ring ? "ring" : "linear",
                  cache.slots);
    std::string slot = cache.ring
                           ? formatv("(pos0 + t) % {0}", cache.slots).str()
                           : std::string("pos0 + t");
    os << "  if (profile)\n    started = profile_clock();\n"
          "  for (int32_t t = 0; t < n; ++t)\n";
    if (cache.dtype == DType::F32)
      os << formatv(
          "    memcpy((float *)C[{0}] + (size_t)({1}) * {2},\n"
          "           A + {3} + (size_t)t * {4}, {2} * sizeof(float));\n",
          cacheNumber, slot, width, l.offset, l.rowStride);
    else // rounded to the cache's 16-bit type (kDriverPrelude)
      os << formatv(
          "    spark_round_row_{5}((uint16_t *)C[{0}] + (size_t)({1}) "
          "* {2},\n"
          "        A + {3} + (size_t)t * {4}, {2});\n",
          cacheNumber, slot, width, l.offset, l.rowStride,
          cache.dtype == DType::BF16 ? "bf16" : "f16");
    os << formatv(
        "  if (profile)\n    profile[{0}] += profile_clock() - started;\n",
        index);
  }

  void write(const TargetInfo &target, kernel::PlanOp planOp) {
    indexSymbols(planOp);
    const std::vector<TargetVariant> &variants = target.variants;
    const std::string env =
        "SPARK_" + StringRef(target.family).upper() + "_VARIANT";
    os << "/* Generated by spark-compile; do not edit. Step driver for a "
       << plan.config.numLayers << "-layer Spark-X2.5 model, target "
       << stringifyTargetKind(plan.options.target) << ". */\n";
    os << kDriverPrelude << "\n";
    os << target.cpuPrelude << "\n";
    // Kernel prototypes and one table per ISA variant.
    std::vector<std::string> prototypes(plan.kernels.size());
    planOp.walk([&](kernel::CallOp call) {
      prototypes[kernelIndex.lookup(call.getKernel())] = prototype(call);
      if (std::optional<StringRef> decode = call.getDecode())
        prototypes[kernelIndex.lookup(*decode)] = prototype(call);
    });
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (target.compilesKernel(variant, plan.kernels[i]))
          os << "extern int " << kernelSymbol(plan.kernels[i], variant.name)
             << "(" << prototypes[i] << ");\n";
    // A microkernel takes the arguments of the kernels it stands for.
    // One taking the layer's constants is declared as it is, and called
    // through a wrapper per kernel.
    std::map<std::string, std::string> microkernels, wrappers;
    std::set<std::string> declarations;
    for (const TargetVariant &variant : variants)
      for (size_t i = 0; i < plan.kernels.size(); ++i)
        if (const Microkernel *m =
                target.microkernelFor(variant, plan.kernels[i])) {
          if (!m->wrapper) {
            microkernels[m->symbol] = prototypes[i];
            continue;
          }
          declarations.insert(m->declaration);
          std::string name = wrapperName(plan.kernels[i], *m);
          wrappers[name] = m->wrapper(plan.kernels[i], name);
        }
    for (const auto &[symbol, arguments] : microkernels)
      os << "extern int " << symbol << "(" << arguments << ");\n";
    for (const std::string &declaration : declarations)
      os << declaration << "\n";
    for (const auto &[name, definition] : wrappers)
      os << definition;
    os << "\ntypedef struct spark_kernels {\n  const char *name;\n";
    for (size_t i = 0; i < plan.kernels.size(); ++i)
      os << formatv("  int (*k{0})({1}); /* {2} */\n", i, prototypes[i],
                    plan.kernels[i].name());
    os << "} spark_kernels;\n\n";
    for (const TargetVariant &variant : variants) {
      os << "static const spark_kernels kernels_" << variant.name << " = {\""
         << target.family << "-" << variant.name << "\"";
      for (const KernelSpec &k : plan.kernels)
        os << ",\n    " << symbolFor(target, variant, k);
      os << "};\n";
    }
    os << "\n/* Best variant this CPU can run (CPUID), or NULL. The "
          "environment\n"
          " * variable "
       << env
       << " restricts the choice to one variant\n"
          " * (still only if the CPU has its features), for testing. */\n"
          "static const spark_kernels *find_kernels(void) {\n"
          "  const char *only = getenv(\""
       << env
       << "\");\n"
          "  "
       << target.cpuInit << "\n";
    for (const TargetVariant &v : variants)
      os << "  if ((!only || strcmp(only, \"" << v.name
         << "\") == 0) &&\n      " << v.cpuCondition
         << ")\n    return &kernels_" << v.name << ";\n";
    os << "  return NULL;\n}\n\n"
          "/* CPUID, the environment and the AMX permission do not change "
          "while\n"
          " * the process runs: decide once, not on every step (the AMX check\n"
          " * is a system call). Racing first callers compute the same value. "
          "*/\n"
          "static const spark_kernels *select_kernels(void) {\n"
          "  static const spark_kernels *chosen;\n"
          "  static int decided;\n"
          "  if (!__atomic_load_n(&decided, __ATOMIC_ACQUIRE)) {\n"
          "    __atomic_store_n(&chosen, find_kernels(), __ATOMIC_RELAXED);\n"
          "    __atomic_store_n(&decided, 1, __ATOMIC_RELEASE);\n"
          "  }\n"
          "  return __atomic_load_n(&chosen, __ATOMIC_RELAXED);\n}\n\n";
    std::string names;
    for (const TargetVariant &v : variants)
      names += (names.empty() ? "" : ", ") + v.name;
    os << "static const char *unsupported_reason(void) {\n"
          "  if (select_kernels())\n    return NULL;\n"
          "  if (getenv(\""
       << env
       << "\"))\n"
          "    return \""
       << env << " names no variant this CPU can run (" << names
       << ")\";\n"
          "  return \""
       << target.unsupportedMessage << "\";\n}\n\n";
    os << "/* Why the best variant of this build is not in use, or NULL. */\n"
          "static const char *dispatch_reason(void) {\n"
          "  return "
       << target.dispatchReason
       << ";\n"
          "}\n\n"
          "static const char *dispatch_name(void) {\n"
          "  const spark_kernels *k = select_kernels();\n"
          "  return k ? k->name : \"none\";\n}\n\n"
          "static void set_num_threads(int threads) {\n"
       << (target.threadPool ? "  spark_pool_set_threads(threads);\n}\n\n"
                             : "  halide_set_num_threads(threads);\n}\n\n")
       << "/* The profile and the layer probe are process-wide and atomic: a\n"
          " * step() reads each once, at its start (change them between steps\n"
          " * for a coherent pair). */\n"
          "static uint64_t *installed_profile;\n"
          "static uint64_t (*installed_clock)(void);\n\n"
          "static void set_profile(uint64_t *ns, uint64_t (*clock)(void)) {\n"
          "  __atomic_store_n(&installed_profile, NULL, __ATOMIC_RELEASE);\n"
          "  __atomic_store_n(&installed_clock, clock, __ATOMIC_RELEASE);\n"
          "  __atomic_store_n(&installed_profile, ns, __ATOMIC_RELEASE);\n}\n\n"
          "static spark_layer_probe installed_probe;\n"
          "static void *installed_probe_user;\n\n"
          "static void set_layer_probe(spark_layer_probe probe, void *user) {\n"
          "  __atomic_store_n(&installed_probe, NULL, __ATOMIC_RELEASE);\n"
          "  __atomic_store_n(&installed_probe_user, user, __ATOMIC_RELEASE);\n"
          "  __atomic_store_n(&installed_probe, probe, "
          "__ATOMIC_RELEASE);\n}\n\n";

    os << "static int step(const void *const *W, void *const *C, void *arena,\n"
          "                const int32_t *ids, int32_t pos0, int32_t n,\n"
          "                int32_t n_logits, float *logits) {\n"
          "  const spark_kernels *K = select_kernels();\n"
          "  if (!K || n < 1 || n > "
       << plan.options.maxChunk
       << " || n_logits < 0 || n_logits > n || pos0 < 0 ||\n      pos0 + n > "
       << plan.options.maxContext
       << ")\n    return -1;\n"
          "  uint64_t *profile = __atomic_load_n(&installed_profile, "
          "__ATOMIC_ACQUIRE);\n"
          "  uint64_t (*profile_clock)(void) =\n"
          "      __atomic_load_n(&installed_clock, __ATOMIC_ACQUIRE);\n"
          "  spark_layer_probe layer_probe;\n"
          "  void *layer_probe_user;\n"
          "  do { /* a pair no set_layer_probe() changed meanwhile */\n"
          "    layer_probe = __atomic_load_n(&installed_probe, "
          "__ATOMIC_ACQUIRE);\n"
          "    layer_probe_user =\n"
          "        __atomic_load_n(&installed_probe_user, __ATOMIC_ACQUIRE);\n"
          "  } while (layer_probe !=\n"
          "           __atomic_load_n(&installed_probe, __ATOMIC_ACQUIRE));\n"
          "  (void)layer_probe;\n  (void)layer_probe_user;\n"
          "  float *A = (float *)arena;\n"
          "  const int32_t head_row = n - n_logits;\n"
          "  int rc = 0;\n"
          "  uint64_t started = 0;\n"
          "  (void)started;\n";
    // One block per call and cache write of the plan's step.
    size_t index = 0;
    planOp.walk([&](Operation *op) {
      if (auto c = dyn_cast<kernel::CallOp>(op))
        call(c, index++);
      else if (auto w = dyn_cast<kernel::CacheWriteOp>(op))
        cacheWrite(w, index++);
    });
    os << "  return rc;\n}\n\n";

    // Tensor and cache tables, and the definition.
    // Every table and the definition by field name (model_abi.h).
    os << "static const spark_tensor_def tensors[] = {\n";
    for (const PackTensor &t : plan.tensors)
      os << formatv("    {{.name = \"{0}\", .dtype = {1}, .layout = {2}, "
                    ".bytes = {3}ull},\n",
                    t.name, "SPARK_DTYPE_" + dtypeName(t.dtype).str(),
                    t.layout == 0 ? "SPARK_LAYOUT_ROW_MAJOR"
                                  : "SPARK_LAYOUT_TABLE",
                    t.bytes());
    os << "};\n\nstatic const spark_cache_def caches[] = {\n";
    for (const CacheSpec &c : plan.caches)
      os << formatv("    {{.layout = {0}, .dtype = SPARK_DTYPE_{4}, .slots = "
                    "{1}, .kv_heads = {2}, .head_dim = {3}},\n",
                    c.ring ? "SPARK_CACHE_RING" : "SPARK_CACHE_LINEAR", c.slots,
                    c.kvHeads, c.headDim, dtypeName(c.dtype));
    os << "};\n\n";
    os << "static const spark_call_def calls[] = {\n";
    for (const Step &s : plan.steps)
      os << formatv("    {{.kind = \"{0}\", .layer = {1}},\n",
                    callKind(plan, s), s.layer);
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
        "    .set_num_threads = set_num_threads,\n"
        "    .step = step,\n"
        "    .dispatch_reason = dispatch_reason,\n"
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
        prefillRows(plan.options.maxChunk), plan.steps.size(),
        plan.options.entryPoint);
  }

private:
  const ModelPlan &plan;
  raw_ostream &os;
  llvm::StringMap<int> kernelIndex, tensorIndex, cacheIndex;
};

} // namespace

Expected<std::string> emitDriverSource(const ModelPlan &plan,
                                       const TargetInfo &target) {
  mlir::MLIRContext context;
  Expected<mlir::OwningOpRef<mlir::ModuleOp>> planIR = planToIR(plan, context);
  if (!planIR)
    return planIR.takeError();
  kernel::PlanOp planOp = *(*planIR)->getOps<kernel::PlanOp>().begin();
  std::string text;
  raw_string_ostream os(text);
  DriverWriter(plan, os).write(target, planOp);
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
  return t.layout == 0 && t.shape.size() == 2 &&
         t.role == PackTensor::Role::Data;
}

/// Average stored bits per weight of the matrices (embedding, projections,
/// head): codes plus scales, divided by the parameter count.
static double bitsPerWeight(const ModelPlan &plan) {
  double bits = 0, parameters = 0;
  for (const PackTensor &t : plan.tensors) {
    if (!isMatrix(t))
      continue;        // scales and zeros are counted with their matrix
    if (t.group > 0) { // 4-bit codes + an f16 scale (and zero) per group
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
