//===- Target.h - what spark-compile builds for one --target
//---------------===//
//
// A target is a list of ISA variants (best first; the generated driver picks
// the first one the CPU can run, once per process), the schedules and
// hand-written microkernels of each variant, and how C code is compiled and
// linked for the target's machine. targets/<t>/ describe their own;
// targetFor() names them all.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_TARGET_H
#define SPARK_TARGETS_TARGET_H

#include "spark/Dialect/SparkDialect.h"
#include "spark/Kernels/Kernels.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace spark {

// TargetKind (--target) and AmxKernel (--amx-kernel) are enums of the spark
// dialect: symbolizeTargetKind("spr"), stringifyTargetKind(...).

/// One ISA level a library carries code for.
struct TargetVariant {
  std::string name;         // "avx512", "avx2", "dotprod", ...
  Halide::Target halide;    // what the kernels are compiled for
  int vectorFloats = 8;     // f32 lanes the schedules vectorize by
  /// The C function (`int f(void)`, in the target's dispatchHeader) that
  /// tells whether this CPU may run the variant.
  std::string cpuCheck;
  /// Matrix-tile (AMX) variant: only the kernels compilesKernel() selects
  /// are compiled for it; the others come from `fallback`.
  bool matrixTiles = false;
  std::string fallback;
  /// AMX variants: which implementation runs the tiles.
  AmxKernel amxKernel = AmxKernel::Tiles;
  /// AVX512_BF16 variant: bf16 matrix kernels run the vdpbf16ps microkernel
  /// (bf16_linear.c); everything else comes from `fallback`.
  bool bf16Dot = false;
  /// Dot-product variants: int8-input matrix kernels (w8a8, w4a8) run the
  /// int8 dot-product microkernels (vpdpbusd on x86); the rest from
  /// `fallback`.
  bool int8Dot = false;
  /// AVX2 variant: the quantized and bf16 matrix kernels run the AVX2
  /// microkernels (avx2_linear.c); Halide compiles the rest.
  bool avx2Linear = false;
};

/// One argument of a microkernel that takes more than its kernel's
/// interface: one of the kernel's arguments, a null buffer, or one of the
/// layer's constants (what Halide bakes into each kernel).
struct MicrokernelArg {
  enum class Kind { Operand, NullBuffer, Float, Int } kind;
  int64_t operand = 0; // Operand: the kernel's argument number
  double value = 0;    // Float (as a C float) or Int (an int32_t)

  static MicrokernelArg of(int64_t operand) {
    return {Kind::Operand, operand, 0};
  }
  static MicrokernelArg null() { return {Kind::NullBuffer, 0, 0}; }
  static MicrokernelArg f32(double value) { return {Kind::Float, 0, value}; }
  static MicrokernelArg i32(int64_t value) {
    return {Kind::Int, 0, double(value)};
  }
};

/// A hand-written kernel behind the Halide kernel interface.
struct Microkernel {
  const char *symbol;
  const char *source;              // file name in the target's microkernel dir
  std::vector<const char *> flags; // C compiler flags it needs
  /// A microkernel that takes the layer's constants: its arguments for a
  /// kernel. The driver declares `symbol` and defines one wrapper per
  /// kernel, with the kernel's interface, that calls it with these
  /// arguments; null: the microkernel has the kernel's interface.
  std::vector<MicrokernelArg> (*arguments)(const KernelSpec &spec) = nullptr;
};

/// The arguments of an attention microkernel of a CPU target
/// (targets/common/lib/attention_job.h's spark_attention_job takes them): the
/// kernel's q, k, v, caches, gate (a null buffer when the layer has none),
/// pos0, cached rows and output, then the layer's scale, window (0: full)
/// and cache layout (1: ring).
std::vector<MicrokernelArg>
attentionMicrokernelArguments(const KernelSpec &spec);

