// RUN: spark-opt %s --spark-quantize-weights=scheme=w8a8 | FileCheck %s --check-prefix=W8A8
// RUN: spark-opt %s --spark-quantize-weights=scheme=w4a8 | FileCheck %s --check-prefix=W4A8
// RUN: spark-opt %s --spark-quantize-weights=scheme=w8a16 | FileCheck %s --check-prefix=W8A16

// Int8-activation schemes: every product with a quantized weight (the tied
// head included) reads its input quantized per token; the gate projection
// keeps full-precision weights and inputs. w4a8 codes are symmetric.
// W8A8: spark.weight @E : tensor<64x256xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W8A8-NEXT: spark.weight @q : tensor<32x256xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W8A8-NEXT: spark.weight @narrow : tensor<32x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W8A8-NEXT: spark.weight @g : tensor<4x256xbf16>
// W4A8: spark.weight @E : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = true>}
// W4A8-NEXT: spark.weight @q : tensor<32x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = true>}
// W4A8-NEXT: spark.weight @narrow : tensor<32x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W4A8-NEXT: spark.weight @g : tensor<4x256xbf16>
spark.weight @E : tensor<64x256xbf16>
spark.weight @q : tensor<32x256xbf16>
spark.weight @narrow : tensor<32x16xbf16>
spark.weight @g : tensor<4x256xbf16>

// W8A8-LABEL: func @step
// W8A8: spark.linear %{{.+}} weight @q {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W8A8: spark.linear %{{.+}} weight @narrow {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W8A8: spark.linear %{{.+}} weight @g :
// W8A8: spark.logits %{{.+}} head @E {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W4A8-LABEL: func @step
// W4A8: spark.linear %{{.+}} weight @q {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W4A8: spark.linear %{{.+}} weight @narrow {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// W4A8: spark.linear %{{.+}} weight @g :
// W4A8: spark.logits %{{.+}} head @E {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// 16-bit activation schemes leave the inputs alone.
// W8A16-NOT: input_quant
func.func @step(%ids: tensor<?xi32>, %a: tensor<?x32xf32>, %y: tensor<?x16xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %x = spark.embed %ids table @E : tensor<?xi32> -> tensor<?x256xf32>
  %q = spark.linear %x weight @q : tensor<?x256xf32> -> tensor<?x32xf32>
  %n = spark.linear %y weight @narrow : tensor<?x16xf32> -> tensor<?x32xf32>
  %g = spark.linear %x weight @g : tensor<?x256xf32> -> tensor<?x4xf32>
  %o = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  %l = spark.logits %x head @E : tensor<?x256xf32> -> tensor<?x64xf32>
  return %l, %q, %n, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}
