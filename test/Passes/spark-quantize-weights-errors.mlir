// RUN: not spark-opt %s --spark-quantize-weights=scheme=w2a16 2>&1 | FileCheck %s
// CHECK: spark-quantize-weights: unknown scheme 'w2a16'; expected w8a16, w8a8, w4a16 or w4a8
func.func @f() {
  return
}
