//===- Emit.h - write a build's artifacts -----------------------*- C++ -*-===//
#ifndef SPARK_CODEGEN_EMIT_H
#define SPARK_CODEGEN_EMIT_H

#include "spark/Codegen/ModelPlan.h"
#include "spark/Targets/Target.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace spark {

/// The C symbol of kernel `k` compiled for `variant` (spark_NAME_VARIANT),
/// or, with a microkernel's symbol as `variant`, the driver's wrapper of that
/// microkernel for `k`.
std::string kernelSymbol(const KernelSpec &k, llvm::StringRef variant);

/// The C source of the generated step driver (kernel calls in order, buffer
/// views, cache writes, arena offsets, CPU dispatch) for the target's ISA
/// variants. The step's calls and cache writes are written from the plan's
/// spark_kernel IR (planToIR), verified first.
llvm::Expected<std::string> emitDriverSource(const ModelPlan &plan,
                                             const TargetInfo &target);

/// spark_model.h: declares spark_model_definition() and the model's sizes.
llvm::Expected<std::string> emitModelHeader(const ModelPlan &plan);

/// Writes the weight pack (model.spkw) to `path`: tensors converted to their
/// pack dtype, aligned, checksummed. Streams; memory stays bounded.
llvm::Error writeWeightPack(const ModelPlan &plan, llvm::StringRef path);

/// manifest.json: what was built and how to reproduce it.
std::string emitManifest(const ModelPlan &plan, uint64_t packBytes,
                         llvm::StringRef commandLine);

enum class KernelText { HalideStatements, Assembly };

/// Writes every kernel's lowered Halide statements or assembly, for every
/// variant of the target, to `os` (each behind a
/// `// ===== kernel NAME (VARIANT)` line). `scratchDir` holds one temporary
/// file at a time.
llvm::Error emitKernelText(const ModelPlan &plan, KernelText kind,
                           llvm::StringRef scratchDir, llvm::raw_ostream &os);

/// Compiles every kernel for every variant of the build's target, the
/// microkernels, the driver and the Halide runtime, and writes
/// libspark_model.a and spark_model.h into `dir`; for targets that run here
/// also libspark_model.so (which spark-run, spark-bench and spark-fidelity
/// load); with `executable`, a static `spark-run` for the target.
llvm::Error buildLibrary(const ModelPlan &plan, llvm::StringRef dir,
                         bool executable);

/// Writes `text` to `path` through a temporary name beside it, renamed into
/// place when complete.
llvm::Error writeTextFile(llvm::StringRef path, llvm::StringRef text);

/// Compiles C `source` to `object` with the target's compiler and flags
/// (-std=gnu11 -O2, the runtime's, Halide's and the targets' common
/// headers), then `extraFlags`; `what` names the step in the error.
llvm::Error compileC(const TargetInfo &target, llvm::StringRef source,
                     llvm::StringRef object,
                     llvm::ArrayRef<std::string> extraFlags,
                     llvm::StringRef what);

/// Writes `archive`, a deterministic static library of one object, stored
/// under `memberName`.
llvm::Error archiveObject(llvm::StringRef object, llvm::StringRef memberName,
                          llvm::StringRef archive);

/// The C runtime compiled for `target`: `dir`/libspark_runtime.a and
/// `dir`/include/spark/{runtime,model_abi,pack_format}.h.
llvm::Error buildRuntimeLibrary(const TargetInfo &target, llvm::StringRef dir);

} // namespace spark

#endif // SPARK_CODEGEN_EMIT_H
