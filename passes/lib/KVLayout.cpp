//===- KVLayout.cpp - size and lay out every layer's cache ----------------===//
#include "spark/Passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace spark {
#define GEN_PASS_DEF_SPARKKVLAYOUT
#include "spark/Passes/Passes.h.inc"
} // namespace spark

using namespace mlir;
using namespace spark;

namespace {

struct CacheLayoutChoice {
  CacheLayout layout;
  int64_t slots;
  AttentionOp owner;
};

struct KVLayout : spark::impl::SparkKVLayoutBase<KVLayout> {
  using Base::Base;
  Type element; // of every cache

  void runOnOperation() override {
    if (maxContext < 1) {
      getOperation().emitError()
          << "spark-kv-layout: max-context must be positive, got "
          << int64_t(maxContext);
      return signalPassFailure();
    }
    Builder b(&getContext());
    if (cacheType == "f32")
      element = b.getF32Type();
    else if (cacheType == "bf16")
      element = b.getBF16Type();
    else if (cacheType == "f16")
      element = b.getF16Type();
    else {
      getOperation().emitError()
          << "spark-kv-layout: cache-type must be f32, bf16 or f16, got '"
          << cacheType << "'";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(layOut(func)))
        return signalPassFailure();
  }

  LogicalResult layOut(func::FuncOp func) {
    llvm::DenseMap<Value, CacheLayoutChoice> choices;
    auto walk = func.walk([&](AttentionOp attn) -> WalkResult {
      // A ring needs window - 1 slots; when the build's context is no
      // longer than that, a linear cache of max-context slots is the same.
      bool ring = attn.getKind() == AttentionKind::Sliding &&
                  int64_t(*attn.getWindow()) - 1 < maxContext;
      CacheLayoutChoice choice;
      choice.layout = ring ? CacheLayout::Ring : CacheLayout::Linear;
      choice.slots = ring ? std::max<int64_t>(1, int64_t(*attn.getWindow()) - 1)
                          : int64_t(maxContext);
      choice.owner = attn;
      for (Value cache : {attn.getKeyCache(), attn.getValueCache()}) {
        auto arg = dyn_cast<BlockArgument>(cache);
        if (!arg || arg.getOwner() != &func.getBody().front()) {
          attn.emitError() << "spark-kv-layout: the caches of spark.attention "
                              "must be arguments of its function";
          return WalkResult::interrupt();
        }
        auto [it, inserted] = choices.try_emplace(cache, choice);
        if (!inserted && (it->second.layout != choice.layout ||
                          it->second.slots != choice.slots)) {
          InFlightDiagnostic diag = attn.emitError()
                                    << "spark-kv-layout: a cache is shared by "
                                       "layers that need different layouts";
          diag.attachNote(it->second.owner.getLoc()) << "the other layer";
          return WalkResult::interrupt();
        }
      }
      attn.setLayout(choice.layout);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    for (auto &[cache, choice] : choices) {
      auto type = cast<RankedTensorType>(cache.getType());
      auto sized = RankedTensorType::get(
          {choice.slots, type.getDimSize(1), type.getDimSize(2)}, element);
      cache.setType(sized);
      // Writes into this cache take its layout; their results, its type.
      for (Operation *user : cache.getUsers())
        if (auto write = dyn_cast<KVWriteOp>(user);
            write && write.getCache() == cache) {
          write.setLayout(choice.layout);
          write.getResult().setType(sized);
        }
    }
    // The function type follows its arguments and returned values.
    Block &body = func.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    func.setFunctionType(FunctionType::get(
        func.getContext(), body.getArgumentTypes(), ret.getOperandTypes()));
    return success();
  }
};

} // namespace
