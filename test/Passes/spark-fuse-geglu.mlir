// RUN: spark-opt %s --spark-fuse-geglu | FileCheck %s
// RUN: spark-opt %s --spark-fuse-geglu=allow-tanh=true | FileCheck %s --check-prefix=TANH

// CHECK-LABEL: func @exact
// CHECK-SAME: (%[[G:.+]]: tensor<?x32xf32>, %[[U:.+]]: tensor<?x32xf32>)
func.func @exact(%g: tensor<?x32xf32>, %u: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %e = spark.gelu %g : tensor<?x32xf32>
  %y = spark.mul %e, %u : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %z = spark.mul %u, %e : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  // CHECK-NEXT: %[[Y:.+]] = spark.geglu %[[G]], %[[U]] : tensor<?x32xf32>
  // CHECK-NEXT: %[[Z:.+]] = spark.geglu %[[G]], %[[U]] : tensor<?x32xf32>
  // CHECK-NEXT: return %[[Y]], %[[Z]]
  return %y, %z : tensor<?x32xf32>, tensor<?x32xf32>
}

// The tanh form is a different function: only fused when allowed.
// CHECK-LABEL: func @tanh_form
// TANH-LABEL: func @tanh_form
func.func @tanh_form(%g: tensor<?x32xf32>, %u: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = spark.gelu %g {approximate = true} : tensor<?x32xf32>
  %y = spark.mul %e, %u : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  // CHECK-NOT: spark.geglu
  // CHECK: spark.mul
  // TANH: spark.geglu
  return %y : tensor<?x32xf32>
}

// A broadcasting multiply is not a GEGLU.
// CHECK-LABEL: func @broadcast
func.func @broadcast(%g: tensor<?x32xf32>, %u: tensor<32xf32>) -> tensor<?x32xf32> {
  %e = spark.gelu %g : tensor<?x32xf32>
  %y = spark.mul %e, %u : tensor<?x32xf32>, tensor<32xf32> -> tensor<?x32xf32>
  // CHECK-NOT: spark.geglu
  return %y : tensor<?x32xf32>
}

// A QDQ pair between the gelu and the multiply does not stop the fusion.
// CHECK-LABEL: func @under_qdq
// CHECK-SAME: (%[[G:.+]]: tensor<?x32xf32>, %[[U:.+]]: tensor<?x32xf32>)
func.func @under_qdq(%g: tensor<?x32xf32>, %u: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = spark.gelu %g : tensor<?x32xf32>
  %q = spark.quantize %e {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x32xf32> -> tensor<?x32xi8>
  %d = spark.dequantize %q {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x32xi8> -> tensor<?x32xf32>
  %y = spark.mul %d, %u : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  // CHECK-NEXT: spark.geglu %[[G]], %[[U]]
  return %y : tensor<?x32xf32>
}
