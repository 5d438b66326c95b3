// RUN: not spark-opt %s --spark-rope-tables=max-context=0 2>&1 | FileCheck %s
// CHECK: spark-rope-tables: max-context and block must be positive, got 0
func.func @f() {
  return
}
