// RUN: spark-opt %s --spark-quantize-weights --split-input-file | FileCheck %s
// RUN: spark-opt %s --spark-fuse-rms-norm --spark-quantize-weights --split-input-file | FileCheck %s --check-prefix=FUSED

// The tied head is quantized once (the lookup and the head share it), the
// projections too; the head-wise gate projection and the norm stay fp32.
// CHECK: spark.weight @E : tensor<64x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// CHECK-NEXT: spark.weight @n : tensor<16xf32>
// CHECK-NEXT: spark.weight @q : tensor<32x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// CHECK-NEXT: spark.weight @g : tensor<4x16xbf16>
// CHECK-NOT: spark.weight
spark.weight @E : tensor<64x16xbf16>
spark.weight @n : tensor<16xf32>
spark.weight @q : tensor<32x16xbf16>
spark.weight @g : tensor<4x16xbf16>

// CHECK-LABEL: func @step
func.func @step(%ids: tensor<?xi32>, %a: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %h = spark.embed %ids table @E : tensor<?xi32> -> tensor<?x16xf32>
  %x = spark.rms_norm %h weight @n eps 1.0e-6 : tensor<?x16xf32> -> tensor<?x16xf32>
  %q = spark.linear %x weight @q : tensor<?x16xf32> -> tensor<?x32xf32>
  %g = spark.linear %x weight @g : tensor<?x16xf32> -> tensor<?x4xf32>
  %o = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  %l = spark.logits %x head @E : tensor<?x16xf32> -> tensor<?x64xf32>
  return %l, %q, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// Quantization does not break the RMSNorm fusion: the decomposed norm of a
// QDQ graph still fuses, and its weight is not quantized.
// FUSED: spark.weight @w : tensor<16xf32>
// FUSED: spark.weight @p : tensor<8x16xi8>
spark.weight @w : tensor<16xf32>
spark.weight @p : tensor<8x16xf32>
// FUSED-LABEL: func @norm_then_linear
func.func @norm_then_linear(%x: tensor<?x16xf32>) -> tensor<?x8xf32> {
  %xq = spark.quantize %x {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %xd = spark.dequantize %xq {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  %sq = spark.mul %xd, %xd : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %m, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  %n = spark.mul %xd, %r : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %wv = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %n, %wv : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  // FUSED: %[[Y:.+]] = spark.rms_norm %{{.+}} weight @w
  // FUSED-NEXT: spark.linear %[[Y]] weight @p
  %z = spark.linear %y weight @p : tensor<?x16xf32> -> tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}
