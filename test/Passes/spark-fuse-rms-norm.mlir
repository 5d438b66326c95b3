// RUN: spark-opt %s --spark-fuse-rms-norm --split-input-file | FileCheck %s

spark.weight @w : tensor<16xf32>

// CHECK-LABEL: func @plain
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @plain(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %sq = spark.mul %x, %x : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %m, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  %n = spark.mul %x, %r : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %n, %w : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  // CHECK-NEXT: %[[Y:.+]] = spark.rms_norm %[[X]] weight @w eps 9.9999999747524271E-7 : tensor<?x16xf32> -> tensor<?x16xf32>
  // CHECK-NEXT: return %[[Y]]
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: func @pow_and_commuted_operands
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @pow_and_commuted_operands(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %sq = spark.pow %x, 2.0 : tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-5> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %eps, %m : tensor<1xf32>, tensor<?x1xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  %n = spark.mul %r, %x : tensor<?x1xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %w, %n : tensor<16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  // CHECK-NEXT: %[[Y:.+]] = spark.rms_norm %[[X]] weight @w eps 9.9999997473787516E-6
  // CHECK-NEXT: return %[[Y]]
  return %y : tensor<?x16xf32>
}

// A QDQ-quantized graph, as an NPU toolchain's exporter writes it: every
// activation and the weight go through quantize/dequantize. The fusion looks
// through the inner pairs; the input pair stays; the output pair folds in.
// CHECK-LABEL: func @under_qdq
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @under_qdq(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // CHECK-NEXT: %[[XQ:.+]] = spark.quantize %[[X]]
  // CHECK-NEXT: %[[XD:.+]] = spark.dequantize %[[XQ]]
  %xq = spark.quantize %x {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %xd = spark.dequantize %xq {scale = 0.05 : f64, zero_point = 0 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  %sq = spark.mul %xd, %xd : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %sqq = spark.quantize %sq {scale = 0.02 : f64, zero_point = -128 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %sqd = spark.dequantize %sqq {scale = 0.02 : f64, zero_point = -128 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  %m = spark.mean %sqd : tensor<?x16xf32> -> tensor<?x1xf32>
  %mq = spark.quantize %m {scale = 0.01 : f64, zero_point = -128 : i64} : tensor<?x1xf32> -> tensor<?x1xi8>
  %md = spark.dequantize %mq {scale = 0.01 : f64, zero_point = -128 : i64} : tensor<?x1xi8> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %md, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %meq = spark.quantize %me {scale = 0.01 : f64, zero_point = -128 : i64} : tensor<?x1xf32> -> tensor<?x1xi8>
  %med = spark.dequantize %meq {scale = 0.01 : f64, zero_point = -128 : i64} : tensor<?x1xi8> -> tensor<?x1xf32>
  %r = spark.rsqrt %med : tensor<?x1xf32>
  %rq = spark.quantize %r {scale = 0.1 : f64, zero_point = -128 : i64} : tensor<?x1xf32> -> tensor<?x1xi8>
  %rd = spark.dequantize %rq {scale = 0.1 : f64, zero_point = -128 : i64} : tensor<?x1xi8> -> tensor<?x1xf32>
  %n = spark.mul %xd, %rd : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %nq = spark.quantize %n {scale = 0.03 : f64, zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %nd = spark.dequantize %nq {scale = 0.03 : f64, zero_point = 0 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %wq = spark.quantize %w {scale = 0.01 : f64, zero_point = 0 : i64} : tensor<16xf32> -> tensor<16xi8>
  %wd = spark.dequantize %wq {scale = 0.01 : f64, zero_point = 0 : i64} : tensor<16xi8> -> tensor<16xf32>
  %y = spark.mul %nd, %wd : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %yq = spark.quantize %y {scale = 0.04 : f64, zero_point = 3 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %yd = spark.dequantize %yq {scale = 0.04 : f64, zero_point = 3 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  // CHECK-NEXT: %[[Y:.+]] = spark.rms_norm %[[XD]] weight @w eps 9.9999999747524271E-7 {output_scale = 4.000000e-02 : f64, output_zero_point = 3 : i64}
  // CHECK-NEXT: return %[[Y]]
  return %yd : tensor<?x16xf32>
}

// Epsilon added after the rsqrt: a different function, not fused.
// CHECK-LABEL: func @epsilon_elsewhere
func.func @epsilon_elsewhere(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %sq = spark.mul %x, %x : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %m : tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %re = spark.add %r, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %n = spark.mul %x, %re : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %n, %w : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  // CHECK-NOT: spark.rms_norm
  // CHECK: spark.rsqrt
  return %y : tensor<?x16xf32>
}

// The mean is over another tensor's square: not a norm of x.
// CHECK-LABEL: func @square_of_another_value
func.func @square_of_another_value(%x: tensor<?x16xf32>, %z: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %sq = spark.mul %z, %z : tensor<?x16xf32>, tensor<?x16xf32> -> tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %m, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  %n = spark.mul %x, %r : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %n, %w : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  // CHECK-NOT: spark.rms_norm
  return %y : tensor<?x16xf32>
}

// x^3 is not a square.
// CHECK-LABEL: func @cube
func.func @cube(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %sq = spark.pow %x, 3.0 : tensor<?x16xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  %me = spark.add %m, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  %n = spark.mul %x, %r : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %w = spark.get_weight @w : tensor<16xf32>
  %y = spark.mul %n, %w : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  // CHECK-NOT: spark.rms_norm
  return %y : tensor<?x16xf32>
}
