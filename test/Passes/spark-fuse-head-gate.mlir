// RUN: spark-opt %s --spark-fuse-head-gate | FileCheck %s

spark.weight @g : tensor<4x16xf32>

// The gate projection comes after the attention (as the importer writes it):
// it moves up so the attention keeps its place before the cache writes.
// CHECK-LABEL: func @fused
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x16xf32>, %[[Q:[^:]+]]: tensor<?x32xf32>, %[[K:[^:]+]]: tensor<?x16xf32>, %[[C:[^:]+]]: tensor<64x2x8xf32>, %[[P:[^:]+]]: tensor<?xi32>)
func.func @fused(%x: tensor<?x16xf32>, %q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %pos: tensor<?xi32>) -> (tensor<?x32xf32>, tensor<64x2x8xf32>) {
  // CHECK-NEXT: %[[G:.+]] = spark.linear %[[X]] weight @g
  // CHECK-NEXT: %[[A:.+]] = spark.attention full linear %[[Q]], %[[K]], %[[K]], %[[C]], %[[C]], %[[P]] gate %[[G]] {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 5.000000e-01 : f64}
  // CHECK-NEXT: %[[W:.+]] = spark.kv_write linear
  // CHECK-NEXT: return %[[A]], %[[W]]
  %a = spark.attention full linear %q, %k, %k, %c, %c, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %w = spark.kv_write linear %k, %pos into %c : tensor<?x16xf32>, tensor<?xi32> -> tensor<64x2x8xf32>
  %g = spark.linear %x weight @g : tensor<?x16xf32> -> tensor<?x4xf32>
  %y = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  return %y, %w : tensor<?x32xf32>, tensor<64x2x8xf32>
}

// The ungated attention output is used elsewhere too: not fused.
// CHECK-LABEL: func @other_use
func.func @other_use(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %pos: tensor<?xi32>, %g: tensor<?x4xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %a = spark.attention full linear %q, %k, %k, %c, %c, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // CHECK: spark.head_gate
  %y = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  return %y, %a : tensor<?x32xf32>, tensor<?x32xf32>
}

// A gate over another head count (2 groups of 16) is not this attention's.
// CHECK-LABEL: func @other_heads
func.func @other_heads(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %pos: tensor<?xi32>, %g: tensor<?x2xf32>) -> tensor<?x32xf32> {
  %a = spark.attention full linear %q, %k, %k, %c, %c, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // CHECK: spark.head_gate
  %y = spark.head_gate %a, %g {num_heads = 2 : i64} : tensor<?x32xf32>, tensor<?x2xf32>
  return %y : tensor<?x32xf32>
}
