//===- Passes.td - passes of the code generator ------------*- tablegen -*-===//
//
// The lowering from the spark dialect to the kernel plan. It lives with the
// code generator because the plan depends on the target (the 4-bit layout
// its kernels read) and on the kernels' specs.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_PASSES
#define SPARK_CODEGEN_PASSES

include "mlir/Pass/PassBase.td"

def SparkLowerToKernels : Pass<"spark-lower-to-kernels", "mlir::ModuleOp"> {
  let summary = "Lower the step function to the kernel plan (spark_kernel)";
  let description = [{
    Replaces the module's contents (the `spark.weight` and `spark.rope_table`
    symbols and `func.func @step`, after the pass pipeline: fusion,
    quantization, `spark-kv-layout`, `spark-rope-tables` and
    `spark-plan-memory`) with one `spark_kernel.plan`: the distinct kernels,
    each with its spec (calls with equal specs share one kernel), the weight
    pack's tensors as the target stores them (4-bit codes as bytes: grouped
    rows on x86, dense codes beside their scales and zero points on arm64 and
    hexagon), the caches, and one step's calls and cache writes on views of
    the arena, the pack, the caches, the token ids and the logits. The
    module's `spark.*` attributes are consumed.

    This is the lowering `spark-compile --emit=plan` prints; a library build
    then fills the pack tensors' data from the checkpoint, which this pass
    does not need.

    ```mlir
    spark.weight @w : tensor<64x16xf32>
    func.func @step(...) {
      %y = spark.linear %x weight @w {spark.arena_offset = 0 : i64} : ...
    }
    // becomes
    spark_kernel.plan attributes {arena_floats = ..., ...} {
      spark_kernel.kernel @linear_k16_n64_f32_prefill <kind = linear, phase = prefill, in = 16, out = 64>
      spark_kernel.kernel @linear_k16_n64_f32_decode <kind = linear, phase = decode, in = 16, out = 64>
      spark_kernel.tensor @w : tensor<64x16xf32>
      spark_kernel.step(%pos0: i32) {
        spark_kernel.call @linear_k16_n64_f32_prefill decode @linear_k16_n64_f32_decode(...)
      }
    }
    ```
  }];
  let dependentDialects = ["::spark::kernel::KernelDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"host\"",
           "The target the plan is for: host, spr, arm64 or hexagon "
           "(spark-compile --target; s25 is a bundle of arm64 and hexagon)">,
    Option<"amxKernel", "amx-kernel", "std::string", /*default=*/"\"tiles\"",
           "spr: tiles or halide (spark-compile --amx-kernel)">,
    Option<"weightType", "weight-type", "std::string", /*default=*/"\"f32\"",
           "Elements of the matrices that are not quantized: f32, bf16 or "
           "f16 (spark-compile --dtype)">,
    Option<"maxContext", "max-context", "int64_t", /*default=*/"4096",
           "Positions the build holds (the RoPE tables must cover them); "
           "default: the module's spark.max_context (spark-kv-layout), else "
           "4096">,
    Option<"maxChunk", "max-chunk", "int64_t", /*default=*/"64",
           "Tokens one step takes at most; default: the chunk the module's "
           "spark.arena was planned for (spark-plan-memory), else 64 or "
           "max-context if less">,
    Option<"probeInputs", "probe-inputs", "bool", /*default=*/"false",
           "Calibration builds: the layer probe also sees each matrix "
           "product's input">
  ];
}

#endif // SPARK_CODEGEN_PASSES
