//===- SparkDialect.h - the spark dialect, its enums and attributes -------===//
#ifndef SPARK_DIALECT_SPARKDIALECT_H
#define SPARK_DIALECT_SPARKDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "spark/Dialect/SparkDialect.h.inc"
#include "spark/Dialect/SparkEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "spark/Dialect/SparkAttrs.h.inc"

#endif // SPARK_DIALECT_SPARKDIALECT_H
