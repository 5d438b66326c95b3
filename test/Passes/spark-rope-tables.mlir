// RUN: spark-opt %s --spark-rope-tables=max-context=2048 | FileCheck %s
// RUN: spark-opt %s --spark-rope-tables="max-context=100 block=10" | FileCheck %s --check-prefix=BLOCK

// One table per (theta, rotary_dim): the two sliding ropes share one, the
// full layer's partial rotary (64 of 256 dims) gets its own. Sized by the
// build's context (block = ceil(sqrt(2048)) = 46), not by anything else.
// CHECK: spark.rope_table @rope_theta10000_rd256 {block = 46 : i64, positions = 2048 : i64, rotary_dim = 256 : i64, theta = 1.000000e+04 : f64}
// CHECK: spark.rope_table @rope_theta5000000_rd64 {block = 46 : i64, positions = 2048 : i64, rotary_dim = 64 : i64, theta = 5.000000e+06 : f64}
// CHECK-NOT: spark.rope_table @rope
// BLOCK: spark.rope_table @rope_theta10000_rd256 {block = 10 : i64, positions = 100 : i64

// CHECK-LABEL: func @step
func.func @step(%q: tensor<?x2048xf32>, %k: tensor<?x512xf32>, %pos: tensor<?xi32>) -> (tensor<?x2048xf32>, tensor<?x512xf32>, tensor<?x2048xf32>) {
  // CHECK: spark.rope %{{.+}}, %{{.+}} {{{.*}}table = @rope_theta10000_rd256{{.*}}} : tensor<?x2048xf32>
  %0 = spark.rope %q, %pos {num_heads = 8 : i64, head_dim = 256 : i64, rotary_dim = 256 : i64, theta = 1.0e4 : f64} : tensor<?x2048xf32>, tensor<?xi32>
  // CHECK: spark.rope %{{.+}}, %{{.+}} {{{.*}}table = @rope_theta10000_rd256{{.*}}} : tensor<?x512xf32>
  %1 = spark.rope %k, %pos {num_heads = 2 : i64, head_dim = 256 : i64, rotary_dim = 256 : i64, theta = 1.0e4 : f64} : tensor<?x512xf32>, tensor<?xi32>
  // CHECK: spark.rope %{{.+}}, %{{.+}} {{{.*}}table = @rope_theta5000000_rd64{{.*}}} : tensor<?x2048xf32>
  %2 = spark.rope %q, %pos {num_heads = 8 : i64, head_dim = 256 : i64, rotary_dim = 64 : i64, theta = 5.0e6 : f64} : tensor<?x2048xf32>, tensor<?xi32>
  return %0, %1, %2 : tensor<?x2048xf32>, tensor<?x512xf32>, tensor<?x2048xf32>
}

// A rope that already reads a table keeps it; no new table is declared for it.
spark.rope_table @mine {theta = 5.0e5 : f64, rotary_dim = 8 : i64, positions = 4096 : i64, block = 64 : i64}
// CHECK-LABEL: func @has_table
func.func @has_table(%x: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
  // CHECK: table = @mine
  %0 = spark.rope %x, %pos {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 5.0e5 : f64, table = @mine} : tensor<?x32xf32>, tensor<?xi32>
  return %0 : tensor<?x32xf32>
}
