//===- Passes.h - passes of the spark compiler -----------------------------===//
#ifndef SPARK_PASSES_PASSES_H
#define SPARK_PASSES_PASSES_H

#include "spark/Dialect/SparkOps.h"

#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace spark {

/// 4-bit weights: weights per group unless --group-size says otherwise.
constexpr int64_t kDefaultGroupSize = 128;
/// The sizes a 4-bit group and an int8 activation block may have.
constexpr bool isSupportedBlock(int64_t n) {
  return n == 32 || n == 64 || n == 128 || n == 256;
}

/// --quant (QuantScheme) and --activations (Activations) are enums of the
/// spark dialect: symbolizeQuantScheme("w4a8"), stringifyActivations(...).
inline bool hasFourBitWeights(QuantScheme s) {
  return s == QuantScheme::W4A16 || s == QuantScheme::W4A8;
}
inline bool hasInt8Inputs(QuantScheme s) {
  return s == QuantScheme::W8A8 || s == QuantScheme::W4A8;
}

/// Matrix kernels for more than one token work on a multiple of this many
/// rows (the AMX tiles cover 8 tokens): spark-plan-memory's default
/// row-multiple, so arena values and the logits buffer have room for the
/// rounding.
constexpr int64_t kPrefillRowMultiple = 8;

/// The rows a prefill matrix kernel runs for `rows` rows.
constexpr int64_t prefillRows(int64_t rows) {
  return (rows + kPrefillRowMultiple - 1) / kPrefillRowMultiple *
         kPrefillRowMultiple;
}

/// The rows every arena value holds for chunks of at most `maxChunk`
/// tokens: a call on rows [first, first + n), first + n <= maxChunk, may
/// run prefillRows(n) of them.
constexpr int64_t arenaRows(int64_t maxChunk, int64_t rowMultiple) {
  return maxChunk + rowMultiple - 1;
}

/// The generated driver's function for the plan's kernel `index`
/// (spark_kernel_<index>): it takes the chosen ISA variant's position, then
/// the kernel's arguments, and calls that variant's function for the
/// kernel. spark-lower-step-to-emitc calls it; the driver defines it.
inline std::string kernelDispatchName(int64_t index) {
  return "spark_kernel_" + std::to_string(index);
}

#define GEN_PASS_DECL
#include "spark/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spark/Passes/Passes.h.inc"

/// Stores calibrated activation ranges in the IR: `ranges` maps the weight
/// a `spark.linear` / `spark.logits` reads (after fusion, e.g.
/// "model.layers.0.mlp.gate_proj.weight.fused") to the largest |input| seen;
/// each such op gets `input_range`. An op without a range, or a range for no
/// op, is an error naming it.
llvm::Error attachInputRanges(mlir::ModuleOp module,
                              const llvm::StringMap<float> &ranges);

} // namespace spark

#endif // SPARK_PASSES_PASSES_H
