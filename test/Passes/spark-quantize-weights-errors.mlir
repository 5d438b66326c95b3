// RUN: not spark-opt %s --spark-quantize-weights=scheme=w4a8 2>&1 | FileCheck %s
// CHECK: spark-quantize-weights: scheme 'w4a8' is not implemented; expected w8a16 or w4a16
func.func @f() {
  return
}
