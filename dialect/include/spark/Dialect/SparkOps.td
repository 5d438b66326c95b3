//===- SparkOps.td - the spark dialect: one Spark-X2.5 decoder step -------===//
//
// Ops describe the decoder at the level the passes reason about: fused ops
// (rms_norm, geglu, attention, ...) as the importer emits them, and the
// decomposed forms (mul, mean, rsqrt, gelu, quantize/dequantize, ...) that a
// QDQ graph or another framework's exporter produces and that fusion passes
// match. Activations are f32 tensors [tokens, features]; weights are declared
// once with `spark.weight` and referenced by symbol, never inlined.
//
//===----------------------------------------------------------------------===//

#ifndef SPARK_DIALECT_SPARKOPS_TD
#define SPARK_DIALECT_SPARKOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Spark_Dialect : Dialect {
  let name = "spark";
  let cppNamespace = "::spark";
  let summary = "Ops of one Spark-X2.5 hybrid-attention decoder step";
  let description = [{
    The `spark` dialect expresses the function of the Spark-X2.5 spec
    (section 3) for any configuration. Caches are explicit SSA values:
    `spark.kv_write` returns the updated cache and `spark.attention` reads the
    cache as it was before the current chunk plus the chunk's own keys and
    values, so both a linear cache and a ring buffer are exact.
  }];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Enums and attributes
//===----------------------------------------------------------------------===//

def Spark_AttentionKind : I32EnumAttr<"AttentionKind", "attention layer kind", [
    I32EnumAttrCase<"Sliding", 0, "sliding">,
    I32EnumAttrCase<"Full", 1, "full">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}
def Spark_AttentionKindAttr
    : EnumAttr<Spark_Dialect, Spark_AttentionKind, "attention_kind">;

def Spark_CacheLayout : I32EnumAttr<"CacheLayout", "key/value cache layout", [
    I32EnumAttrCase<"Linear", 0, "linear">,
    I32EnumAttrCase<"Ring", 1, "ring">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}
def Spark_CacheLayoutAttr
    : EnumAttr<Spark_Dialect, Spark_CacheLayout, "cache_layout">;

// What a build is for, spelled as the command line spells it
// (symbolizeX / stringifyX).
def Spark_TargetKind : I32EnumAttr<"TargetKind", "--target", [
    I32EnumAttrCase<"Host", 0, "host">,
    I32EnumAttrCase<"Spr", 1, "spr">,
    I32EnumAttrCase<"Arm64", 2, "arm64">,
    I32EnumAttrCase<"Hexagon", 3, "hexagon">,
    // A bundle of an Arm64 and a Hexagon library, not one target.
    I32EnumAttrCase<"S25", 4, "s25">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}

def Spark_AmxKernel : I32EnumAttr<"AmxKernel", "--amx-kernel", [
    // The hand-written full-depth tile microkernel where its shape rules
    // allow, or Halide's lowering of the tile form.
    I32EnumAttrCase<"Tiles", 0, "tiles">,
    I32EnumAttrCase<"Halide", 1, "halide">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}

def Spark_QuantScheme : I32EnumAttr<"QuantScheme", "--quant", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"W8A16", 1, "w8a16">,
    I32EnumAttrCase<"W8A8", 2, "w8a8">,
    I32EnumAttrCase<"W4A16", 3, "w4a16">,
    I32EnumAttrCase<"W4A8", 4, "w4a8">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}

// The inputs of a quantized scheme's products: 16-bit schemes take f32,
// bf16 or f16 values; int8 schemes a scale per token or block (dynamic) or
// one calibrated scale per product (static). None: no quantized products.
def Spark_Activations : I32EnumAttr<"Activations", "--activations", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"F32", 1, "f32">,
    I32EnumAttrCase<"BF16", 2, "bf16">,
    I32EnumAttrCase<"F16", 3, "f16">,
    I32EnumAttrCase<"Dynamic", 4, "dynamic">,
    I32EnumAttrCase<"Static", 5, "static">
  ]> {
  let cppNamespace = "::spark";
  let genSpecializedAttr = 0;
}

