//===- Passes.h - passes of the spark compiler -----------------------------===//
#ifndef SPARK_PASSES_PASSES_H
#define SPARK_PASSES_PASSES_H

#include "spark/Dialect/SparkOps.h"

#include "mlir/Pass/Pass.h"

namespace spark {

#define GEN_PASS_DECL
#include "spark/Passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spark/Passes/Passes.h.inc"

} // namespace spark

#endif // SPARK_PASSES_PASSES_H
