// RUN: spark-opt %s --spark-lower-to-kernels | FileCheck %s

// Kernels are shared by equal spec attributes, never by a name alone: two
// norms whose epsilons differ in the last bits of the double get two kernels
// (the second name carries the exact bits), the two norms of equal epsilon
// one.
module attributes {spark.arena = {bytes = 7680 : i64, rows = 15 : i64}} {
  spark.weight @E : tensor<64x32xf32>
  spark.weight @N : tensor<32xf32>
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
    %h = spark.embed %ids table @E {spark.arena_offset = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>
    %a = spark.rms_norm %h weight @N eps 1.0e-6 {spark.arena_offset = 1920 : i64} : tensor<?x32xf32> -> tensor<?x32xf32>
    %b = spark.rms_norm %a weight @N eps 1.0000000000001e-6 {spark.arena_offset = 3840 : i64} : tensor<?x32xf32> -> tensor<?x32xf32>
    %c = spark.rms_norm %b weight @N eps 1.0e-6 {spark.arena_offset = 5760 : i64} : tensor<?x32xf32> -> tensor<?x32xf32>
    %l = spark.logits %c head @E : tensor<?x32xf32> -> tensor<?x64xf32>
    return %l : tensor<?x64xf32>
  }
}

// CHECK: spark_kernel.kernel @[[N1:rms_norm_d32_eps600]] <kind = rms_norm, in = 32, epsilon = 9.9999999999999995E-7 : f64>
// CHECK-NEXT: spark_kernel.kernel @[[N2:rms_norm_d32_eps600_x[0-9a-f]+]] <kind = rms_norm, in = 32, epsilon = 1.0000000000000999E-6 : f64>
// CHECK-NOT: spark_kernel.kernel @rms_norm
// CHECK: spark_kernel.call @[[N1]](
// CHECK: spark_kernel.call @[[N2]](
// CHECK: spark_kernel.call @[[N1]](
