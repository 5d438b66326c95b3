//===- Emit.h - write a build's artifacts ----------------------------------===//
#ifndef SPARK_CODEGEN_EMIT_H
#define SPARK_CODEGEN_EMIT_H

#include "spark/Codegen/ModelPlan.h"
#include "spark/Targets/X86.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace spark {

/// The C source of the generated step driver (kernel calls in order, buffer
/// views, cache writes, arena offsets, CPU dispatch) for the ISA variants the
/// kernels were compiled for, best first.
std::string emitDriverSource(const ModelPlan &plan,
                             llvm::ArrayRef<TargetVariant> variants);

/// spark_model.h: declares spark_model_definition() and the model's sizes.
std::string emitModelHeader(const ModelPlan &plan);

/// Writes the weight pack (model.spkw) to `path`: tensors converted to their
/// pack dtype, aligned, checksummed. Streams; memory stays bounded.
llvm::Error writeWeightPack(const ModelPlan &plan, llvm::StringRef path);

/// manifest.json: what was built and how to reproduce it.
std::string emitManifest(const ModelPlan &plan, uint64_t packBytes,
                         llvm::StringRef commandLine);

enum class KernelText { HalideStatements, Assembly };

/// Writes every kernel's lowered Halide statements or assembly, for every
/// host variant, to `os` (each behind a `// ===== kernel NAME (VARIANT)`
/// line). `scratchDir` holds one temporary file at a time.
llvm::Error emitKernelText(const ModelPlan &plan, KernelText kind,
                           llvm::StringRef scratchDir, llvm::raw_ostream &os);

/// Compiles every kernel for every host variant, the driver and the Halide
/// runtime, and writes libspark_model.a (and libspark_model.so, which
/// spark-run and spark-bench load) into `dir`.
llvm::Error buildHostLibrary(const ModelPlan &plan, llvm::StringRef dir);

} // namespace spark

#endif // SPARK_CODEGEN_EMIT_H
