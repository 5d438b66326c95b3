//===- X86Schedules.cpp - x86 schedules of the spark kernels --------------===//
#include "spark/Targets/X86.h"

using namespace Halide;

namespace spark {

std::vector<TargetVariant> x86HostVariants() {
  const char *base = "x86-64-linux-sse41-avx-avx2-fma-f16c-no_runtime";
  TargetVariant avx512;
  avx512.name = "avx512";
  avx512.halide = Target(std::string(base) + "-avx512-avx512_skylake");
  avx512.vectorFloats = 16;
  avx512.cpuCondition =
      "__builtin_cpu_supports(\"avx512f\") && "
      "__builtin_cpu_supports(\"avx512cd\") && "
      "__builtin_cpu_supports(\"avx512bw\") && "
      "__builtin_cpu_supports(\"avx512dq\") && "
      "__builtin_cpu_supports(\"avx512vl\") && "
      "__builtin_cpu_supports(\"avx2\") && __builtin_cpu_supports(\"fma\") && "
      "__builtin_cpu_supports(\"f16c\")";
  // Cores with AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4) take
  // vdpbf16ps for bf16 weights: one instruction per 32 weights.
  // Cores with AVX512_VNNI (Cascade Lake on) take vpdpbusd for the int8
  // products of w8a8 and w4a8 builds: 64 byte pairs per instruction.
  TargetVariant vnni = avx512;
  vnni.name = "avx512vnni";
  vnni.cpuCondition = avx512.cpuCondition + " && __builtin_cpu_supports(\"avx512vnni\")";
  vnni.int8Dot = true;
  vnni.fallback = "avx512";
  TargetVariant bf16 = vnni;
  bf16.name = "avx512bf16";
  bf16.cpuCondition = vnni.cpuCondition + " && __builtin_cpu_supports(\"avx512bf16\")";
  bf16.bf16Dot = true;
  bf16.int8Dot = false;
  bf16.fallback = "avx512vnni";
  TargetVariant avx2;
  avx2.name = "avx2";
  avx2.halide = Target(base);
  avx2.vectorFloats = 8;
  avx2.cpuCondition = "__builtin_cpu_supports(\"avx2\") && "
                      "__builtin_cpu_supports(\"fma\") && "
                      "__builtin_cpu_supports(\"f16c\")";
  return {bf16, vnni, avx512, avx2};
}


std::vector<TargetVariant> x86Variants(const std::string &target,
                                       const std::string &matrixKernel) {
  std::vector<TargetVariant> variants = x86HostVariants();
  if (target != "spr")
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
  amx.cpuCondition = "spark_amx_usable()";
  amx.matrixTiles = true;
  amx.fallback = "avx512bf16";
  amx.matrixKernel = matrixKernel;
  variants.insert(variants.begin(), amx);
  return variants;
}

static bool isBF16Prefill(const KernelSpec &spec) {
  return spec.kind == KernelKind::Linear && spec.phase == Phase::Prefill &&
         spec.weightType == DType::BF16;
}

/// A product of int8 inputs with int8 weights (w8a8) or with symmetric
/// 4-bit groups of 128 (w4a8).
static bool isInt8Linear(const KernelSpec &spec, bool fourBit) {
  if (spec.kind != KernelKind::Linear || spec.inputBits != 8)
    return false;
  return fourBit ? spec.group == 128 && spec.symmetricGroups
                 : spec.weightType == DType::I8 && !spec.group;
}

const Microkernel *microkernelFor(const TargetVariant &variant,
                                  const KernelSpec &spec) {
  // One source may hold several kernels; it is compiled once with the union
  // of their flags.
  static const std::vector<const char *> amxFlags = {"-mamx-tile", "-mamx-bf16",
                                                      "-mamx-int8"};
  static const std::vector<const char *> vnniFlags = {
      "-mavx512f", "-mavx512bw", "-mavx512vnni", "-mf16c"};
  static const Microkernel amxTiles = {"spark_amx_linear_bf16", "amx_linear.c",
                                       amxFlags};
  static const Microkernel amxInt8 = {"spark_amx_linear_w8a8", "amx_linear.c",
                                      amxFlags};
  static const Microkernel bf16Dot = {
      "spark_bf16_linear", "bf16_linear.c",
      {"-mavx512f", "-mavx512bw", "-mavx512bf16"}};
  static const Microkernel vnniW8A8 = {"spark_vnni_linear_w8a8",
                                       "int8_linear.c", vnniFlags};
  static const Microkernel vnniW4A8 = {"spark_vnni_linear_w4a8",
                                       "int8_linear.c", vnniFlags};
  const bool tiles = variant.matrixTiles && variant.matrixKernel == "tiles";
  // Whole 32-deep tiles, two 16-row A tiles per step.
  if (tiles && isBF16Prefill(spec) && spec.in % 32 == 0 && spec.out % 32 == 0)
    return &amxTiles;
  // Whole 64-deep int8 tiles.
  if (tiles && spec.phase == Phase::Prefill && isInt8Linear(spec, false) &&
      spec.in % 64 == 0 && spec.out % 32 == 0)
    return &amxInt8;
  if (variant.bf16Dot && spec.kind == KernelKind::Linear &&
      spec.weightType == DType::BF16 && spec.in % 32 == 0)
    return &bf16Dot;
  if (variant.int8Dot && isInt8Linear(spec, false) && spec.in % 64 == 0 &&
      spec.out % 4 == 0)
    return &vnniW8A8;
  if (variant.int8Dot && isInt8Linear(spec, true) && spec.out % 4 == 0)
    return &vnniW4A8;
  return nullptr;
}

bool compilesKernel(const TargetVariant &variant, const KernelSpec &spec) {
  if (variant.bf16Dot || variant.int8Dot)
    return false; // their own kernels are microkernels; the rest: fallback
  if (!variant.matrixTiles)
    return true;
  // Whole 8 x 8 tiles over the rows, K in bf16 pairs.
  return isBF16Prefill(spec) && !microkernelFor(variant, spec) &&
         spec.in % 2 == 0 && spec.out % 8 == 0;
}

Target x86RuntimeTarget() { return Target("x86-64-linux-sse41"); }

namespace {

/// Largest power of two <= limit that divides n (at least 1).
int dividingBlock(int64_t n, int limit) {
  int block = 1;
  while (block * 2 <= limit && n % (block * 2) == 0)
    block *= 2;
  return block;
}

/// Elementwise kernels: vectorize the features, one task per token row.
void scheduleElementwise(KernelAlgorithm &k, int lanes) {
  k.output.vectorize(k.x, lanes, TailStrategy::GuardWithIf).parallel(k.y);
}

/// A sum over `r` into f(pure vars), vectorized into `lanes` partial sums
/// (vertical FMAs, one horizontal add at the end) when the length allows.
/// Returns the rfactored partial-sum Func, or an undefined Func.
Func vectorizeSum(Func f, RDom r, int64_t length, int lanes,
                  RVar outer = RVar("ro"), Var lane = Var("lane")) {
  if (length % lanes != 0)
    return Func();
  RVar inner("ri");
  Func partial = f.update().split(r.x, outer, inner, lanes).rfactor(inner, lane);
  // rfactor appends the lane to the pure vars; store it innermost so the
  // partial sums are whole vectors.
  std::vector<Var> storage = {lane};
  for (const Var &v : f.args())
    storage.push_back(v);
  partial.reorder_storage(storage);
  partial.vectorize(lane);
  partial.update().vectorize(lane);
  return partial;
}

void scheduleRMSNorm(KernelAlgorithm &k, int lanes) {
  scheduleElementwise(k, lanes);
  k.sumSquares.compute_at(k.output, k.y);
  if (Func partial = vectorizeSum(k.sumSquares, k.reduction, k.spec.in, lanes);
      partial.defined())
    partial.compute_at(k.output, k.y);
}

// Decode (one token): a GEMV that streams each weight row once. Rows are
// split into blocks, one parallel task each; within a block, 4 rows at a
// time each keep `lanes` partial sums in their own register (4 independent
// FMA chains and memory streams) and reduce them at the end.
void scheduleLinearDecode(KernelAlgorithm &k, int lanes) {
  Func out = k.output, dot = k.accumulator;
  RVar ko("ko");
  Var lane("lane");
  Func partial = vectorizeSum(dot, k.reduction, k.spec.in, lanes, ko, lane);
  Var block("block"), group("group"), row("row");
  const int rowsPerGroup = dividingBlock(k.spec.out, 4);
  out.split(k.x, block, group, dividingBlock(k.spec.out, 64))
      .split(group, group, row, rowsPerGroup)
      .unroll(row)
      .parallel(block);
  dot.compute_at(out, group).unroll(k.x);
  dot.update().unroll(k.x);
  if (partial.defined()) {
    partial.compute_at(out, group);
    partial.reorder(lane, k.x, k.y).unroll(k.x);
    partial.update().reorder(lane, k.x, k.y, ko).unroll(k.x);
  }
}

// Prefill (a chunk): register-blocked over up to 4 weight rows x 4 tokens,
// so each weight vector load feeds 4 tokens and each activation load 4 rows;
// blocks of row tiles are the parallel tasks, so every thread streams its
// own weights once per chunk. The driver passes a multiple of 8 rows
// (kPrefillRowMultiple, itself a multiple of 4).
void schedulePrefillLinear(KernelAlgorithm &k, int lanes) {
  Func out = k.output, dot = k.accumulator;
  RVar ko("ko");
  Var lane("lane");
  Func partial = vectorizeSum(dot, k.reduction, k.spec.in, lanes, ko, lane);
  const int rowBlock = dividingBlock(k.spec.out, 4);
  const int tilesPerTask = dividingBlock(k.spec.out / rowBlock, 16);
  Var rowTile("row_tile"), tokenTile("token_tile"), row("row"), token("token"),
      task("task"), tileInTask("tile_in_task");
  out.output_buffer().dim(1).set_extent(
      (out.output_buffer().dim(1).extent() / 4) * 4);
  out.tile(k.x, k.y, rowTile, tokenTile, row, token, rowBlock, 4,
           TailStrategy::RoundUp)
      .split(rowTile, task, tileInTask, tilesPerTask)
      .reorder(row, token, tokenTile, tileInTask, task)
      .unroll(row)
      .unroll(token)
      .parallel(task);
  dot.compute_at(out, tokenTile).unroll(k.x).unroll(k.y);
  dot.update().unroll(k.x).unroll(k.y);
  if (partial.defined()) {
    partial.compute_at(out, tokenTile);
    // rfactor appends the lane to the pure vars: (row, token, lane).
    partial.reorder(lane, k.x, k.y).unroll(k.x).unroll(k.y);
    partial.update().reorder(lane, k.x, k.y, ko).unroll(k.x).unroll(k.y);
  }
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

void scheduleAttention(KernelAlgorithm &k, int lanes) {
  Var headToken("head_token");
  Func out = k.output;
  out.fuse(k.y, k.z, headToken).parallel(headToken)
      .vectorize(k.x, lanes, TailStrategy::GuardWithIf);
  for (Func f : {k.scores, k.maxScore, k.denominator, k.weights,
                 k.accumulated, k.keyPositions})
    f.compute_at(out, headToken);
  Var m = k.weights.args()[0];
  k.weights.vectorize(m, lanes, TailStrategy::GuardWithIf);
  k.keyPositions.vectorize(k.keyPositions.args()[0], lanes,
                           TailStrategy::GuardWithIf);
  // Dot products q . k over head_dim: lanes-wide partial sums.
  if (k.spec.headDim % lanes == 0)
    k.scores.update().atomic().vectorize(k.innerReduction.x, lanes);
  // Weighted sum of values: vectorize head_dim, walk keys outside it.
  RVar key = k.reduction.x;
  k.accumulated.vectorize(k.x, lanes, TailStrategy::GuardWithIf);
  k.accumulated.update().reorder(k.x, key).vectorize(k.x, lanes,
                                                   TailStrategy::GuardWithIf);
}

} // namespace

/// Int8 inputs: each token's max |x| and codes, once per call, before the
/// product's parallel loop reads them.
void scheduleInputQuantization(KernelAlgorithm &k, int lanes) {
  k.inputRange.compute_root();
  if (Func partial = vectorizeSum(k.inputRange, k.innerReduction, k.spec.in,
                                  lanes);
      partial.defined())
    partial.compute_at(k.inputRange, k.inputRange.args()[0]);
  k.quantizedInput.compute_root().vectorize(k.x, lanes,
                                            TailStrategy::GuardWithIf);
}

void scheduleX86(KernelAlgorithm &k, const TargetVariant &variant) {
  const int lanes = variant.vectorFloats;
  if (k.quantizedInput.defined())
    scheduleInputQuantization(k, lanes);
  if (k.packedInput.defined()) {
    scheduleLinearTiles(k);
    return;
  }
  switch (k.spec.kind) {
  case KernelKind::Embed:
  case KernelKind::Rope:
  case KernelKind::HeadGate:
  case KernelKind::Geglu:
  case KernelKind::Binary:
  case KernelKind::Unary:
    scheduleElementwise(k, lanes);
    break;
  case KernelKind::Mean:
    k.output.parallel(k.y);
    k.accumulator.compute_at(k.output, k.y);
    if (Func partial = vectorizeSum(k.accumulator, k.reduction, k.spec.in, lanes);
        partial.defined())
      partial.compute_at(k.output, k.y);
    break;
  case KernelKind::RMSNorm:
    scheduleRMSNorm(k, lanes);
    break;
  case KernelKind::Linear:
    if (k.spec.phase == Phase::Prefill)
      schedulePrefillLinear(k, lanes);
    else
      scheduleLinearDecode(k, lanes);
    break;
  case KernelKind::Attention:
    scheduleAttention(k, lanes);
    break;
  }
}

} // namespace spark
