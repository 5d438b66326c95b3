// RUN: spark-opt %s --spark-kv-layout=max-context=64 --split-input-file --verify-diagnostics
// RUN: not spark-opt %s --spark-kv-layout=max-context=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=CTX
// CTX: spark-kv-layout: max-context must be positive, got 0
// RUN: not spark-opt %s --spark-kv-layout="max-context=64 cache-type=f64" --split-input-file 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: spark-kv-layout: cache-type must be f32, bf16 or f16, got 'f64'

func.func @cache_not_an_argument(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi32>,
                                 %c: tensor<64x2x8xf32>) -> tensor<?x32xf32> {
  %w = spark.kv_write linear %k, %pos into %c : tensor<?x16xf32>, tensor<?xi32> -> tensor<64x2x8xf32>
  // expected-error @+1 {{spark-kv-layout: the caches of spark.attention must be arguments of its function}}
  %a = spark.attention full linear %q, %k, %k, %w, %w, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// -----

func.func @shared_by_different_layers(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %pos: tensor<?xi32>,
                                      %c: tensor<64x2x8xf32>) -> tensor<?x32xf32> {
  // expected-note @+1 {{the other layer}}
  %a = spark.attention full linear %q, %k, %k, %c, %c, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // expected-error @+1 {{spark-kv-layout: a cache is shared by layers that need different layouts}}
  %b = spark.attention sliding linear %q, %k, %k, %c, %c, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %b : tensor<?x32xf32>
}
