//===- KernelOps.td - the spark_kernel dialect: a step as kernel calls ----===//
//
// What the compiler's back half works from: the distinct kernels of a model
// (each a symbol with a typed spec), the weight pack's tensors, the caches,
// and one step as a sequence of kernel calls and cache writes on strided
// views of the activation arena, the pack, the caches, the token ids and the
// logits. `spark-compile --emit=plan` prints it.
//
//===----------------------------------------------------------------------===//

#ifndef SPARK_DIALECT_KERNELOPS_TD
#define SPARK_DIALECT_KERNELOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kernel_Dialect : Dialect {
  let name = "spark_kernel";
  let cppNamespace = "::spark::kernel";
  let summary = "A Spark decoder step as calls of its distinct kernels";
  let description = [{
    `spark_kernel.plan` holds the kernels (`spark_kernel.kernel`, one per
    distinct spec: two calls share a kernel exactly when their specs are the
    same attribute), the pack tensors (`spark_kernel.tensor`), the caches
    (`spark_kernel.cache`) and the step (`spark_kernel.step`). Buffers are
    memrefs whose strided layout is the view a kernel is handed: the token
    dimension, outermost, is dynamic (the rows of a call); arena views carry
    their offset in floats, checked against the plan's arena.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kernel_Kind : I32EnumAttr<"Kind", "kernel kind", [
    I32EnumAttrCase<"Embed", 0, "embed">,
    I32EnumAttrCase<"RMSNorm", 1, "rms_norm">,
    I32EnumAttrCase<"Linear", 2, "linear">,
    I32EnumAttrCase<"Rope", 3, "rope">,
    I32EnumAttrCase<"Attention", 4, "attention">,
    I32EnumAttrCase<"HeadGate", 5, "head_gate">,
    I32EnumAttrCase<"Geglu", 6, "geglu">,
    I32EnumAttrCase<"Binary", 7, "binary">,
    I32EnumAttrCase<"Unary", 8, "unary">,
    I32EnumAttrCase<"Mean", 9, "mean">
  ]> {
  let cppNamespace = "::spark::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_Phase : I32EnumAttr<"Phase", "the rows a kernel is scheduled for", [
    I32EnumAttrCase<"Any", 0, "any">,
    I32EnumAttrCase<"Decode", 1, "decode">,
    I32EnumAttrCase<"Prefill", 2, "prefill">
  ]> {
  let cppNamespace = "::spark::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_Elementwise : I32EnumAttr<"Elementwise", "elementwise operation", [
    I32EnumAttrCase<"Add", 0, "add">,
    I32EnumAttrCase<"Mul", 1, "mul">,
    I32EnumAttrCase<"Rsqrt", 2, "rsqrt">,
    I32EnumAttrCase<"Sigmoid", 3, "sigmoid">,
    I32EnumAttrCase<"Gelu", 4, "gelu">,
    I32EnumAttrCase<"GeluTanh", 5, "gelu_tanh">,
    I32EnumAttrCase<"Pow", 6, "pow">
  ]> {
  let cppNamespace = "::spark::kernel";
  let genSpecializedAttr = 0;
}

def Kernel_Buffer : I32EnumAttr<"Buffer", "the buffer a view is of", [
    I32EnumAttrCase<"Arena", 0, "arena">,
    I32EnumAttrCase<"Weight", 1, "weight">,
    I32EnumAttrCase<"Cache", 2, "cache">,
    I32EnumAttrCase<"Tokens", 3, "tokens">,
    I32EnumAttrCase<"Logits", 4, "logits">
  ]> {
  let cppNamespace = "::spark::kernel";
}

//===----------------------------------------------------------------------===//
// The kernel spec
//===----------------------------------------------------------------------===//

class Kernel_Int<string desc> : DefaultValuedParameter<"int64_t", "0", desc>;
class Kernel_Flag<string value, string desc>
    : DefaultValuedParameter<"bool", value, desc>;
class Kernel_Float<string desc> : OptionalParameter<"::mlir::FloatAttr", desc>;
class Kernel_ElementType<string desc>
    : DefaultValuedParameter<"::mlir::Type",
                             "::mlir::Float32Type::get($_ctxt)", desc>;

def Kernel_SpecAttr : AttrDef<Kernel_Dialect, "Spec"> {
  let mnemonic = "spec";
  let summary = "what one kernel computes: kind, static shapes, types, phase";
  let description = [{
    Every field a kernel's code depends on; fields at their default are not
    printed. Example: `#spark_kernel.spec<kind = linear, phase = decode,
    weight_type = ui4, in = 2048, out = 3072, group = 128, input_type =
    bf16>`. `weight_type` is the table, weight or cache element type (`ui4`:
    4-bit codes stored two a byte with a scale, and unless `symmetric` a
    zero point, per `group` inputs; `row_bytes`: each stored row holds its
    codes, then its scales and zero points, in that many bytes, and the
    scales and zeros operands are strided views of those rows);
    `input_bits = 8`: inputs quantized to
    int8 per token, or per `input_block` inputs; `input_type`: inputs
    rounded to bf16 / f16.
  }];
  let parameters = (ins EnumParameter<Kernel_Kind>:$kind,
      DefaultValuedParameter<"::spark::kernel::Phase",
                             "::spark::kernel::Phase::Any",
                             "decode, prefill or any">:$phase,
      Kernel_ElementType<"table / weight / cache elements">:$weight_type,
      Kernel_Int<"Linear: K; Embed: d; others: width">:$in,
      Kernel_Int<"Linear: N; Embed: V; Rope: table positions">:$out,
      Kernel_Float<"RMSNorm epsilon">:$epsilon,
      Kernel_Float<"Attention score scale">:$scale,
      Kernel_Float<"RoPE base">:$theta,
      Kernel_Int<"query heads">:$heads,
      Kernel_Int<"key/value heads">:$kv_heads,
      Kernel_Int<"head width">:$head_dim,
      Kernel_Int<"rotated dims per head">:$rotary_dim,
      Kernel_Int<"Attention: sliding window (0: full)">:$window,
      Kernel_Int<"Attention: cache slots">:$slots,
      Kernel_Int<"Rope: positions per coarse table row">:$block,
      Kernel_Int<"4-bit: inputs per scale">:$group,
      Kernel_Flag<"false", "4-bit: no zero points">:$symmetric,
      Kernel_Int<"4-bit: bytes per grouped row (0: dense codes)">:$row_bytes,
      Kernel_Int<"8: int8 inputs">:$input_bits,
      Kernel_Int<"int8 inputs: one scale per this many (0: per token)">:$input_block,
      Kernel_ElementType<"Linear: inputs rounded to this type">:$input_type,
      Kernel_Flag<"false", "Attention: ring cache">:$ring,
      Kernel_Flag<"false", "Attention: sigmoid head gate">:$gated,
      DefaultValuedParameter<"::spark::kernel::Elementwise",
                             "::spark::kernel::Elementwise::Add",
                             "Binary / Unary operation">:$op,
      Kernel_Float<"Pow: the exponent">:$parameter,
      Kernel_Int<"Binary: lhs width">:$lhs_width,
      Kernel_Int<"Binary: rhs width">:$rhs_width,
      Kernel_Flag<"true", "Binary: lhs has a row per token">:$lhs_rows,
      Kernel_Flag<"true", "Binary: rhs has a row per token">:$rhs_rows);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

def Kernel_PlanOp : Kernel_Op<"plan", [SymbolTable, NoTerminator,
                                       SingleBlock, IsolatedFromAbove,
                                       NoRegionArguments]> {
  let summary = "a model's kernels, pack tensors, caches and step";
  let description = [{
    `arena_floats`: the activation arena's size; `max_chunk`: the most
    tokens one step evaluates; `max_rows`: the most rows a call runs (the
    chunk rounded up to the matrix kernels' row multiple); every arena view
    fits the arena at that many rows. `max_context`: the positions a
    session holds.
  }];
  let arguments = (ins I64Attr:$arena_floats, I64Attr:$max_chunk,
                       I64Attr:$max_rows, I64Attr:$max_context);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Kernel_KernelOp : Kernel_Op<"kernel", [Symbol,
                                           HasParent<"::spark::kernel::PlanOp">]> {
  let summary = "one distinct kernel";
  let arguments = (ins SymbolNameAttr:$sym_name, Kernel_SpecAttr:$spec);
  let assemblyFormat = "$sym_name $spec attr-dict";
}

def Kernel_TensorOp : Kernel_Op<"tensor", [Symbol,
                                           HasParent<"::spark::kernel::PlanOp">]> {
  let summary = "a tensor of the weight pack, as stored";
  let description = [{
    `layout`: the pack's spark_layout code; 4-bit codes are stored as `ui8`
    bytes, two codes each, and `group` gives their group size; `symmetric`
    4-bit codes have the zero point 8, and no zero points are stored.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       DefaultValuedAttr<I64Attr, "0">:$layout,
                       DefaultValuedAttr<I64Attr, "0">:$group,
                       UnitAttr:$symmetric);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Kernel_CacheOp : Kernel_Op<"cache", [Symbol,
                                         HasParent<"::spark::kernel::PlanOp">]> {
  let summary = "a key or value cache: [slots, kv_heads, head_dim]";
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeMemRef>:$type,
                       I64Attr:$layer, UnitAttr:$values, UnitAttr:$ring);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Kernel_StepOp : Kernel_Op<"step", [HasParent<"::spark::kernel::PlanOp">,
    NoTerminator, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "one prefill or decode step";
  let description = [{
    The argument is the position of the step's first row (i32); scalar
    arguments of calls are arith ops on it and constants.

    ```mlir
    spark_kernel.step(%pos0: i32) {
      ...
    }
    ```
  }];
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
}

def Kernel_ViewOp : Kernel_Op<"view", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a strided view of a buffer, as a kernel is handed it";
  let description = [{
    `arena` and `logits` views carry their offset (floats) in the memref's
    layout; `weight` and `cache` views name the tensor or cache. A dynamic
    outermost dimension is the call's rows.

    ```mlir
    %0 = spark_kernel.view arena : memref<?x256xf32, strided<[256, 1], offset: 1024>>
    %1 = spark_kernel.view weight @"model.norm.weight" : memref<256xf32>
    ```
  }];
  let arguments = (ins Kernel_Buffer:$base,
                       OptionalAttr<FlatSymbolRefAttr>:$source);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = "$base ($source^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kernel_CallOp : Kernel_Op<"call", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a kernel call: inputs, scalar parameters, output last";
  let description = [{
    `decode` names the kernel a matrix product runs when the step has one
    row; `kernel` runs otherwise. `layer`: the decoder layer the call was
    imported for; `head_rows`: it runs on the rows whose logits are wanted;
    `probe_layer`: its output is that layer's output; `probe_input`: the
    probe id of its input (calibration builds).
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel,
                       OptionalAttr<FlatSymbolRefAttr>:$decode,
                       Variadic<AnyType>:$operands,
                       OptionalAttr<I64Attr>:$layer, UnitAttr:$head_rows,
                       OptionalAttr<I64Attr>:$probe_layer,
                       OptionalAttr<I64Attr>:$probe_input);
  let assemblyFormat = "$kernel (`decode` $decode^)? `(` $operands `)` "
                       "attr-dict `:` type($operands)";
}

def Kernel_CacheWriteOp : Kernel_Op<"cache_write", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "copy each row of `source` into its slot of `cache`";
  let arguments = (ins AnyMemRef:$source, FlatSymbolRefAttr:$cache);
  let assemblyFormat = "$source `to` $cache attr-dict `:` type($source)";
}

#endif // SPARK_DIALECT_KERNELOPS_TD
