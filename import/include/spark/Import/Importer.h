//===- Importer.h - checkpoint -> spark module -----------------------------===//
#ifndef SPARK_IMPORT_IMPORTER_H
#define SPARK_IMPORT_IMPORTER_H

#include "spark/Import/Checkpoint.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace spark {

struct ImportOptions {
  /// Positions a build can hold; sizes the caches (never
  /// max_position_embeddings).
  int64_t maxContext = 4096;
  /// Emit RMSNorm and GEGLU decomposed (pow/mean/add/rsqrt/mul, gelu and
  /// mul), the way a generic exporter writes them, instead of fused.
  bool decomposed = false;
};

/// Builds the module of one decoder step of `checkpoint`: a `spark.weight`
/// per tensor and `func.func @step(ids, positions, caches...) -> (logits,
/// caches...)`, in the fused form the spec describes. The module verifies.
mlir::OwningOpRef<mlir::ModuleOp> importCheckpoint(mlir::MLIRContext &context,
                                                   const Checkpoint &checkpoint,
                                                   const ImportOptions &options);

/// Registers every dialect an imported module uses.
void registerImportDialects(mlir::MLIRContext &context);

} // namespace spark

#endif // SPARK_IMPORT_IMPORTER_H
