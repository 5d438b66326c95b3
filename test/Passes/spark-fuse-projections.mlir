// RUN: spark-opt %s --spark-fuse-projections | FileCheck %s

// CHECK: spark.weight @q : tensor<32x16xf32>
// CHECK-NEXT: spark.weight @q.fused : tensor<64x16xf32> {parts = [@q, @k, @v]}
spark.weight @q : tensor<32x16xf32>
spark.weight @k : tensor<16x16xf32>
spark.weight @v : tensor<16x16xf32>
spark.weight @g : tensor<4x16xf32>
spark.weight @o : tensor<16x32xf32>
spark.weight @b : tensor<16x16xbf16>

// CHECK-LABEL: func @qkv
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16xf32>
func.func @qkv(%x: tensor<?x16xf32>, %y: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  // CHECK-NEXT: %[[F:.+]] = spark.linear %[[X]] weight @q.fused : tensor<?x16xf32> -> tensor<?x64xf32>
  // CHECK-NEXT: %[[S:.+]]:3 = spark.split %[[F]] [32, 16, 16]
  %q = spark.linear %x weight @q : tensor<?x16xf32> -> tensor<?x32xf32>
  %k = spark.linear %x weight @k : tensor<?x16xf32> -> tensor<?x16xf32>
  %v = spark.linear %x weight @v : tensor<?x16xf32> -> tensor<?x16xf32>
  // A linear of another input stays.
  // CHECK-NEXT: %[[O:.+]] = spark.linear %{{.+}} weight @o
  %o = spark.linear %y weight @o : tensor<?x32xf32> -> tensor<?x16xf32>
  // CHECK-NEXT: return %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[O]]
  return %q, %k, %v, %o : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// The head-wise gate projection stays apart (full precision under quant).
// CHECK-LABEL: func @gate_kept_apart
func.func @gate_kept_apart(%x: tensor<?x16xf32>, %a: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK: spark.linear %{{.+}} weight @g
  %g = spark.linear %x weight @g : tensor<?x16xf32> -> tensor<?x4xf32>
  %q = spark.linear %x weight @q : tensor<?x16xf32> -> tensor<?x32xf32>
  %y = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  // CHECK: spark.linear %{{.+}} weight @q :
  return %q, %y : tensor<?x32xf32>, tensor<?x32xf32>
}

// Weights of different element types do not stack.
// CHECK-LABEL: func @mixed_types
func.func @mixed_types(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  // CHECK: spark.linear %{{.+}} weight @k :
  // CHECK: spark.linear %{{.+}} weight @b :
  %k = spark.linear %x weight @k : tensor<?x16xf32> -> tensor<?x16xf32>
  %b = spark.linear %x weight @b : tensor<?x16xf32> -> tensor<?x16xf32>
  return %k, %b : tensor<?x16xf32>, tensor<?x16xf32>
}
