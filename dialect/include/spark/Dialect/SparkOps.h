//===- SparkOps.h - operations of the spark dialect -----------------------===//
#ifndef SPARK_DIALECT_SPARKOPS_H
#define SPARK_DIALECT_SPARKOPS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "spark/Dialect/SparkDialect.h"

#define GET_OP_CLASSES
#include "spark/Dialect/SparkOps.h.inc"

#endif // SPARK_DIALECT_SPARKOPS_H
