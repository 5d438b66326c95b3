//===- HexagonTarget.cpp - variants, microkernels and toolchain of hexagon ===//
#include "microkernel_shapes.h" // targets/common/lib: shared with the C kernels
#include "spark/Kernels/DataFiles.h"
#include "spark/Targets/CpuSchedules.h"
#include "spark/Targets/Hexagon.h"

using namespace Halide;

namespace spark {

namespace {

const Microkernel *microkernelFor(const TargetVariant &variant,
                                  const KernelSpec &spec) {
  static const Microkernel w8a8 = {
      "spark_vrmpy_linear_w8a8", "vrmpy_linear.c", {}};
  // 4-bit symmetric groups of 128 with int8 inputs: two groups a vrmpy
  // pair, the groups' lanes added on HVX, their scales on the scalar core.
  static const Microkernel w4a8 = {
      "spark_vrmpy_linear_w4a8", "vrmpy_linear.c", {}};
  // 4-bit asymmetric groups of 128 with f16 (the hexagon default) or bf16
  // inputs, taken as int16 split into bytes (per group of 128 inputs):
  // vrmpy with the high bytes and with the low ones.
  static const Microkernel w4a16[] = {
      {"spark_vrmpy_linear_w4a16_xbf16", "vrmpy_linear.c", {}},
      {"spark_vrmpy_linear_w4a16_xf16", "vrmpy_linear.c", {}}};
  // int8 codes with 16-bit inputs (w8a16): vrmpy of the codes with the high
  // bytes and with the low ones, per group of 128 inputs.
  static const Microkernel w8a16[] = {
      {"spark_vrmpy_linear_w8a16_xbf16", "vrmpy_linear.c", {}},
      {"spark_vrmpy_linear_w8a16_xf16", "vrmpy_linear.c", {}}};
  // 6-bit asymmetric groups of 128 (the int6 recipe rule, for the tied
  // head): the 4-bit rows with each code's top bits beside its nibble.
  static const Microkernel w6a8 = {
      "spark_vrmpy_linear_w6a8", "vrmpy_linear.c", {}};
  static const Microkernel w6a16[] = {
      {"spark_vrmpy_linear_w6a16_xbf16", "vrmpy_linear.c", {}},
      {"spark_vrmpy_linear_w6a16_xf16", "vrmpy_linear.c", {}}};
  if (!variant.int8Dot || spec.kind != KernelKind::Linear)
    return nullptr;
  if (spec.isInt8Linear(false) && spec.in % SPARK_MK_VRMPY_DEPTH == 0)
    return &w8a8;
  if (spec.isInt8Linear(true) && spec.group == SPARK_MK_GROUP)
    return &w4a8;
  const bool groupsOf128 = spec.group == SPARK_MK_GROUP &&
                           spec.in % SPARK_MK_GROUP == 0 &&
                           !spec.symmetricGroups;
  if (groupsOf128 && spec.codeBits == 6 && spec.inputBits == 8 &&
      !spec.inputBlock)
    return &w6a8;
  const bool int16Inputs = !spec.inputBits && (spec.inputType == DType::BF16 ||
                                               spec.inputType == DType::F16);
  const bool f16 = spec.inputType == DType::F16;
  if (!int16Inputs || spec.in % SPARK_MK_GROUP != 0)
    return nullptr;
  if (groupsOf128 && spec.codeBits == 4)
    return &w4a16[f16];
  if (groupsOf128 && spec.codeBits == 6)
    return &w6a16[f16];
  if (spec.weightType == DType::I8 && !spec.group)
    return &w8a16[f16];
  return nullptr;
}

} // namespace

TargetInfo hexagonTarget() {
  TargetInfo t;
  t.kind = TargetKind::Hexagon;
  t.family = "hexagon";
  TargetVariant hvx;
  hvx.name = "hvx";
  hvx.halide = Target("hexagon-32-noos-hvx_128-hvx_v66-no_runtime");
  // v66 HVX has no floating-point lanes (they came with v68): the f32 kernels
  // run on the scalar core, so they are scheduled without vectorization; the
  // int8 products are where HVX pays (vrmpy microkernels).
  hvx.vectorFloats = 1;
  hvx.cpuCheck = "spark_hexagon_hvx"; // hexagon_dispatch.h
  hvx.int8Dot = true;
  t.variants = {hvx};
  t.runtime = Target("hexagon-32-noos-hvx_128-hvx_v66");
  t.cc = SPARK_CLANG;
  t.cflags = {"--target=hexagon-unknown-none-elf",
              "-mv66",
              "-mhvx",
              "-mhvx-length=128B",
              "-ffreestanding",
              "-fno-builtin",
              "-nostdinc",
              "-isystem",
              SPARK_CLANG_RESOURCE_INCLUDE,
              "-isystem",
              dataPath("targets/hexagon/libc/include")};
  t.exeFlags = {"--target=hexagon-unknown-none-elf",
                "-mv66",
                "-nostdlib",
                "-static",
                "-fuse-ld=lld",
                "--ld-path=" SPARK_HEXAGON_LD};
  t.exeSources = {dataPath("targets/hexagon/libc/freestanding.c")};
  t.exeLibs = {};
  t.threadPool = false; // freestanding, single-threaded
  t.microkernelDir = dataPath("targets/hexagon/lib");
  t.dispatchHeader = "hexagon_dispatch.h";
  t.unsupportedMessage = "this library needs a Hexagon v66+ core with HVX";
  t.native = false;
  t.emulator = {"qemu-hexagon-static"};
  t.microkernelFor = microkernelFor;
  t.compilesKernel = compilesUnlessMicrokernel(microkernelFor);
  t.schedule = scheduleCpuVariant;
  return t;
}

} // namespace spark