def Spark_QuantAttr : AttrDef<Spark_Dialect, "Quant"> {
  let mnemonic = "quant";
  let summary = "how a weight is quantized";
  let description = [{
    `bits` per stored code (4, 6 or 8), `group_size` along the input
    dimension (0: one scale per output channel) and whether the grid is
    symmetric (no zero point). 6-bit codes are always asymmetric groups. Example: `#spark.quant<bits = 4, group_size = 128,
    symmetric = false>`.
  }];
  let parameters = (ins "unsigned":$bits, "int64_t":$group_size,
                        "bool":$symmetric);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Spark_LayerAttr : AttrDef<Spark_Dialect, "Layer"> {
  let mnemonic = "layer";
  let summary = "the decoder layer an op computes, as location metadata";
  let description = [{
    The importer gives each op of decoder layer N the location
    `fused<#spark.layer<N>>["model.layers.N"]`; fusion keeps it inside the
    fused ops' locations, and the planner reads the layer from it (per-layer
    profiles and probes).
  }];
  let parameters = (ins "int64_t":$index);
  let assemblyFormat = "`<` $index `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Spark_Activation : RankedTensorOf<[F32]>;
def Spark_Tokens : 1DTensorOf<[I32]>;
def Spark_Cache : TensorRankOf<[F32, F16, BF16], [3]>;
def Spark_Quantized : RankedTensorOf<[I8, UI8]>;

class Spark_Op<string mnemonic, list<Trait> traits = []>
    : Op<Spark_Dialect, mnemonic, traits>;

// An op that reads one or more `spark.weight` symbols.
class Spark_WeightUserOp<string mnemonic, list<Trait> traits = []>
    : Spark_Op<mnemonic, !listconcat(traits,
        [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>])>;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Spark_WeightOp : Spark_Op<"weight", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "declares a named weight tensor of the checkpoint";
  let description = [{
    Declares a weight by its checkpoint name, static shape and stored element
    type. `source` names the checkpoint file that holds it (relative to the
    checkpoint directory), `quant` how it is quantized once a quantization
    pass ran. `parts`, set by spark-fuse-projections, makes it the row-wise
    concatenation of other weights. The data never appears in the IR.

    ```mlir
    spark.weight @"model.norm.weight" : tensor<256xbf16> {source = "model.safetensors"}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       OptionalAttr<StrAttr>:$source,
                       OptionalAttr<Spark_QuantAttr>:$quant,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$parts);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def Spark_GetWeightOp : Spark_WeightUserOp<"get_weight"> {
  let summary = "the value of a declared weight, widened to f32";
  let description = [{
    Used by decomposed graphs that multiply by a weight as a plain value
    (e.g. the `* w` of an unfused RMSNorm). The result shape equals the
    declared shape.
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$weight attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Fused decoder ops
//===----------------------------------------------------------------------===//

def Spark_EmbedOp : Spark_WeightUserOp<"embed"> {
  let summary = "embedding lookup: h[n] = table[ids[n]]";
  let arguments = (ins Spark_Tokens:$ids, FlatSymbolRefAttr:$table);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat =
      "$ids `table` $table attr-dict `:` type($ids) `->` type($result)";
  let hasVerifier = 1;
}

def Spark_RMSNormOp : Spark_WeightUserOp<"rms_norm"> {
  let summary = "x / sqrt(mean(x^2) + eps) * weight, in fp32";
  let description = [{
    Normalizes each row of `input` over its last dimension. When a
    quantize/dequantize pair followed the decomposed norm, the fusion records
    its output quantization in `output_scale`/`output_zero_point`, so the fused
    op still produces values on the quantization grid.
  }];
  let arguments = (ins Spark_Activation:$input, FlatSymbolRefAttr:$weight,
                       F64Attr:$epsilon,
                       OptionalAttr<F64Attr>:$output_scale,
                       OptionalAttr<I64Attr>:$output_zero_point);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `weight` $weight `eps` $epsilon attr-dict `:` "
                       "type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Spark_LinearOp : Spark_WeightUserOp<"linear"> {
  let summary = "y = x * W^T with W stored [out_features, in_features]";
  let description = [{
    With `input_quant` (`#spark.quant<bits = 8, group_size = 0, symmetric =
    true>`, what `spark-quantize-weights` sets for w8a8 and w4a8), each input
    row is quantized at run time to symmetric int8 codes with its own scale
    (max |x| / 127) and the product accumulates the integer codes in int32:
    dynamic per-token activation quantization. With `group_size = B` (32,
    64, 128 or 256, dividing the input width) each token has one scale per
    block of B inputs instead, and each block's integer sum is scaled by its
    own scale. With `input_scale` as well (per token only),
    every input row uses that one scale instead (static, calibrated
    quantization: code = clamp(round(x / input_scale), -127, 127)).

    `input_range` is the calibrated range of this op's input: the clipping
    range with the least int8 error over the values the compiler's fp32
    build saw on the calibration tokens (`--calib`).
    `spark-quantize-weights{activations=static}` derives `input_scale` from
    it (input_range / 127).

    With `input_type` (bf16 or f16; the 16-bit-activation schemes w8a16 and
    w4a16), each input value is rounded to that type (to nearest, ties to
    even) before the product, which accumulates in f32.
  }];
  let arguments = (ins Spark_Activation:$input, FlatSymbolRefAttr:$weight,
                       OptionalAttr<Spark_QuantAttr>:$input_quant,
                       OptionalAttr<F32Attr>:$input_range,
                       OptionalAttr<F32Attr>:$input_scale,
                       OptionalAttr<TypeAttr>:$input_type);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `weight` $weight attr-dict `:` type($input) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def Spark_LogitsOp : Spark_WeightUserOp<"logits"> {
  let summary = "output head: logits = x * head^T";
  let description = [{
    The output head, apart from `spark.linear` because it is the largest
    matrix and may be tied to the embedding table (`head` then names the
    embedding weight). `input_quant`, `input_range`, `input_scale`,
    `input_type`: as for `spark.linear`.
  }];
  let arguments = (ins Spark_Activation:$input, FlatSymbolRefAttr:$head,
                       OptionalAttr<Spark_QuantAttr>:$input_quant,
                       OptionalAttr<F32Attr>:$input_range,
                       OptionalAttr<F32Attr>:$input_scale,
                       OptionalAttr<TypeAttr>:$input_type);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `head` $head attr-dict `:` type($input) `->` "
                       "type($result)";
  let hasVerifier = 1;
}

def Spark_SplitOp : Spark_Op<"split", [Pure]> {
  let summary = "splits the last dimension into consecutive pieces";
  let arguments = (ins Spark_Activation:$input, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<Spark_Activation>:$results);
  let assemblyFormat =
      "$input $sizes attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

def Spark_RopeTableOp : Spark_Op<"rope_table", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "declares a precomputed RoPE cos/sin table";
  let description = [{
    cos and sin of position * theta^(-2i/rotary_dim) for positions
    0 .. positions - 1, computed at compile time in double precision and
    stored in two levels: a coarse table every `block` positions and a fine
    table for offsets 0 .. block - 1, combined by the angle-addition formulas.
    That keeps a table for a long context small (for 2048 positions of 128
    pairs: 96 rows instead of 2048).

    ```mlir
    spark.rope_table @rope_theta10000_rd256 {theta = 1.0e4 : f64, rotary_dim = 256 : i64, positions = 2048 : i64, block = 64 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, F64Attr:$theta,
                       I64Attr:$rotary_dim, I64Attr:$positions,
                       I64Attr:$block);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Spark_RopeOp : Spark_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "rotary position embedding, NeoX (rotate-half) style";
  let description = [{
    Rotates the first `rotary_dim` dims of each of `num_heads` heads of
    `head_dim` by the angle position * theta^(-2i/rotary_dim); the remaining
    dims pass through. `table`, once spark-rope-tables ran, names the
    `spark.rope_table` the op reads.
  }];
  let arguments = (ins Spark_Activation:$input, Spark_Tokens:$positions,
                       I64Attr:$num_heads, I64Attr:$head_dim,
                       I64Attr:$rotary_dim, F64Attr:$theta,
                       OptionalAttr<FlatSymbolRefAttr>:$table);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` type($input) `,` "
                       "type($positions)";
  let hasVerifier = 1;
}

def Spark_KVWriteOp : Spark_Op<"kv_write", [Pure,
    AllTypesMatch<["cache", "result"]>]> {
  let summary = "writes the chunk's keys or values into a cache";
  let description = [{
    `cache` is [slots, kv_heads, head_dim]. With `linear` layout the row of
    position p goes to slot p; with `ring` layout to slot p mod slots. Returns
    the updated cache.
  }];
  let arguments = (ins Spark_Cache:$cache, Spark_Activation:$values,
                       Spark_Tokens:$positions, Spark_CacheLayoutAttr:$layout);
  let results = (outs Spark_Cache:$result);
  let assemblyFormat = "$layout $values `,` $positions `into` $cache attr-dict "
                       "`:` type($values) `,` type($positions) `->` type($cache)";
  let hasVerifier = 1;
}

def Spark_AttentionOp : Spark_Op<"attention", [Pure]> {
  let summary = "grouped-query causal attention over a cache and the chunk";
  let description = [{
    For each query row n at position positions[n] and query head j (kv head
    j div (num_heads / num_kv_heads)), attends over the cached keys of
    positions before the chunk and the chunk's own keys up to and including
    n; a `sliding` layer sees only positions p - window < m <= p. Scores are
    scaled by `scale`. The cache holds positions before positions[0]; with
    `ring` layout, slot s holds the latest position congruent to s. With a
    `gate` operand ([tokens, num_heads], spark-fuse-head-gate puts it
    there), head j of the output is scaled by sigmoid(gate[:, j]) in the
    epilogue.
  }];
  let arguments = (ins Spark_Activation:$query, Spark_Activation:$key,
                       Spark_Activation:$value, Spark_Cache:$key_cache,
                       Spark_Cache:$value_cache, Spark_Tokens:$positions,
                       Optional<Spark_Activation>:$gate,
                       Spark_AttentionKindAttr:$kind,
                       Spark_CacheLayoutAttr:$layout,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, OptionalAttr<I64Attr>:$window,
                       F64Attr:$scale);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = [{
    $kind $layout $query `,` $key `,` $value `,` $key_cache `,` $value_cache `,`
    $positions (`gate` $gate^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Spark_HeadGateOp : Spark_Op<"head_gate", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "scales each head of the attention output by sigmoid(gate)";
  let arguments = (ins Spark_Activation:$input, Spark_Activation:$gate,
                       I64Attr:$num_heads);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat =
      "$input `,` $gate attr-dict `:` type($input) `,` type($gate)";
  let hasVerifier = 1;
}

def Spark_GegluOp : Spark_Op<"geglu", [Pure,
    AllTypesMatch<["gate", "up", "result"]>]> {
  let summary = "gelu(gate) * up with the exact (erf) gelu";
  let arguments = (ins Spark_Activation:$gate, Spark_Activation:$up);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Decomposed elementwise and reduction ops
//===----------------------------------------------------------------------===//

class Spark_BroadcastBinaryOp<string mnemonic>
    : Spark_Op<mnemonic, [Pure]> {
  let arguments = (ins Spark_Activation:$lhs, Spark_Activation:$rhs);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) "
                       "`->` type($result)";
  let hasVerifier = 1;
}

def Spark_AddOp : Spark_BroadcastBinaryOp<"add"> {
  let summary = "elementwise sum with trailing-dimension broadcasting";
  let description = [{ Also the residual add of the decoder. }];
}

def Spark_MulOp : Spark_BroadcastBinaryOp<"mul"> {
  let summary = "elementwise product with trailing-dimension broadcasting";
}

class Spark_UnaryOp<string mnemonic, list<Trait> traits = []>
    : Spark_Op<mnemonic, !listconcat(traits,
        [Pure, AllTypesMatch<["input", "result"]>])> {
  let results = (outs Spark_Activation:$result);
}

def Spark_RsqrtOp : Spark_UnaryOp<"rsqrt"> {
  let summary = "elementwise 1 / sqrt(x)";
  let arguments = (ins Spark_Activation:$input);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Spark_SigmoidOp : Spark_UnaryOp<"sigmoid"> {
  let summary = "elementwise 1 / (1 + exp(-x))";
  let arguments = (ins Spark_Activation:$input);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Spark_PowOp : Spark_UnaryOp<"pow"> {
  let summary = "elementwise x ^ exponent";
  let arguments = (ins Spark_Activation:$input, F64Attr:$exponent);
  let assemblyFormat = "$input `,` $exponent attr-dict `:` type($input)";
}

def Spark_GeluOp : Spark_UnaryOp<"gelu"> {
  let summary = "gelu, exact (erf) unless `approximate` selects the tanh form";
  let arguments = (ins Spark_Activation:$input,
                       DefaultValuedAttr<BoolAttr, "false">:$approximate);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Spark_MeanOp : Spark_Op<"mean", [Pure]> {
  let summary = "mean over the last dimension, kept with size 1";
  let arguments = (ins Spark_Activation:$input);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat =
      "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Spark_ConstantOp : Spark_Op<"constant", [Pure]> {
  let summary = "a small f32 constant tensor (e.g. the epsilon of a norm)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Quantize / dequantize (QDQ)
//===----------------------------------------------------------------------===//

def Spark_QuantizeOp : Spark_Op<"quantize", [Pure]> {
  let summary = "round(x / scale) + zero_point, saturated to the storage type";
  let arguments = (ins Spark_Activation:$input, F64Attr:$scale,
                       I64Attr:$zero_point);
  let results = (outs Spark_Quantized:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Spark_DequantizeOp : Spark_Op<"dequantize", [Pure]> {
  let summary = "(q - zero_point) * scale";
  let arguments = (ins Spark_Quantized:$input, F64Attr:$scale,
                       I64Attr:$zero_point);
  let results = (outs Spark_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

#endif // SPARK_DIALECT_SPARKOPS_TD
