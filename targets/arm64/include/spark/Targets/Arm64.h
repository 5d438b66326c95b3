//===- Arm64.h - the arm64 target (NEON, dot product) ----------------------===//
//
// Linux/Android AArch64. Two variants: `dotprod` (ARMv8.2 dot product and
// fp16 arithmetic, every phone core of the last years, Oryon included) and
// the plain `neon` floor; the driver asks the kernel's hwcaps which one the
// CPU runs. int8-input products (w8a8, w4a8) run `sdot` microkernels.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_ARM64_H
#define SPARK_TARGETS_ARM64_H

#include "spark/Targets/Target.h"

namespace spark {

TargetInfo arm64Target();

} // namespace spark

#endif // SPARK_TARGETS_ARM64_H
