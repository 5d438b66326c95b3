//===- X86Schedules.cpp - x86 schedules of the spark kernels --------------===//
#include "microkernel_shapes.h" // targets/common/lib: shared with the C kernels
#include "spark/Kernels/DataFiles.h"
#include "spark/Targets/CpuSchedules.h"
#include "spark/Targets/X86.h"

#include <cstdio>

using namespace Halide;

namespace spark {

namespace {

std::vector<TargetVariant> hostVariants() {
  const char *base = "x86-64-linux-sse41-avx-avx2-fma-f16c-no_runtime";
  TargetVariant avx512;
  avx512.name = "avx512";
  avx512.halide = Target(std::string(base) + "-avx512-avx512_skylake");
  avx512.vectorFloats = 16;
  avx512.cpuCheck = "spark_x86_avx512"; // x86_dispatch.h
  // Cores with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4) take
  // vdpbf16ps for bf16 weights: one instruction per 32 weights.
  // Cores with AVX512_VNNI (Cascade Lake on) take vpdpbusd for the int8
  // products of w8a8 and w4a8 builds (64 byte pairs per instruction), and
  // the AVX-512 4-bit kernel for w4a16.
  TargetVariant vnni = avx512;
  vnni.name = "avx512vnni";
  vnni.cpuCheck = "spark_x86_avx512vnni";
  vnni.int8Dot = true;
  vnni.fallback = "avx512";
  TargetVariant bf16 = vnni;
  bf16.name = "avx512bf16";
  bf16.cpuCheck = "spark_x86_avx512bf16";
  bf16.bf16Dot = true;
  bf16.int8Dot = false;
  bf16.fallback = "avx512vnni";
  TargetVariant avx2;
  avx2.name = "avx2";
  avx2.halide = Target(base);
  avx2.vectorFloats = 8;
  avx2.avx2Linear = true;
  avx2.cpuCheck = "spark_x86_avx2";
  return {bf16, vnni, avx512, avx2};
}

std::vector<TargetVariant> variants(TargetKind target, AmxKernel amxKernel) {
  std::vector<TargetVariant> variants = hostVariants();
  if (target != TargetKind::Spr)
    return variants;
  // Sapphire Rapids: AMX tiles for bf16 prefill GEMMs. Halide needs plain
  // avx512 next to avx512_sapphirerapids (TOOLCHAIN.md); its mcpu lets LLVM
  // use VEX AVX-VNNI, which every AMX CPU has, and only these kernels carry
  // it. AMX runs only if CPUID reports AMX-TILE/BF16/INT8 (leaf 7, EDX bits
  // 24/22/25) and the kernel granted the tile state (arch_prctl).
  TargetVariant amx;
  amx.name = "amx";
  amx.halide = Target("x86-64-linux-sse41-avx-avx2-fma-f16c-avx512-"
                      "avx512_skylake-avx512_cannonlake-avx512_sapphirerapids-"
                      "no_runtime");
  amx.vectorFloats = 16;
  amx.cpuCheck = "spark_x86_amx";
  amx.matrixTiles = true;
  amx.fallback = "avx512bf16";
  amx.amxKernel = amxKernel;
  variants.insert(variants.begin(), amx);
  return variants;
}

bool isBF16Prefill(const KernelSpec &spec) {
  return spec.kind == KernelKind::Linear && spec.phase == Phase::Prefill &&
         spec.weightType == DType::BF16;
}

/// Whether an x86 attention microkernel takes `spec`: head_dim a multiple of
/// 8, up to 16 query heads per key / value head, f32, bf16 or f16 caches.
/// The AVX2 kernel (avx2_attention.c) takes every such shape; the AVX-512
/// one (avx512_attention.c, `tiles`) takes 16-bit caches where its decode
/// and prefill tasks both take the shape (head_dim a multiple of 64, a
/// query-head group dividing 64, at most 64 query rows of 4-head chunks).
bool attentionFits(const KernelSpec &spec, bool tiles) {
  if (!(spec.headDim % 8 == 0 && spec.kvHeads > 0 &&
        spec.heads % spec.kvHeads == 0 && spec.heads / spec.kvHeads <= 16))
    return false;
  if (spec.weightType == DType::F32)
    return true;
  if (!(spec.weightType == DType::BF16 || spec.weightType == DType::F16))
    return false;
  const int64_t group = spec.heads / spec.kvHeads;
  return !tiles || (spec.headDim % 64 == 0 && 64 % group == 0 &&
                    spec.kvHeads * ((group + 3) / 4) * 4 <= 64);
}

/// The AVX2 variant's matrix kernels: every quantized scheme and bf16
/// weights, decode and prefill (avx2_linear.c); and attention with f32,
/// bf16 or f16 caches, all query heads of a key/value head in one task
/// (avx2_attention.c).
const Microkernel *avx2MicrokernelFor(const KernelSpec &spec) {
  static const std::vector<const char *> flags = {"-mavx2", "-mfma", "-mf16c"};
  static const Microkernel w8a8 = {"spark_avx2_linear_w8a8", "avx2_linear.c",
                                   flags};
  static const Microkernel w4a8 = {"spark_avx2_linear_w4a8", "avx2_linear.c",
                                   flags};
  static const Microkernel w4a16[] = {
      {"spark_avx2_linear_w4a16", "avx2_linear.c", flags},
      {"spark_avx2_linear_w4a16_xbf16", "avx2_linear.c", flags},
      {"spark_avx2_linear_w4a16_xf16", "avx2_linear.c", flags}};
  static const Microkernel w8a16[] = {
      {"spark_avx2_linear_w8a16", "avx2_linear.c", flags},
      {"spark_avx2_linear_w8a16_xbf16", "avx2_linear.c", flags},
      {"spark_avx2_linear_w8a16_xf16", "avx2_linear.c", flags}};
  static const Microkernel bf16 = {"spark_avx2_linear_bf16", "avx2_linear.c",
                                   flags};
  static const Microkernel attention = {"spark_avx2_attention",
                                        "avx2_attention.c",
                                        {"-mavx2", "-mfma", "-mf16c"},
                                        attentionMicrokernelArguments};
  if (spec.kind == KernelKind::Attention)
    return attentionFits(spec, false) ? &attention : nullptr;
  if (spec.kind != KernelKind::Linear || spec.out % SPARK_MK_ROWS != 0)
    return nullptr;
  // Which of the three: the rounding of 16-bit inputs.
  const int rounding = spec.inputType == DType::BF16  ? 1
                       : spec.inputType == DType::F16 ? 2
                                                      : 0;
  // 4-bit groups of either size (avx2_linear.c reads it off the scales).
  const bool groups =
      spec.group == SPARK_MK_SMALL_GROUP || spec.group == SPARK_MK_GROUP;
  if (spec.isInt8Linear(false) && spec.in % SPARK_MK_AVX2_INT8_DEPTH == 0)
    return &w8a8;
  if (spec.inputBits == 8 && !spec.inputBlock && spec.symmetricGroups && groups)
    return &w4a8;
  if (spec.inputBits)
    return nullptr;
  if (groups && !spec.symmetricGroups)
    return &w4a16[rounding];
  if (spec.weightType == DType::I8 && !spec.group &&
      spec.in % SPARK_MK_AVX2_DEPTH == 0)
    return &w8a16[rounding];
  if (spec.weightType == DType::BF16 && spec.in % SPARK_MK_AVX2_DEPTH == 0)
    return &bf16;
  return nullptr;
}

const Microkernel *microkernelFor(const TargetVariant &variant,
                                  const KernelSpec &spec) {
  // One source may hold several kernels; it is compiled once with the union
  // of their flags.
  static const std::vector<const char *> amxFlags = {"-mamx-tile", "-mamx-bf16",
                                                     "-mamx-int8"};
  static const std::vector<const char *> vnniFlags = {"-mavx512f", "-mavx512bw",
                                                      "-mavx512vnni", "-mf16c"};
  static const Microkernel amxTiles = {"spark_amx_linear_bf16", "amx_linear.c",
                                       amxFlags};
  static const Microkernel amxInt8 = {"spark_amx_linear_w8a8", "amx_linear.c",
                                      amxFlags};
  static const std::vector<const char *> bf16Flags = {
      "-mavx512f", "-mavx512bw", "-mavx512bf16", "-mavx512vnni", "-mf16c"};
  static const Microkernel bf16Dot = {"spark_bf16_linear", "bf16_linear.c",
                                      bf16Flags};
  static const Microkernel bf16W8 = {"spark_bf16_linear_w8a16", "bf16_linear.c",
                                     bf16Flags};
  static const Microkernel vnniW8A8 = {"spark_vnni_linear_w8a8",
                                       "int8_linear.c", vnniFlags};
  static const Microkernel vnniW4A8 = {"spark_vnni_linear_w4a8",
                                       "int8_linear.c", vnniFlags};
  static const std::vector<const char *> w4Flags = {"-mavx512f", "-mavx512bw",
                                                    "-mf16c"};
  static const Microkernel avx512W4 = {"spark_avx512_linear_w4a16",
                                       "w4_linear.c", w4Flags};
  // Attention with f32, bf16 or f16 caches: all heads of a token and range
  // of keys in one task, whole cache slots streamed (decode), or the query
  // heads of a key/value head in tiles of 64 queries, each cached row read
  // once per tile (prefill chunks of 8 tokens or more; avx512_attention.c).
  // Halide's ran one task per query head and token.
  static const Microkernel attention = {
      "spark_avx512_attention",
      "avx512_attention.c",
      {"-mavx512f", "-mavx2", "-mfma", "-mf16c"},
      attentionMicrokernelArguments};
  // 6-bit codes (a wider grid for the head) in groups of 128, int8 inputs
  // (w4a8 builds) or bf16 / f16 ones as int16 (w4a16): int8_linear.c's
  // rows, each group's 64 nibble bytes and 32 bytes of top bits unpacked
  // into two vectors of 6-bit codes for vpdpbusd. The rest (the avx2
  // variant, f32 inputs, other groups): Halide's kernels.
  static const Microkernel vnniW6A8 = {"spark_vnni_linear_w6a8",
                                       "int8_linear.c", vnniFlags};
  static const Microkernel vnniW6A16[] = {
      {"spark_vnni_linear_w6a16_xbf16", "int8_linear.c", vnniFlags},
      {"spark_vnni_linear_w6a16_xf16", "int8_linear.c", vnniFlags}};
  if (spec.group && spec.codeBits == 6) {
    if (variant.avx2Linear || !(variant.int8Dot || variant.bf16Dot) ||
        spec.kind != KernelKind::Linear || spec.group != SPARK_MK_GROUP ||
        spec.in % 128 != 0 || spec.symmetricGroups)
      return nullptr;
    if (spec.inputBits == 8 && !spec.inputBlock && variant.int8Dot)
      return &vnniW6A8;
    if (!spec.inputBits &&
        (spec.inputType == DType::BF16 || spec.inputType == DType::F16))
      return &vnniW6A16[spec.inputType == DType::F16];
    return nullptr;
  }
  if (spec.group && spec.codeBits != 4)
    return nullptr;
  // The avx2 variant runs on CPUs without AVX-512: none of the kernels
  // below may serve it.
  if (variant.avx2Linear)
    return avx2MicrokernelFor(spec);
  if (spec.kind == KernelKind::Attention)
    return attentionFits(spec, true) ? &attention : nullptr;
  const bool tiles =
      variant.matrixTiles && variant.amxKernel == AmxKernel::Tiles;
  // Whole 32-deep tiles, two 16-row A tiles per step.
  if (tiles && isBF16Prefill(spec) && spec.in % SPARK_MK_AMX_BF16_DEPTH == 0 &&
      spec.out % SPARK_MK_AMX_ROWS == 0)
    return &amxTiles;
  // Whole 64-deep int8 tiles.
  if (tiles && spec.phase == Phase::Prefill && spec.isInt8Linear(false) &&
      spec.in % SPARK_MK_AMX_INT8_DEPTH == 0 &&
      spec.out % SPARK_MK_AMX_ROWS == 0)
    return &amxInt8;
  if (variant.bf16Dot && spec.kind == KernelKind::Linear &&
      spec.weightType == DType::BF16 && spec.in % SPARK_MK_BF16_DEPTH == 0)
    return &bf16Dot;
  // w8a16 with bf16 inputs: prefill widens the codes to bf16 (exact) for
  // vdpbf16ps, shared between 4 tokens; decode streams one row at a time,
  // the codes widened to int16 against int16 inputs on vpdpwssd (see
  // bf16_linear.c).
  if (variant.bf16Dot && spec.kind == KernelKind::Linear &&
      spec.weightType == DType::I8 && !spec.inputBits &&
      spec.inputType == DType::BF16 && spec.in % SPARK_MK_BF16_DEPTH == 0)
    return &bf16W8;
  // w4a16 with bf16 or f16 inputs, on every VNNI CPU: the inputs as int16
  // split into bytes, four vpdpbusd per 64 weight bytes and token; prefill
  // in tiles of 4 rows x 3 tokens (see int8_linear.c; on an Intel Xeon with
  // AMX twice the speed of the bf16 lookups in decode and in prefill,
  // docs/performance.md).
  static const Microkernel vnniW4A16[] = {
      {"spark_vnni_linear_w4a16_xbf16", "int8_linear.c", vnniFlags},
      {"spark_vnni_linear_w4a16_xf16", "int8_linear.c", vnniFlags}};
  if ((variant.int8Dot || variant.bf16Dot) && spec.kind == KernelKind::Linear &&
      !spec.inputBits && spec.group == SPARK_MK_GROUP &&
      !spec.symmetricGroups &&
      (spec.inputType == DType::BF16 || spec.inputType == DType::F16))
    return &vnniW4A16[spec.inputType == DType::F16];
  if (variant.int8Dot && spec.isInt8Linear(false) &&
      spec.in % SPARK_MK_VNNI_DEPTH == 0 && spec.out % SPARK_MK_ROWS == 0)
    return &vnniW8A8;
  if (variant.int8Dot && spec.isInt8Linear(true) &&
      spec.group == SPARK_MK_GROUP && spec.out % SPARK_MK_ROWS == 0)
    return &vnniW4A8;
  // 4-bit asymmetric groups with f32 inputs (w4a16, --activations=f32):
  // AVX-512 FMAs on the widened nibbles, in the same variant.
  if (variant.int8Dot && spec.kind == KernelKind::Linear && !spec.inputBits &&
      spec.group == SPARK_MK_GROUP && !spec.symmetricGroups &&
      spec.out % SPARK_MK_ROWS == 0 && spec.inputType == DType::F32)
    return &avx512W4;
  // AVX-512 without VNNI (Skylake-SP/X): products with int8 inputs on the
  // AVX2 kernels (since 2026-12-01, when Halide's kernel of them had lost
  // its input quantization: docs/targets.md).
  if (!variant.int8Dot && !variant.bf16Dot && !variant.matrixTiles &&
      spec.kind == KernelKind::Linear && spec.inputBits == 8)
    return avx2MicrokernelFor(spec);
  return nullptr;
}

bool compilesKernel(const TargetVariant &variant, const KernelSpec &spec) {
  if (variant.bf16Dot || variant.int8Dot)
    return false; // their own kernels are microkernels; the rest: fallback
  if (variant.avx2Linear)
    return !microkernelFor(variant, spec);
  if (!variant.matrixTiles)
    return !microkernelFor(variant, spec);
  // Whole 8 x 8 tiles over the rows, K in bf16 pairs.
  return isBF16Prefill(spec) && !microkernelFor(variant, spec) &&
         spec.in % 2 == 0 && spec.out % 8 == 0;
}

// Prefill on AMX tiles: 8 x 8 tiles of (tokens, rows) accumulate
// tdpbf16ps over K in steps of 2 (Halide 14 covers K = 2 per tile op), then
// are stored and transposed into [rows, tokens]. The activations are packed
// into bf16 pairs once per call.
void scheduleLinearTiles(KernelAlgorithm &k) {
  const int tile = 8;
  Func out = k.output, dot = k.accumulator;
  // The driver passes a multiple of 8 tokens (kPrefillRowMultiple).
  out.output_buffer().dim(1).set_extent(
      (out.output_buffer().dim(1).extent() / 8) * 8);
  Func stored = dot.in(out);
  k.packedInput.compute_root();
  Var t = dot.args()[0], o = dot.args()[1];
  Var ti("ti"), oi("oi"), st("st"), so("so");
  RVar ro("ro"), ri("ri");
  stored.compute_root()
      .tile(t, o, st, so, tile, tile)
      .vectorize(st)
      .vectorize(so);
  dot.compute_at(stored, t)
      .store_in(MemoryType::AMXTile)
      .tile(t, o, ti, oi, tile, tile)
      .vectorize(ti)
      .vectorize(oi);
  dot.update()
      .tile(t, o, ti, oi, tile, tile)
      .split(k.reduction.x, ro, ri, 2)
      .reorder({ri, ti, oi, ro, t, o})
      .atomic()
      .vectorize(ri)
      .vectorize(ti)
      .vectorize(oi);
  out.vectorize(k.x, 16, TailStrategy::GuardWithIf);
}

void scheduleX86(KernelAlgorithm &k, const TargetVariant &variant) {
  if (k.packedInput.defined()) {
    scheduleLinearTiles(k);
    return;
  }
  scheduleCpuKernel(k, variant.vectorFloats);
}

} // namespace

TargetInfo x86Target(TargetKind kind, AmxKernel amxKernel) {
  TargetInfo t;
  t.kind = kind;
  t.family = "x86";
  t.variants = variants(kind, amxKernel);
  t.runtime = Target("x86-64-linux-sse41");
  t.cc = SPARK_CLANG;
  t.cflags = {"-fPIC"};
  t.exeFlags = {"-static"};
  t.microkernelDir = dataPath("targets/x86/lib");
  t.dispatchHeader = "x86_dispatch.h";
  if (t.matrixTiles())
    t.dispatchReason = "spark_amx_missing";
  t.unsupportedMessage =
      "this library needs an x86-64 CPU with AVX2, FMA and F16C";
  t.native = true;
  t.groupedRows = true;
  t.microkernelFor = microkernelFor;
  t.compilesKernel = compilesKernel;
  t.schedule = scheduleX86;
  return t;
}

} // namespace spark
