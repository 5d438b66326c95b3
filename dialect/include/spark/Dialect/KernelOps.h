//===- KernelOps.h - the spark_kernel dialect: a step as kernel calls -----===//
#ifndef SPARK_DIALECT_KERNELOPS_H
#define SPARK_DIALECT_KERNELOPS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"

#include "spark/Dialect/KernelDialect.h.inc"
#include "spark/Dialect/KernelEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "spark/Dialect/KernelAttrs.h.inc"

#define GET_OP_CLASSES
#include "spark/Dialect/KernelOps.h.inc"

namespace spark::kernel {

/// The operands a call of a kernel with this spec takes: its buffers,
/// scalar parameters and output, in the kernel's argument order.
int64_t operandCount(SpecAttr spec);

/// A plan's symbols, each with its index among the ops of its kind in the
/// plan's order: kernel i is the driver's kernel-table member k<i>, tensor i
/// the step's weights[i] (the pack's tensor table), cache i its caches[i].
/// The one place that convention is written: the step's lowering and the
/// driver's tables both read it here.
struct PlanSymbols {
  explicit PlanSymbols(PlanOp plan);

  llvm::StringMap<int> kernelIndex, tensorIndex, cacheIndex;
  llvm::StringMap<KernelOp> kernels;
  llvm::StringMap<CacheOp> caches;
  StepOp step; // null if the plan has none
};

} // namespace spark::kernel

#endif // SPARK_DIALECT_KERNELOPS_H
