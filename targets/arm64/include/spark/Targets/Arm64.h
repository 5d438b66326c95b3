//===- Arm64.h - the arm64 target (NEON, dot product) ----------------------===//
//
// Linux/Android AArch64. Two variants: `dotprod` (ARMv8.2 dot product and
// fp16 arithmetic, every phone core of the last years, Oryon included) and
// the plain `neon` floor; the driver asks the kernel's hwcaps which one the
// CPU runs. In `dotprod`, the quantized products with int8 inputs and the
// 16-bit-input ones in groups of 128 run the `sdot_linear.c` microkernels,
// and attention `neon_attention.c` (every head of a token in one task per
// range of keys); the `neon` floor runs Halide's kernels.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_ARM64_H
#define SPARK_TARGETS_ARM64_H

#include "spark/Targets/Target.h"

namespace spark {

TargetInfo arm64Target();

} // namespace spark

#endif // SPARK_TARGETS_ARM64_H
