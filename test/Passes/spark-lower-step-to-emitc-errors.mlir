// RUN: spark-opt %s --spark-lower-step-to-emitc --split-input-file --verify-diagnostics

// A module whose step function name is taken.
// expected-error @below {{the module already holds a symbol @step}}
module {
  func.func private @step()
  spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
    spark_kernel.step(%pos0: i32) {
    }
  }
}

// -----

// Nothing to lower.
// expected-error @below {{needs one spark_kernel.plan in the module, found 0}}
module {
}

// -----

// A scalar the driver has no expression for.
module {
  spark_kernel.plan attributes {arena_floats = 480, max_chunk = 8, max_rows = 15, max_context = 32} {
    spark_kernel.kernel @attn <kind = attention, scale = 0.35 : f64, heads = 2, kv_heads = 1, head_dim = 8, slots = 32>
    spark_kernel.cache @k : memref<32x1x8xf32> {layer = 0}
    spark_kernel.cache @v : memref<32x1x8xf32> {layer = 0, values}
    spark_kernel.step(%pos0: i32) {
      %h = spark_kernel.view arena : memref<?x16xf32>
      %kc = spark_kernel.view cache @k : memref<32x1x8xf32>
      %vc = spark_kernel.view cache @v : memref<32x1x8xf32>
      %c1 = arith.constant 1 : i32
      %next = arith.addi %pos0, %c1 : i32
      // expected-error @below {{has a scalar operand the driver cannot compute}}
      spark_kernel.call @attn(%h, %h, %h, %kc, %vc, %pos0, %next, %h) : memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<32x1x8xf32>, memref<32x1x8xf32>, i32, i32, memref<?x16xf32>
    }
  }
}
