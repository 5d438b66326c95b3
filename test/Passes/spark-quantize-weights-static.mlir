// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a8 activations=static" | FileCheck %s
// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a8 activations=static" | FileCheck %s
// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a8" | FileCheck %s --check-prefix=DYNAMIC

// Static int8 activations: each product with a quantized weight gets
// input_scale = its calibrated input_range / 127 (2.54 / 127 = 0.02,
// 12.7 / 127 = 0.1); the gate keeps fp inputs and gets no scale though it
// has a range. Dynamic builds keep the ranges and add no scale.
// CHECK-LABEL: func @step
// CHECK: spark.linear %{{.+}} weight @q {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_range = 2.540000e+00 : f32, input_scale = 2.000000e-02 : f32}
// CHECK: spark.linear %{{.+}} weight @g {input_range = 2.540000e+00 : f32} :
// CHECK: spark.logits %{{.+}} head @E {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_range = 1.270000e+01 : f32, input_scale = 1.000000e-01 : f32}
// DYNAMIC-NOT: input_scale
spark.weight @E : tensor<64x256xbf16>
spark.weight @q : tensor<32x256xbf16>
spark.weight @g : tensor<4x256xbf16>

func.func @step(%ids: tensor<?xi32>, %a: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %x = spark.embed %ids table @E : tensor<?xi32> -> tensor<?x256xf32>
  %q = spark.linear %x weight @q {input_range = 2.54 : f32} : tensor<?x256xf32> -> tensor<?x32xf32>
  %g = spark.linear %x weight @g {input_range = 2.54 : f32} : tensor<?x256xf32> -> tensor<?x4xf32>
  %o = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  %l = spark.logits %x head @E {input_range = 12.7 : f32} : tensor<?x256xf32> -> tensor<?x64xf32>
  return %l, %q, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}
