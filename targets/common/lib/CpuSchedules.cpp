//===- CpuSchedules.cpp - schedules shared by the SIMD CPU targets --------===//
#include "spark/Targets/CpuSchedules.h"
#include "spark/Targets/Target.h"

using namespace Halide;

namespace spark {

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

/// Int8 inputs: each token's max |x|, scale and codes, once per call, before
/// the product's parallel loop reads them.
void scheduleInputQuantization(KernelAlgorithm &k, int lanes) {
  k.inputRange.compute_root();
  k.inputScale.compute_root();
  if (Func partial = vectorizeSum(k.inputRange, k.innerReduction,
                                  k.spec.inputBlock ? k.spec.inputBlock
                                                    : k.spec.in,
                                  lanes);
      partial.defined())
    partial.compute_at(k.inputRange, k.inputRange.args()[0]);
  k.quantizedInput.compute_root().vectorize(k.x, lanes,
                                            TailStrategy::GuardWithIf);
}

} // namespace

void scheduleCpuKernel(KernelAlgorithm &k, int lanes) {
  if (k.quantizedInput.defined())
    scheduleInputQuantization(k, lanes);
  if (k.roundedInput.defined()) // 16-bit inputs, once per call
    k.roundedInput.compute_root().vectorize(k.x, lanes,
                                            TailStrategy::GuardWithIf);
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

void scheduleCpuVariant(KernelAlgorithm &k, const TargetVariant &variant) {
  scheduleCpuKernel(k, variant.vectorFloats);
}

} // namespace spark
