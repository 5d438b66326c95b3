//===- X86.h - the x86-64 targets (host, spr) ------------------------------===//
//
// `host` compiles every kernel for an AVX2+FMA floor and for AVX-512
// (Skylake-SP level: F/CD/BW/DQ/VL, which Zen 4 and every Intel AVX-512 core
// have), and adds microkernels for AVX512_VNNI (int8 products) and
// AVX512_BF16 (bf16 products); `spr` adds AMX tiles for prefill. Halide's
// sapphirerapids target is not used for the plain variants: it emits VEX
// AVX-VNNI, which Zen 4 lacks (TOOLCHAIN.md).
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_X86_H
#define SPARK_TARGETS_X86_H

#include "spark/Targets/Target.h"

namespace spark {

/// `kind` is Host or Spr; `amxKernel` the --amx-kernel choice of Spr.
TargetInfo x86Target(TargetKind kind, AmxKernel amxKernel);

} // namespace spark

#endif // SPARK_TARGETS_X86_H
