//===- spark-opt.cpp - pass driver for the spark dialect (MlirOptMain) ----===//
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "spark/Codegen/Passes.h"
#include "spark/Dialect/KernelOps.h"
#include "spark/Dialect/SparkDialect.h"
#include "spark/Passes/Passes.h"

#include "llvm/Support/CommandLine.h"

int main(int argc, char **argv) {
  // --help shows the driver's and MLIR's options and the passes: the
  // options LLVM's libraries register at load time (code generators such
  // as --amdgpu-*) are hidden (--help-hidden lists them).
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::StringRef name = entry.first;
    if (name != "help" && name != "help-hidden" && name != "help-list" &&
        name != "help-list-hidden" && name != "version" &&
        name != "print-options" && name != "print-all-options")
      entry.second->setHiddenFlag(llvm::cl::Hidden);
  }
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  spark::registerSparkPasses();
  spark::registerSparkCodegenPasses();

  mlir::DialectRegistry registry;
  registry.insert<spark::SparkDialect, spark::kernel::KernelDialect,
                  mlir::arith::ArithDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "spark optimizer driver\n", registry));
}
