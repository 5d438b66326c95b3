//===- SparkDialect.cpp - registration of the spark dialect ---------------===//
#include "spark/Dialect/SparkDialect.h"
#include "spark/Dialect/SparkOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace spark;

#include "spark/Dialect/SparkDialect.cpp.inc"
#include "spark/Dialect/SparkEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "spark/Dialect/SparkAttrs.cpp.inc"

void SparkDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "spark/Dialect/SparkAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "spark/Dialect/SparkOps.cpp.inc"
      >();
}

LogicalResult QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                unsigned bits, int64_t groupSize,
                                bool symmetric) {
  if (bits != 4 && bits != 6 && bits != 8)
    return emitError() << "quantization bits must be 4, 6 or 8, got " << bits;
  if (bits == 6 && (groupSize <= 0 || symmetric))
    return emitError() << "6-bit quantization is asymmetric and in groups "
                          "(group_size > 0, symmetric = false), got "
                          "group_size = "
                       << groupSize << (symmetric ? ", symmetric" : "");
  if (groupSize < 0)
    return emitError() << "quantization group_size must be >= 0 (0 means per "
                          "output channel), got "
                       << groupSize;
  return success();
}
