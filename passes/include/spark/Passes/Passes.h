//===- Passes.h - passes of the spark compiler -----------------------------===//
#ifndef SPARK_PASSES_PASSES_H
#define SPARK_PASSES_PASSES_H

#include "spark/Dialect/SparkOps.h"

#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

namespace spark {

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