struct TargetInfo {
  TargetKind kind = TargetKind::Host;
  std::string family; // "x86", "arm64": dispatch names ("x86-avx512") and the
                      // SPARK_<FAMILY>_VARIANT override of the driver
  std::vector<TargetVariant> variants; // best first
  Halide::Target runtime;              // the standalone Halide runtime
  /// The C compiler for the driver, the microkernels, the runtime and the
  /// runner, and the flags that make it target this machine.
  std::string cc;
  std::vector<std::string> cflags;
  /// Flags, extra C sources (compiled like the driver) and libraries of the
  /// final static link of `--emit=exe`.
  std::vector<std::string> exeFlags, exeSources;
  std::vector<std::string> exeLibs = {"-lpthread", "-ldl", "-lm"};
  std::string microkernelDir;
  /// The fixed C header (in microkernelDir) the driver includes for the
  /// variants' cpuCheck functions, and what an unsupported CPU is told.
  std::string dispatchHeader, unsupportedMessage;
  /// A C function of dispatchHeader (`const char *f(void)`): why the best
  /// variant is not in use, or NULL; empty: the best variant always is.
  std::string dispatchReason;
  /// Code runs on the build machine: the build also links
  /// libspark_model.so, which spark-run, spark-bench and spark-fidelity load.
  bool native = false;
  /// The library's parallel loops run on targets/common/lib/thread_pool.c
  /// (workers that spin between the calls of a step); false: Halide's pool.
  bool threadPool = true;
  /// 4-bit weights are stored as grouped rows (SPARK_LAYOUT_GROUPED_ROWS:
  /// each row's codes, then its scales and zero points), so decode reads one
  /// stream; every kernel of every variant, Halide's included, takes the
  /// scales and zeros as strided views of those rows. False: three dense
  /// tensors (codes, scales, zero points).
  bool groupedRows = false;
  /// How to run the target's executables here (empty: directly).
  std::vector<std::string> emulator;
  /// Whether the build enters tile (AMX) code, whose availability the driver
  /// reports through dispatch_reason().
  bool matrixTiles() const {
    for (const TargetVariant &v : variants)
      if (v.matrixTiles)
        return true;
    return false;
  }

  std::function<const Microkernel *(const TargetVariant &, const KernelSpec &)>
      microkernelFor;
  /// Whether Halide compiles `spec` for the variant (else its microkernel or
  /// the fallback variant's kernel serves).
  std::function<bool(const TargetVariant &, const KernelSpec &)> compilesKernel;
  /// Schedules a built algorithm for a variant.
  std::function<void(KernelAlgorithm &, const TargetVariant &)> schedule;
};

/// The usual compilesKernel: Halide compiles every kernel a variant has no
/// microkernel for.
inline std::function<bool(const TargetVariant &, const KernelSpec &)>
compilesUnlessMicrokernel(const Microkernel *(*microkernelFor)(
    const TargetVariant &, const KernelSpec &)) {
  return
      [microkernelFor](const TargetVariant &variant, const KernelSpec &spec) {
        return microkernelFor(variant, spec) == nullptr;
      };
}

/// Which kernels Halide compiles where a microkernel would serve
/// (--halide-kernels, arm64 and hexagon): none, every kernel, or the
/// attention kernels only (the microkernels serve the rest).
enum class HalideKernels { None, All, Attention };

/// The target `kind` (not S25, a bundle of two); `amxKernel` is the
/// --amx-kernel choice of spr; `halideKernels` (--halide-kernels, arm64 and
/// hexagon) takes Halide's kernels where microkernels would serve. A target
/// this spark-compile was built without (no cross compiler or linker) is an
/// error saying what to install.
llvm::Expected<TargetInfo>
targetFor(TargetKind kind, AmxKernel amxKernel = AmxKernel::Tiles,
          HalideKernels halideKernels = HalideKernels::None);

/// The names targetFor() knows, for messages and --help.
const char *knownTargets();

} // namespace spark

#endif // SPARK_TARGETS_TARGET_H
