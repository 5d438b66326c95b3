//===- Passes.h - passes of the code generator -----------------*- C++ -*-===//
#ifndef SPARK_CODEGEN_PASSES_H
#define SPARK_CODEGEN_PASSES_H

#include "mlir/Pass/Pass.h"

namespace spark {

#define GEN_PASS_DECL
#include "spark/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spark/Codegen/Passes.h.inc"

} // namespace spark

#endif // SPARK_CODEGEN_PASSES_H
