// RUN: spark-opt %s --spark-plan-memory --verify-diagnostics --split-input-file
// RUN: not spark-opt %s --spark-plan-memory=max-chunk=0 --split-input-file 2>&1 | FileCheck %s --check-prefix=CHUNK
// CHUNK: spark-plan-memory: max-chunk and row-multiple must be positive, got 0 and 8

func.func @not_token_rows(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{spark-plan-memory: expected a [tokens, features] result to place in the arena}}
  %a = spark.add %x, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %a : tensor<16xf32>
}
