//===- RopeTables.cpp - declare the RoPE tables the build needs -----------===//
#include "spark/Passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace spark {
#define GEN_PASS_DEF_SPARKROPETABLES
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct RopeTables : spark::impl::SparkRopeTablesBase<RopeTables> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t rows = block;
    if (rows == 0)
      rows = int64_t(std::ceil(std::sqrt(double(maxContext))));
    if (maxContext < 1 || rows < 1) {
      module.emitError() << "spark-rope-tables: max-context and block must be "
                            "positive, got "
                         << int64_t(maxContext) << " and " << int64_t(block);
      return signalPassFailure();
    }
    OpBuilder builder(module.getBodyRegion());
    SymbolTable symbols(module);
    std::map<std::pair<double, int64_t>, RopeTableOp> tables;
    // Tables go before the first function, after the weights.
    Operation *anchor = nullptr;
    for (Operation &op : module.getBody()->getOperations())
      if (!isa<WeightOp, RopeTableOp>(op)) {
        anchor = &op;
        break;
      }
    module.walk([&](RopeOp rope) {
      if (rope.getTableAttr())
        return; // already has its table
      double theta = rope.getTheta().convertToDouble();
      int64_t rotary = rope.getRotaryDim();
      RopeTableOp &table = tables[{theta, rotary}];
      if (!table) {
        // rope_theta10000_rd256; a fractional theta keeps its digits.
        std::string thetaText =
            theta == std::floor(theta)
                ? std::to_string(int64_t(theta))
                : llvm::formatv("{0}", llvm::format("%g", theta)).str();
        std::replace(thetaText.begin(), thetaText.end(), '.', 'p');
        std::string name =
            llvm::formatv("rope_theta{0}_rd{1}", thetaText, rotary).str();
        if (anchor)
          builder.setInsertionPoint(anchor);
        else
          builder.setInsertionPointToEnd(module.getBody());
        table = RopeTableOp::create(
            builder, rope.getLoc(), builder.getStringAttr(name),
            rope.getThetaAttr(), rope.getRotaryDimAttr(),
            builder.getI64IntegerAttr(maxContext),
            builder.getI64IntegerAttr(rows));
        symbols.insert(table); // renames on a clash
      }
      rope.setTableAttr(FlatSymbolRefAttr::get(table.getSymNameAttr()));
    });
  }
};

} // namespace
