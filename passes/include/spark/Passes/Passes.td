//===- Passes.td - passes of the spark compiler ----------------------------===//
#ifndef SPARK_PASSES_PASSES_TD
#define SPARK_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def SparkFuseRMSNorm : Pass<"spark-fuse-rms-norm", "mlir::ModuleOp"> {
  let summary = "Fuse a decomposed RMSNorm, also under quantize/dequantize pairs";
  let description = [{
    Rewrites the decomposed RMS normalization an exporter or a QDQ-quantized
    graph produces into one `spark.rms_norm`:

    ```mlir
    %sq = spark.mul %x, %x            // or spark.pow %x, 2.0
    %m  = spark.mean %sq
    %me = spark.add %m, %eps          // %eps: a one-element spark.constant
    %r  = spark.rsqrt %me
    %n  = spark.mul %x, %r
    %w  = spark.get_weight @w
    %y  = spark.mul %n, %w
    ```
    becomes `%y = spark.rms_norm %x weight @w eps <eps>`. Operands may be in
    either order, and any edge inside the pattern may pass through a
    `spark.dequantize(spark.quantize(...))` pair: the fused op computes in
    fp32, so the fusion survives quantization. When the norm's result feeds
    only a quantize/dequantize pair, that output quantization folds into the
    fused op (`output_scale`, `output_zero_point`). A norm whose epsilon is
    added anywhere but to the mean, or whose square is not x * x, is left
    alone.
  }];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkFuseGeglu : Pass<"spark-fuse-geglu", "mlir::ModuleOp"> {
  let summary = "Fuse gelu(gate) * up into spark.geglu";
  let description = [{
    `spark.mul(spark.gelu(%gate), %up)` (either operand order) becomes
    `spark.geglu %gate, %up`, which computes the exact (erf) gelu. A gelu in
    the tanh form is not fused unless `allow-tanh` is set, since the fused op
    would then compute a slightly different function.
  }];
  let options = [
    Option<"allowTanh", "allow-tanh", "bool", /*default=*/"false",
           "Also fuse the tanh-approximated gelu (changes numerics slightly)">
  ];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkFuseHeadGate : Pass<"spark-fuse-head-gate", "mlir::ModuleOp"> {
  let summary = "Fold the head-wise sigmoid gate into the attention epilogue";
  let description = [{
    `spark.head_gate(spark.attention(...), %g)` becomes one
    `spark.attention ... gate %g`: each head's output is scaled by
    sigmoid(g) as it is written, instead of in a second pass over the
    attention output. The gate's producer moves before the attention when
    its operands allow it; an attention with other users, or a gate that
    cannot move, is left alone.

    ```mlir
    %o = spark.attention sliding ring %q, %k, %v, %kc, %vc, %pos {...}
    %y = spark.head_gate %o, %g {num_heads = 8 : i64}
    // becomes
    %y = spark.attention sliding ring %q, %k, %v, %kc, %vc, %pos gate %g {...}
    ```
  }];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkFuseProjections : Pass<"spark-fuse-projections", "mlir::ModuleOp"> {
  let summary = "One matrix multiply for the projections of the same input";
  let description = [{
    `spark.linear` ops reading the same input (split q/k/v projections,
    separate gate and up projections) become one linear over a new
    `spark.weight` that stacks their weights (`parts`), followed by a
    `spark.split`: the input is read once and one kernel streams all the
    rows. The head-wise gate projection (whose result feeds a head gate) is
    kept apart: it stays in full precision under every quantization.

    ```mlir
    %q = spark.linear %x weight @q ...   %k = spark.linear %x weight @k ...
    // becomes
    spark.weight @q.fused : tensor<48x16xf32> {parts = [@q, @k, @v]}
    %qkv = spark.linear %x weight @q.fused
    %q, %k, %v = spark.split %qkv [32, 8, 8]
    ```
  }];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkQuantizeWeights : Pass<"spark-quantize-weights", "mlir::ModuleOp"> {
  let summary = "Quantize the matrix weights (w8a16, w8a8, w4a16, w4a8)";
  let description = [{
    Marks every weight a `spark.linear`, `spark.logits` or `spark.embed`
    reads as quantized: its stored type becomes integer codes and it gets a
    `#spark.quant` attribute; the codes and scales are computed when the
    weight pack is written. The output head is quantized like every other
    matrix, also when tied to the embedding (one copy serves the lookup and
    the head). The head-wise gate projection stays in full precision. Norms
    and RoPE tables are not weights of this kind and stay fp32.

    Schemes: `w8a16` int8 codes, one scale per output channel; `w4a16` 4-bit
    asymmetric codes in groups of `group-size` (default 128) along the input
    dimension; `w8a8` and `w4a8` the same weights as w8a16 and symmetric
    4-bit ((code - 8) * scale, same groups), and each `spark.linear` /
    `spark.logits` that reads a quantized weight gets `input_quant` (int8
    activations per token). A matrix whose rows are not whole groups stays
    int8.

    `recipe` overrides the scheme per weight, the way llama.cpp's mixed
    types (Q4_K_M) keep chosen tensors at more bits: each rule
    `PATTERN=PRECISION` matches weight names (after fusion, for example
    `model.embedding.weight`, `*.mlp.down_proj.weight`,
    `model.layers.0.*`) with a glob; PRECISION is `int8`, `int4`, `int4:G`,
    `int6`, `int6:G` or `none`. `int6` is 6-bit asymmetric codes in groups
    (6.25 bits per weight in groups of 128), meant for the tied head, whose
    error every token's logits carry; its products keep the scheme's
    inputs. A rule that matches no quantized weight is an error. The
    result is visible on each weight's `#spark.quant` (or its absence).

    `activations=bf16` or `f16` (w8a16, w4a16): each such op gets
    `input_type`, its inputs rounded to that 16-bit type; `f32` (the
    default for these schemes) keeps f32 inputs.

    `activation-block=B` (w8a8, w4a8, dynamic): `input_quant` gets
    `group_size = B`: one scale per token and block of B inputs, as
    llama.cpp's Q8_0 blocks feed its dot products (a product whose inputs
    are not whole blocks keeps one scale per token).

    `activations=static` (w8a8, w4a8): each such op also gets `input_scale`
    = `input_range` / 127, one calibrated scale for all its input rows. The
    ranges come from calibration (`spark-compile --calib`); an op without
    `input_range` is an error, never a guessed range.

    ```mlir
    spark.weight @w : tensor<64x16xbf16>
    // becomes
    spark.weight @w : tensor<64x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
    ```
  }];
  let options = [
    Option<"scheme", "scheme", "std::string", /*default=*/"\"w8a16\"",
           "Quantization scheme: w8a16, w8a8, w4a16 or w4a8">,
    ListOption<"recipe", "recipe", "std::string",
               "Precision overrides, PATTERN=PRECISION: weights whose name "
               "matches the glob PATTERN get int8, int4 (the scheme's 4-bit "
               "groups), int4:G (groups of G), int6, int6:G (6-bit "
               "asymmetric groups) or none (the build's dtype); "
               "the last matching rule wins">,
    Option<"activationBlock", "activation-block", "int64_t", /*default=*/"0",
           "Dynamic int8 activations: one scale per token and block of this "
           "many inputs (32, 64, 128 or 256; 0: one per token)">,
    Option<"groupSize", "group-size", "int64_t",
           /*default=*/"::spark::kDefaultGroupSize",
           "4-bit schemes: weights per group along the input dimension "
           "(32, 64, 128 or 256)">,
    Option<"activations", "activations", "std::string", /*default=*/"\"\"",
           "int8 input scales (w8a8, w4a8): dynamic (per token, at run "
           "time) or static (from each op's calibrated input_range); "
           "16-bit schemes (w8a16, w4a16): f32, bf16 or f16 inputs">
  ];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkKVLayout : Pass<"spark-kv-layout", "mlir::ModuleOp"> {
  let summary = "Give every layer's cache its layout and size";
  let description = [{
    Sliding-attention layers get a ring buffer of window - 1 slots (position
    p in slot p mod (window - 1); the current token comes from the chunk, so
    this is exact), full-attention layers a linear cache of `max-context`
    slots (so do sliding layers whose window - 1 is not smaller than
    `max-context`: the same thing). Every cache gets the element type
    `cache-type` (f32, or bf16 / f16 for half the bytes a step reads at long
    context). The caches are the step function's arguments and results: their
    types change, and `spark.attention` / `spark.kv_write` get the layout.

    ```mlir
    // before: %kc : tensor<4096x2x8xf32>, spark.attention sliding linear ... {window = 8}
    // after:  %kc : tensor<7x2x8xf32>,    spark.attention sliding ring ...
    // cache-type=bf16:  %kc : tensor<7x2x8xbf16>
    ```
  }];
  let options = [
    Option<"maxContext", "max-context", "int64_t", /*default=*/"4096",
           "Positions a build holds: the slots of full-attention caches">,
    Option<"cacheType", "cache-type", "std::string", /*default=*/"\"f32\"",
           "Element type of every cache: f32, bf16 or f16 (keys and values "
           "are rounded to it when written; attention reads them as f32)">
  ];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkRopeTables : Pass<"spark-rope-tables", "mlir::ModuleOp"> {
  let summary = "One RoPE table per (theta, rotary dims), sized by the build";
  let description = [{
    Declares a `spark.rope_table` for every distinct (theta, rotary_dim) of
    the module's `spark.rope` ops (one per layer type in Spark-X2.5: the
    partial rotary factor is honoured through rotary_dim) with `max-context`
    positions, never `max_position_embeddings`, and points each rope at it.

    ```mlir
    %q = spark.rope %x, %pos {..., rotary_dim = 64 : i64, theta = 5.0e6 : f64}
    // becomes
    spark.rope_table @rope_theta5000000_rd64 {block = 64 : i64, positions = 2048 : i64, ...}
    %q = spark.rope %x, %pos {..., table = @rope_theta5000000_rd64}
    ```
  }];
  let options = [
    Option<"maxContext", "max-context", "int64_t", /*default=*/"4096",
           "Positions the tables cover">,
    Option<"block", "block", "int64_t", /*default=*/"0",
           "Positions per coarse-table row, which is also the fine table's "
           "rows (0: ceil(sqrt(max-context)), the smallest tables)">
  ];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkPlanMemory : Pass<"spark-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place every activation in one static arena, by liveness";
  let description = [{
    Every value of a step function that needs scratch memory (not a split,
    which is a view of its input; not a weight, constant, cache or the
    logits) gets a byte offset in one arena: values live at the same time
    never overlap, others share memory (first fit in definition order).
    Each value holds `max-chunk + row-multiple - 1` rows (kernels that work
    on multiples of `row-multiple` rows read and write past the last token)
    of its features rounded up to 16 floats.

    ```mlir
    %h = spark.add %a, %b : ...   // becomes
    %h = spark.add %a, %b {spark.arena_offset = 4352 : i64} : ...
    // and the module gets spark.arena = {bytes = ..., rows = ...}
    ```
  }];
  let options = [
    Option<"maxChunk", "max-chunk", "int64_t", /*default=*/"64",
           "Most tokens one step evaluates">,
    Option<"rowMultiple", "row-multiple", "int64_t",
           /*default=*/"::spark::kPrefillRowMultiple",
           "Row granularity of the matrix kernels (8)">
  ];
  let dependentDialects = ["spark::SparkDialect"];
}

def SparkLowerStepToEmitC : Pass<"spark-lower-step-to-emitc", "mlir::ModuleOp"> {
  let summary = "Lower the plan's step to the step function, in EmitC";
  let description = [{
    Adds `emitc.func @step` to a module holding one `spark_kernel.plan`: the
    model ABI's step function (runtime/include/spark/model_abi.h), which the
    generated driver prints with MLIR's C emitter. Per call: a guard (no call
    runs after one failed; the head's calls only when logits are wanted),
    the profile clock, the views as `spark_view()` buffers, the plan's i-th
    kernel through the driver's dispatch function `spark_kernel_<i>` with
    the ISA variant `select_variant()` chose for the CPU (its first
    argument; a matrix product's decode kernel when the
    call has one row, else its kernel on the rows rounded up to
    kPrefillRowMultiple), and the layer probes of calibration builds. Cache
    writes call `spark_cache_write()`. The helpers are the fixed C of
    targets/common/lib/driver_support.h.

    ```mlir
    spark_kernel.call @rms_norm_d16_eps600(%0, %1, %2) : ...   // becomes
    emitc.if %ok {
      %views = "emitc.variable"() ... -> !emitc.array<3x!emitc.opaque<"spark_view_t">>
      ...
      %r = emitc.call_opaque "spark_kernel_1"(%variant, %v0, %v1, %v2) : ...
    }
    ```
  }];
  let dependentDialects = ["spark::kernel::KernelDialect",
                           "mlir::emitc::EmitCDialect"];
}

#endif // SPARK_PASSES_PASSES_TD
