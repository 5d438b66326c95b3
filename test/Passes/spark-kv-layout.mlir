// RUN: spark-opt %s --spark-kv-layout=max-context=64 | FileCheck %s
// RUN: spark-opt %s --spark-kv-layout="max-context=64 cache-type=bf16" | FileCheck %s --check-prefix=BF16
// RUN: spark-opt %s --spark-kv-layout="max-context=64 cache-type=f16" | FileCheck %s --check-prefix=F16

// Every cache takes the element type; the values written stay f32.
// BF16-LABEL: func @step
// BF16-SAME: tensor<7x2x8xbf16>, %{{[^:]+}}: tensor<7x2x8xbf16>, %{{[^:]+}}: tensor<64x2x8xbf16>, %{{[^:]+}}: tensor<64x2x8xbf16>)
// BF16-SAME: -> (tensor<7x2x8xbf16>, tensor<7x2x8xbf16>, tensor<64x2x8xbf16>, tensor<64x2x8xbf16>)
// BF16: spark.attention sliding ring {{.+}} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<7x2x8xbf16>, tensor<7x2x8xbf16>, tensor<?xi32>) -> tensor<?x32xf32>
// BF16: spark.kv_write ring {{.+}} : tensor<?x16xf32>, tensor<?xi32> -> tensor<7x2x8xbf16>
// BF16-LABEL: func @wide_window
// BF16-SAME: tensor<64x2x8xbf16>
// F16-LABEL: func @step
// F16-SAME: tensor<7x2x8xf16>, %{{[^:]+}}: tensor<7x2x8xf16>, %{{[^:]+}}: tensor<64x2x8xf16>, %{{[^:]+}}: tensor<64x2x8xf16>)
// F16: spark.kv_write linear {{.+}} -> tensor<64x2x8xf16>

// CHECK-LABEL: func @step
// CHECK-SAME: %[[SK:[^:]+]]: tensor<7x2x8xf32>, %[[SV:[^:]+]]: tensor<7x2x8xf32>, %[[FK:[^:]+]]: tensor<64x2x8xf32>, %[[FV:[^:]+]]: tensor<64x2x8xf32>)
// CHECK-SAME: -> (tensor<7x2x8xf32>, tensor<7x2x8xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>)
func.func @step(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi32>,
                %sk: tensor<4096x2x8xf32>, %sv: tensor<4096x2x8xf32>,
                %fk: tensor<4096x2x8xf32>, %fv: tensor<4096x2x8xf32>)
    -> (tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>) {
  // CHECK: spark.attention sliding ring %{{.+}}, %{{.+}}, %{{.+}}, %[[SK]], %[[SV]]
  %a = spark.attention sliding linear %q, %k, %k, %sk, %sv, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // CHECK: spark.kv_write ring %{{.+}}, %{{.+}} into %[[SK]] : tensor<?x16xf32>, tensor<?xi32> -> tensor<7x2x8xf32>
  %sk2 = spark.kv_write linear %k, %pos into %sk : tensor<?x16xf32>, tensor<?xi32> -> tensor<4096x2x8xf32>
  %sv2 = spark.kv_write linear %k, %pos into %sv : tensor<?x16xf32>, tensor<?xi32> -> tensor<4096x2x8xf32>
  // CHECK: spark.attention full linear %{{.+}}, %{{.+}}, %{{.+}}, %[[FK]], %[[FV]]
  %b = spark.attention full linear %q, %k, %k, %fk, %fv, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // CHECK: spark.kv_write linear %{{.+}}, %{{.+}} into %[[FK]] : tensor<?x16xf32>, tensor<?xi32> -> tensor<64x2x8xf32>
  %fk2 = spark.kv_write linear %k, %pos into %fk : tensor<?x16xf32>, tensor<?xi32> -> tensor<4096x2x8xf32>
  %fv2 = spark.kv_write linear %k, %pos into %fv : tensor<?x16xf32>, tensor<?xi32> -> tensor<4096x2x8xf32>
  return %sk2, %sv2, %fk2, %fv2 : tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>
}

// A window wider than the build's context: a linear cache of max-context
// slots holds every key the window could see.
// CHECK-LABEL: func @wide_window
// CHECK-SAME: tensor<64x2x8xf32>
func.func @wide_window(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi32>,
                       %sk: tensor<4096x2x8xf32>) -> tensor<?x32xf32> {
  // CHECK: spark.attention sliding linear
  %a = spark.attention sliding linear %q, %k, %k, %sk, %sk, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 1000 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<4096x2x8xf32>, tensor<4096x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}
