//===- spark-compile.cpp - the compiler driver ----------------------------===//
//
// spark-compile CKPT --emit=mlir [-o FILE]
//
// Toy-style driver: each --emit stage stops the pipeline there and prints
// (or writes) what it produced. On any error it exits with status 1 and
// leaves no output file behind.
//
//===----------------------------------------------------------------------===//
#include "spark/Import/Importer.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace {

enum class EmitStage { MLIR };

cl::OptionCategory category("spark-compile options");

cl::opt<std::string> checkpointDir(cl::Positional, cl::Required,
                                   cl::desc("<checkpoint directory>"),
                                   cl::cat(category));

cl::opt<EmitStage> emit(
    "emit", cl::desc("What to produce"), cl::Required,
    cl::values(clEnumValN(EmitStage::MLIR, "mlir",
                          "the imported spark IR (one decoder step)")),
    cl::cat(category));

cl::opt<std::string> outputPath("o",
                                cl::desc("Output file ('-' or absent: stdout)"),
                                cl::value_desc("path"), cl::init("-"),
                                cl::cat(category));

cl::opt<int64_t> maxContext(
    "max-context",
    cl::desc("Positions the build holds; sizes the caches (default 4096)"),
    cl::init(4096), cl::cat(category));

cl::opt<bool> skipFiniteCheck(
    "skip-finite-check",
    cl::desc("Do not scan weights for NaN/Inf (faster import)"),
    cl::init(false), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "spark-compile") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "spark-compile: ahead-of-time compiler for "
                              "Spark-X2.5 checkpoints\n");

  if (maxContext < 1)
    return fail("--max-context must be a positive number of positions, got " +
                Twine(maxContext));

  spark::CheckpointOptions checkpointOptions;
  checkpointOptions.checkFinite = !skipFiniteCheck;
  Expected<std::unique_ptr<spark::Checkpoint>> checkpoint =
      spark::Checkpoint::open(checkpointDir, checkpointOptions);
  if (!checkpoint)
    return fail(toString(checkpoint.takeError()));

  mlir::MLIRContext context;
  spark::ImportOptions importOptions;
  importOptions.maxContext = maxContext;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      spark::importCheckpoint(context, **checkpoint, importOptions);
  if (!module)
    return fail("internal error: the imported module of " + checkpointDir +
                " does not verify");

  switch (emit) {
  case EmitStage::MLIR: {
    // writeToOutput writes to a temporary file and renames it into place, so
    // an interrupted run never leaves a truncated output.
    Error written = writeToOutput(outputPath, [&](raw_ostream &os) {
      module->print(os);
      return Error::success();
    });
    if (written)
      return fail(outputPath + ": " + toString(std::move(written)));
    return 0;
  }
  }
  return 0;
}
