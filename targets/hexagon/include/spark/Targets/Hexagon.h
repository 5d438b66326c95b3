//===- Hexagon.h - the hexagon target (HVX 128 B, v66) ---------------------===//
//
// Qualcomm Hexagon DSPs with HVX in 128-byte mode, v66 ISA (Halide 14's
// newest; later cores run v66 code). The library is one decoder step per
// call, so a phone pays one remote call (FastRPC) per token. The quantized
// products (int8 and 16-bit activations, groups of 128) run `vrmpy`
// microkernels (targets/hexagon/lib/vrmpy_linear.c). C is compiled freestanding
// with clang-22; `--emit=exe` links a static ELF against a small Linux-syscall
// libc of our own (targets/hexagon/libc) that runs under qemu-hexagon-static.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_HEXAGON_H
#define SPARK_TARGETS_HEXAGON_H

#include "spark/Targets/Target.h"

namespace spark {

TargetInfo hexagonTarget();

} // namespace spark

#endif // SPARK_TARGETS_HEXAGON_H
