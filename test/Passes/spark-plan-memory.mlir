// RUN: spark-opt %s --spark-plan-memory=max-chunk=64 | FileCheck %s

// Each value holds 64 + 7 rows (the default row multiple is 8): 71 x 16 x 4
// = 4544 bytes for 16 features, 71 x 48 x 4 = 13632 for the 48-wide %qkv,
// placed at 4544: 18176 in all.
// CHECK: module attributes {spark.arena = {bytes = 18176 : i64, rows = 71 : i64}}
spark.weight @E : tensor<64x16xf32>
spark.weight @W : tensor<48x16xf32>

// CHECK-LABEL: func @step
func.func @step(%x: tensor<?x16xf32>) -> (tensor<?x64xf32>, tensor<?x16xf32>) {
  // CHECK: %[[A:.+]] = spark.add {{.*}} {spark.arena_offset = 0 : i64}
  %a = spark.add %x, %x : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  // %a is still live: %b goes after it.
  // CHECK: %[[B:.+]] = spark.add %[[A]], %[[A]] {spark.arena_offset = 4544 : i64}
  %b = spark.add %a, %a : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  // %a is dead now: %c takes its place.
  // CHECK: %[[C:.+]] = spark.add %[[B]], %[[B]] {spark.arena_offset = 0 : i64}
  %c = spark.add %b, %b : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  // The logits are the step's output, not scratch.
  // CHECK: spark.logits %[[C]] head @E : tensor<?x16xf32> -> tensor<?x64xf32>
  %l = spark.logits %c head @E : tensor<?x16xf32> -> tensor<?x64xf32>
  // A split is a view of its input: reading a piece keeps the input alive.
  // CHECK: %[[QKV:.+]] = spark.linear %[[C]] weight @W {spark.arena_offset = 4544 : i64} : tensor<?x16xf32> -> tensor<?x48xf32>
  %qkv = spark.linear %c weight @W : tensor<?x16xf32> -> tensor<?x48xf32>
  // CHECK: spark.split %[[QKV]] [16, 16, 16] :
  %q, %k, %v = spark.split %qkv [16, 16, 16] : tensor<?x48xf32> -> tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
  // CHECK: spark.add {{.*}} {spark.arena_offset = 0 : i64}
  %s = spark.add %q, %v : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  return %l, %s : tensor<?x64xf32>, tensor<?x16xf32>
}
