//===- X86.h - x86 target facts, variants and kernel schedules ------------===//
//
// The host target compiles every kernel twice, for an AVX2+FMA floor and for
// AVX-512 (Skylake-SP level: F/CD/BW/DQ/VL, which Zen 4 and every Intel
// AVX-512 core have), adds microkernels for AVX512_VNNI (int8 products) and
// AVX512_BF16 (bf16 products), and the generated driver picks one variant per
// process from CPUID, so no instruction the CPU lacks ever runs. Halide's sapphirerapids target
// is not used here: it emits VEX AVX-VNNI, which Zen 4 lacks (TOOLCHAIN.md).
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_X86_H
#define SPARK_TARGETS_X86_H

#include "spark/Codegen/Kernels.h"

#include <string>
#include <vector>

namespace spark {

/// One ISA level the host library carries code for.
struct TargetVariant {
  std::string name;         // "avx512", "avx2"
  Halide::Target halide;    // what the kernels are compiled for
  int vectorFloats = 8;     // f32 lanes in one vector register
  std::string cpuCondition; // C expression, true when this CPU may run it
  /// Matrix-tile (AMX) variant: only the kernels usesMatrixTiles() selects
  /// are compiled for it; the others come from `fallback`.
  bool matrixTiles = false;
  std::string fallback;
  /// AMX variants: "tiles" uses the hand-written full-depth microkernel
  /// (amx_linear.c) where its shape rules allow, "halide" Halide's lowering.
  std::string matrixKernel = "tiles";
  /// AVX512_BF16 variant: bf16 matrix kernels run the vdpbf16ps microkernel
  /// (bf16_linear.c); everything else comes from `fallback`.
  bool bf16Dot = false;
  /// AVX512_VNNI variant: int8-input matrix kernels (w8a8, w4a8) run the
  /// vpdpbusd microkernels (int8_linear.c); the rest from `fallback`.
  bool int8Dot = false;
};

/// A hand-written kernel behind the Halide kernel interface.
struct Microkernel {
  const char *symbol;
  const char *source; // file name in targets/x86-amx/lib
  std::vector<const char *> flags; // clang flags it needs
};

/// The microkernel `variant` runs for `spec`, or null.
const Microkernel *microkernelFor(const TargetVariant &variant,
                                  const KernelSpec &spec);

/// The variants of `--target`: "host" (AVX-512, AVX2) or "spr" (AMX for
/// prefill, then AVX-512, AVX2). Best first. `matrixKernel`: see above.
std::vector<TargetVariant> x86Variants(const std::string &target,
                                       const std::string &matrixKernel = "tiles");

/// Whether Halide compiles `spec` for `variant` (AMX variants: bf16 prefill
/// linears the Halide tile schedule handles, unless the microkernel does).
bool compilesKernel(const TargetVariant &variant, const KernelSpec &spec);



/// The host target's variants, best first; the last one is the floor.
std::vector<TargetVariant> x86HostVariants();

/// The Halide target of the standalone runtime linked into the library.
Halide::Target x86RuntimeTarget();

/// Schedules `kernel` for `variant` (algorithms come from codegen).
void scheduleX86(KernelAlgorithm &kernel, const TargetVariant &variant);

} // namespace spark

#endif // SPARK_TARGETS_X86_H
