//===- Arm64Target.cpp - variants, microkernels and toolchain of arm64 ----===//
#include "microkernel_shapes.h" // targets/common/lib: shared with the C kernels
#include "spark/Kernels/DataFiles.h"
#include "spark/Targets/Arm64.h"
#include "spark/Targets/CpuSchedules.h"

using namespace Halide;

namespace spark {

namespace {

/// Whether neon_attention.c takes `spec`: f32, bf16 or f16 caches, head_dim
/// a multiple of 16, at most 64 query rows (each key / value head's group of
/// query heads rounded up to 4).
bool attentionFits(const KernelSpec &spec) {
  if (!(spec.weightType == DType::F32 || spec.weightType == DType::BF16 ||
        spec.weightType == DType::F16))
    return false;
  if (spec.headDim % 16 != 0 || spec.kvHeads <= 0 ||
      spec.heads % spec.kvHeads != 0)
    return false;
  const int64_t group = spec.heads / spec.kvHeads;
  return spec.kvHeads * ((group + 3) / 4) * 4 <= 64;
}

const Microkernel *microkernelFor(const TargetVariant &variant,
                                  const KernelSpec &spec) {
  static const std::vector<const char *> flags = {"-march=armv8.2-a+dotprod",
                                                  "-O3"};
  static const Microkernel w8a8 = {"spark_sdot_linear_w8a8", "sdot_linear.c",
                                   flags};
  static const Microkernel w4a8 = {"spark_sdot_linear_w4a8", "sdot_linear.c",
                                   flags};
  // 6-bit asymmetric groups of 128 (the int6 recipe rule) with int8 inputs.
  static const Microkernel w6a8 = {"spark_sdot_linear_w6a8", "sdot_linear.c",
                                   flags};
  // 4- and 6-bit asymmetric groups of 128 with f16 (the arm64 default) or
  // bf16 inputs, taken as int16 split into bytes (per group of 128 inputs):
  // udot with the low bytes, sdot with the high ones.
  static const Microkernel w4a16[] = {
      {"spark_sdot_linear_w4a16_xbf16", "sdot_linear.c", flags},
      {"spark_sdot_linear_w4a16_xf16", "sdot_linear.c", flags}};
  static const Microkernel w6a16[] = {
      {"spark_sdot_linear_w6a16_xbf16", "sdot_linear.c", flags},
      {"spark_sdot_linear_w6a16_xf16", "sdot_linear.c", flags}};
  // int8 codes with 16-bit inputs (w8a16): sdot with the high bytes, udot
  // of the codes plus 128 with the low ones.
  static const Microkernel w8a16[] = {
      {"spark_sdot_linear_w8a16_xbf16", "sdot_linear.c", flags},
      {"spark_sdot_linear_w8a16_xf16", "sdot_linear.c", flags}};
  // Attention (f32, bf16 or f16 caches): one task per token and range of
  // keys for every head, each cache slot read once a token (Halide's kernel
  // reads a key / value head's rows once per query head). Base NEON, but
  // the dotprod variant's only: the neon floor keeps Halide's kernel, the
  // reference the tests compare it with.
  static const Microkernel attention = {"spark_neon_attention",
                                        "neon_attention.c",
                                        {"-O3"},
                                        attentionMicrokernelArguments};
  if (spec.kind == KernelKind::Attention)
    return variant.int8Dot && attentionFits(spec) ? &attention : nullptr;
  if (!variant.int8Dot || spec.out % SPARK_MK_ROWS != 0)
    return nullptr;
  const bool groupsOf128 = spec.kind == KernelKind::Linear &&
                           spec.group == SPARK_MK_GROUP && spec.in % 128 == 0 &&
                           !spec.symmetricGroups;
  // 16-bit inputs (the a16 schemes), each group of 128 taken as int16
  const bool int16Inputs =
      spec.kind == KernelKind::Linear && !spec.inputBits &&
      spec.in % SPARK_MK_GROUP == 0 &&
      (spec.inputType == DType::BF16 || spec.inputType == DType::F16);
  const bool a16 = groupsOf128 && int16Inputs;
  const bool f16 = spec.inputType == DType::F16;
  if (spec.group && spec.codeBits == 6) {
    if (groupsOf128 && spec.inputBits == 8 && !spec.inputBlock)
      return &w6a8;
    return a16 ? &w6a16[f16] : nullptr;
  }
  if (a16 && spec.codeBits == 4)
    return &w4a16[f16];
  if (int16Inputs && spec.weightType == DType::I8 && !spec.group)
    return &w8a16[f16];
  if (spec.isInt8Linear(false) && spec.in % SPARK_MK_SDOT_DEPTH == 0)
    return &w8a8;
  if (spec.isInt8Linear(true) && spec.group == SPARK_MK_GROUP)
    return &w4a8;
  return nullptr;
}

} // namespace

TargetInfo arm64Target() {
  TargetInfo t;
  t.kind = TargetKind::Arm64;
  t.family = "arm64";
  // NEON registers hold 4 floats; the schedules use 8 (two registers) so
  // every reduction keeps two independent accumulator chains.
  TargetVariant dot;
  dot.name = "dotprod";
  dot.halide = Target("arm-64-linux-arm_dot_prod-arm_fp16-no_runtime");
  dot.vectorFloats = 8;
  dot.cpuCheck = "spark_arm64_dotprod"; // arm64_dispatch.h
  dot.int8Dot = true;
  TargetVariant neon;
  neon.name = "neon";
  neon.halide = Target("arm-64-linux-no_runtime");
  neon.vectorFloats = 8;
  neon.cpuCheck = "spark_arm64_neon";
  t.variants = {dot, neon};
  t.runtime = Target("arm-64-linux");
  t.cc = SPARK_ARM64_CC;
  t.cflags = {"-fPIC"};
  t.exeFlags = {"-static"};
  t.microkernelDir = dataPath("targets/arm64/lib");
  t.dispatchHeader = "arm64_dispatch.h";
  t.unsupportedMessage = "this library needs an AArch64 CPU";
  t.native = false;
  t.emulator = {"qemu-aarch64-static", "-cpu", "max"};
  t.microkernelFor = microkernelFor;
  t.compilesKernel = compilesUnlessMicrokernel(microkernelFor);
  t.schedule = scheduleCpuVariant;
  return t;
}

} // namespace spark
