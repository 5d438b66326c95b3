//===- LowerToKernels.cpp - spark-lower-to-kernels
//-------------------------===//
//
// The planner (ModelPlan.cpp) as a pass: the module after the pass pipeline
// becomes its kernel plan (PlanIR.cpp), with no checkpoint.
//
//===----------------------------------------------------------------------===//
#include "spark/Codegen/Passes.h"
#include "spark/Codegen/PlanIR.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/STLExtras.h"

namespace spark {
#define GEN_PASS_DEF_SPARKLOWERTOKERNELS
#include "spark/Codegen/Passes.h.inc"
} // namespace spark

using namespace mlir;

namespace spark {
namespace {

struct LowerToKernels : public impl::SparkLowerToKernelsBase<LowerToKernels> {
  using SparkLowerToKernelsBase::SparkLowerToKernelsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&]() {
      signalPassFailure();
      return module.emitError() << "spark-lower-to-kernels: ";
    };
    BuildOptions options;
    std::optional<TargetKind> kind = symbolizeTargetKind(target);
    if (!kind || *kind == TargetKind::S25) {
      fail() << "target '" << target
             << "' is not one target; expected host, spr, arm64 or hexagon";
      return;
    }
    options.target = *kind;
    std::optional<AmxKernel> amx = symbolizeAmxKernel(amxKernel);
    if (!amx) {
      fail() << "amx-kernel '" << amxKernel << "'; expected tiles or halide";
      return;
    }
    options.amxKernel = *amx;
    if (weightType == "f32" || weightType == "bf16" || weightType == "f16") {
      options.dtype = weightType == "f32"    ? DType::F32
                      : weightType == "bf16" ? DType::BF16
                                             : DType::F16;
    } else {
      fail() << "weight-type '" << weightType << "'; expected f32, bf16 or f16";
      return;
    }
    // Unless given, the context spark-kv-layout laid the caches out for.
    int64_t context = maxContext;
    if (!maxContext.hasValue())
      if (auto held = module->getAttrOfType<IntegerAttr>("spark.max_context"))
        context = held.getInt();
    // Unless given, the chunk spark-plan-memory planned the arena for, else
    // as spark-compile: 64, at most the context.
    int64_t chunk = maxChunk;
    if (!maxChunk.hasValue()) {
      auto arena = module->getAttrOfType<DictionaryAttr>("spark.arena");
      auto rows = arena ? arena.getAs<IntegerAttr>("rows") : IntegerAttr();
      // arenaRows(chunk, m) = chunk + arenaRows(0, m)
      const int64_t extra = arenaRows(0, kPrefillRowMultiple);
      if (rows && rows.getInt() > extra)
        chunk = rows.getInt() - extra;
      else
        chunk = std::min<int64_t>(chunk, context);
    }
    if (context < 1 || chunk < 1 || chunk > context) {
      fail() << "max-chunk " << chunk << " and max-context " << context
             << ": expected 1 <= max-chunk <= max-context";
      return;
    }
    options.maxContext = context;
    options.maxChunk = chunk;
    options.probeInputs = probeInputs;

    llvm::Expected<ModelPlan> plan = planModel(module, options);
    if (!plan) {
      // Errors at an op are reported there.
      llvm::handleAllErrors(
          plan.takeError(),
          [&](const PlanError &e) {
            emitError(e.location(), e.text());
            signalPassFailure();
          },
          [&](const llvm::ErrorInfoBase &e) { fail() << e.message(); });
      return;
    }
    llvm::Expected<OwningOpRef<ModuleOp>> ir = planToIR(*plan, getContext());
    if (!ir) {
      fail() << llvm::toString(ir.takeError());
      return;
    }
    Block *body = module.getBody();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
      op.erase();
    body->getOperations().splice(body->end(),
                                 (**ir).getBody()->getOperations());
    for (NamedAttribute attr : llvm::to_vector(module->getAttrs()))
      if (attr.getName().strref().starts_with("spark."))
        module->removeAttr(attr.getName());
  }
};

} // namespace
} // namespace spark
