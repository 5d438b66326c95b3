//===- PlanIR.h - a model plan as spark_kernel IR --------------*- C++ -*-===//
//
// The kernel plan as a printable, verifiable stage: `spark-compile
// --emit=plan` prints planToIR()'s module.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_PLANIR_H
#define SPARK_CODEGEN_PLANIR_H

#include "spark/Codegen/ModelPlan.h"
#include "spark/Dialect/KernelOps.h"

#include "mlir/IR/OwningOpRef.h"

namespace spark {

/// The pack element type of a memref / spec element type (ui4, ui6 and ui8
/// are U8 bytes, i8 is I8, bf16, f16, else F32).
DType elementDType(mlir::Type type);

/// The spec attribute of a kernel, and back.
kernel::SpecAttr specAttr(mlir::MLIRContext *context, const KernelSpec &spec);
KernelSpec kernelSpec(kernel::SpecAttr attr);

/// The plan as one spark_kernel.plan op in a module, verified: a plan that
/// fails the dialect's verifiers is an error naming the op.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
planToIR(const ModelPlan &plan, mlir::MLIRContext &context);

} // namespace spark

#endif // SPARK_CODEGEN_PLANIR_H
