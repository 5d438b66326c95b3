// RUN: spark-opt %s --spark-quantize-weights=scheme=w4a16 | FileCheck %s

// w4a16: 4-bit asymmetric codes in groups of 128 along the input; a matrix
// whose rows do not split into groups of 128 keeps int8 per channel; the
// gate projection stays in full precision.
// CHECK: spark.weight @wide : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = false>}
// CHECK-NEXT: spark.weight @narrow : tensor<64x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// CHECK-NEXT: spark.weight @g : tensor<4x256xf32>
spark.weight @wide : tensor<64x256xf32>
spark.weight @narrow : tensor<64x16xf32>
spark.weight @g : tensor<4x256xf32>

func.func @step(%x: tensor<?x256xf32>, %y: tensor<?x16xf32>, %a: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>) {
  %0 = spark.linear %x weight @wide : tensor<?x256xf32> -> tensor<?x64xf32>
  %1 = spark.linear %y weight @narrow : tensor<?x16xf32> -> tensor<?x64xf32>
  %g = spark.linear %x weight @g : tensor<?x256xf32> -> tensor<?x4xf32>
  %o = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  return %0, %1, %o : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>
}
