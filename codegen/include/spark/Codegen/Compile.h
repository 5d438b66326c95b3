//===- Compile.h - one build of a checkpoint, from import to folder -------===//
//
// What spark-compile does for a library build, as library calls: import the
// checkpoint, run the pass pipeline, plan, then write the kernels, library,
// weight pack, header and manifest into a folder that appears only when
// complete. The tool checks its options, fills a Build and calls these; the
// builds it makes on the way (the parts of --target=s25, the fp32 builds of
// --calib and --report-fidelity) are Builds of their own, in the same process.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_COMPILE_H
#define SPARK_CODEGEN_COMPILE_H

#include "spark/Codegen/ModelPlan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <string>
#include <vector>

namespace spark {

class Checkpoint;

/// Calibrated product inputs (--calib, --calib-ranges), by the weight each
/// product reads.
struct Calibration {
  /// The clipping range of each product's input (static int8 activations).
  llvm::StringMap<float> ranges;
  /// Each product input channel's mean x^2 (weights the 4-bit group search).
  std::map<std::string, std::vector<float>> importance;
  /// With --gptq: each product input's second moment E[x x^T] (K x K,
  /// row-major), from which GPTQ rounds the 4-bit weights; measured by
  /// --calib only (calibration.json does not hold them).
  std::map<std::string, std::vector<float>> secondMoments;
  /// OUT/calibration.json as written.
  std::string json;
};

/// One build of a checkpoint and everything that decides it.
struct Build {
  std::string out; // the output folder
  /// What the planner reads: target, dtype, context, chunk, scheme, group
  /// size, recipe, activations, AMX kernel, entry point, C flags, the pack
  /// to copy weights from, probes, --emit=exe, quiet. Its `calibrated` and
  /// `importance` follow `calibration` (buildOptions()).
  BuildOptions options;
  int64_t activationBlock = 0;   // int8 activations: a scale per block
  std::string kvCache = "f32";   // the caches' element type
  bool fusion = true;            // the fusion passes (--no-fusion: false)
  bool decomposedImport = false; // --import-form=decomposed
  bool weightImportance = true;  // with a calibration: weight the 4-bit search
  bool gptq = false; // with a calibration's second moments: GPTQ rounding
  const Calibration *calibration = nullptr;
  /// The command line recorded in the manifest as reproducing the build.
  std::string reproduce;
};

/// An fp32 build for `target` into `out` with every option at its default
/// but the context, chunk, import and fusion options of `like`, quiet (the
/// reference of --report-fidelity; with `probeInputs`, the measuring build
/// of --calib).
Build fp32Build(const Build &like, llvm::StringRef out, TargetKind target,
                bool probeInputs);

/// The planner's options of `build`: build.options with the calibration's.
BuildOptions buildOptions(const Build &build);

/// Seconds on the steady clock (differences of two are durations).
double steadySeconds();

/// Progress of one build: the wall time of each phase, printed as it ends,
/// and the total (not when quiet).
class PhaseClock {
public:
  explicit PhaseClock(bool quiet, double start = steadySeconds())
      : quiet(quiet), start(start), last(start) {}
  void done(const llvm::Twine &phase);
  void total();

private:
  bool quiet;
  double start, last;
};

/// Prints the warnings of the passes (MLIR prints only errors by default).
void printWarnings(mlir::MLIRContext &context);

/// The checkpoint as spark IR in `context`.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModule(mlir::MLIRContext &context, const Checkpoint &checkpoint,
             const Build &build);

/// The pass pipeline: fusions, the calibrated ranges (when given),
/// quantization, then the cache layout, RoPE tables and memory plan. MLIR's
/// pass-manager flags (--mlir-print-ir-after-all, --mlir-timing, ...) apply;
/// failures are reported as MLIR diagnostics.
mlir::LogicalResult runPasses(mlir::MLIRContext &context, mlir::ModuleOp module,
                              const Build &build);

/// A library build of `checkpoint` into the folder build.out: import,
/// passes, plan, then the kernels and library beside the weight pack, the
/// header, the manifest and the text layer's files, written beside the
/// folder and moved into place when complete (an earlier build there is
/// replaced; a folder that is not one is refused). The first phase's time
/// counts from `started`.
llvm::Error compileLibrary(const Checkpoint &checkpoint, const Build &build,
                           double started = steadySeconds());

/// --target=s25 (Snapdragon 8 Elite: Oryon CPU cores + Hexagon DSP): the
/// arm64 and hexagon builds of `build` (the hexagon part copying the arm64
/// part's quantized weights), the runtime built for arm64, the FastRPC
/// interface and DSP-side skeleton source, a manifest saying which runs
/// where, and the integration notes, in the folder build.out.
llvm::Error buildS25Bundle(const Checkpoint &checkpoint, const Build &build);

/// A JSON file's text and value; an error names the file.
struct JSONFile {
  std::string text;
  llvm::json::Value value = nullptr;
};
llvm::Expected<JSONFile> readJSONFile(llvm::StringRef path);

/// Removes a folder (and its contents) when it goes out of scope, unless
/// its path was cleared.
struct TemporaryFolder {
  std::string path;
  TemporaryFolder() = default;
  TemporaryFolder(const TemporaryFolder &) = delete;
  TemporaryFolder &operator=(const TemporaryFolder &) = delete;
  ~TemporaryFolder();
};

} // namespace spark

#endif // SPARK_CODEGEN_COMPILE_H
