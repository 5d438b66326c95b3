//===- spark-opt.cpp - pass driver for the spark dialect (MlirOptMain) ----===//
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "spark/Dialect/SparkDialect.h"
#include "spark/Passes/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  spark::registerSparkPasses();

  mlir::DialectRegistry registry;
  registry.insert<spark::SparkDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "spark optimizer driver\n", registry));
}
