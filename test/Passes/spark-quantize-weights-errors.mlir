// RUN: not spark-opt %s --spark-quantize-weights=scheme=w2a16 2>&1 | FileCheck %s
// CHECK: spark-quantize-weights: unknown scheme 'w2a16'; expected w8a16, w8a8, w4a16 or w4a8
func.func @f() {
  return
}

// RUN: not spark-opt %s --split-input-file --spark-quantize-weights="scheme=w8a8 activations=static" 2>&1 | FileCheck %s --check-prefix=NORANGE
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w8a16 activations=static" 2>&1 | FileCheck %s --check-prefix=A16
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w8a8 activations=fixed" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// NORANGE: error: 'spark.linear' op reading @w has no calibrated input_range; static int8 activations need the ranges of a calibration run (spark-compile --calib FILE)
// A16: spark-quantize-weights: activations 'static' does not apply to w8a16; expected f32, bf16 or f16
// UNKNOWN: spark-quantize-weights: activations 'fixed' does not apply to w8a8; expected dynamic or static
spark.weight @w : tensor<32x256xbf16>
func.func @g(%x: tensor<?x256xf32>) -> tensor<?x32xf32> {
  %y = spark.linear %x weight @w : tensor<?x256xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
