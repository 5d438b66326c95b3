// RUN: spark-opt %s --spark-lower-to-kernels=max-chunk=8 --split-input-file --verify-diagnostics
// Options: each error names the option and what it accepts.
// RUN: not spark-opt %s --split-input-file --spark-lower-to-kernels=target=s25 2>&1 | FileCheck %s --check-prefix=S25
// RUN: not spark-opt %s --split-input-file --spark-lower-to-kernels=amx-kernel=cubes 2>&1 | FileCheck %s --check-prefix=AMX
// RUN: not spark-opt %s --split-input-file --spark-lower-to-kernels=weight-type=i8 2>&1 | FileCheck %s --check-prefix=TYPE
// RUN: not spark-opt %s --split-input-file --spark-lower-to-kernels="max-chunk=64 max-context=32" 2>&1 | FileCheck %s --check-prefix=CHUNK
// S25: error: spark-lower-to-kernels: target 's25' is not one target; expected host, spr, arm64 or hexagon
// AMX: error: spark-lower-to-kernels: amx-kernel 'cubes'; expected tiles or halide
// TYPE: error: spark-lower-to-kernels: weight-type 'i8'; expected f32, bf16 or f16
// CHUNK: error: spark-lower-to-kernels: max-chunk 64 and max-context 32: expected 1 <= max-chunk <= max-context

// Nothing to lower.
// expected-error @below {{spark-lower-to-kernels: the module has no func.func @step}}
module {
}

// -----

// spark-plan-memory has not run.
// expected-error @below {{the module has no spark.arena (run spark-plan-memory)}}
module {
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) {
    return
  }
}

// -----

// An arena planned for fewer rows than max chunk 8 needs (8 + 7).
// expected-error @below {{the arena holds 8 rows per value; max chunk 8 needs 15}}
module attributes {spark.arena = {bytes = 0 : i64, rows = 8 : i64}} {
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) {
    return
  }
}

// -----

// The step takes a key and a value cache per layer after ids and positions.
module attributes {spark.arena = {bytes = 0 : i64, rows = 15 : i64}} {
  // expected-error @below {{@step takes (ids, positions, k/v caches...)}}
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>, %k: tensor<7x2x8xf32>) {
    return
  }
}

// -----

module attributes {spark.arena = {bytes = 3840 : i64, rows = 15 : i64}} {
  spark.weight @E : tensor<64x16xf32>
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
    %h = spark.embed %ids table @E {spark.arena_offset = 0 : i64} : tensor<?xi32> -> tensor<?x16xf32>
    // A RoPE the tables pass has not given a table.
    // expected-error @below {{spark.rope has no table (run spark-rope-tables)}}
    %r = spark.rope %h, %pos {head_dim = 8 : i64, num_heads = 2 : i64, rotary_dim = 8 : i64, spark.arena_offset = 960 : i64, theta = 1.000000e+04 : f64} : tensor<?x16xf32>, tensor<?xi32>
    %l = spark.logits %r head @E : tensor<?x16xf32> -> tensor<?x64xf32>
    return %l : tensor<?x64xf32>
  }
}

// -----

module attributes {spark.arena = {bytes = 3840 : i64, rows = 15 : i64}} {
  spark.weight @E : tensor<64x16xf32>
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
    %h = spark.embed %ids table @E {spark.arena_offset = 0 : i64} : tensor<?xi32> -> tensor<?x16xf32>
    // A QDQ pair the fusion passes did not fold.
    // expected-error @below {{the host codegen cannot lower 'spark.quantize'}}
    %q = spark.quantize %h {scale = 1.0 : f64, zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
    %l = spark.logits %h head @E : tensor<?x16xf32> -> tensor<?x64xf32>
    return %l : tensor<?x64xf32>
  }
}

// -----

// The logits must be the step's first result.
module attributes {spark.arena = {bytes = 3840 : i64, rows = 15 : i64}} {
  spark.weight @E : tensor<64x16xf32>
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x16xf32> {
    %h = spark.embed %ids table @E {spark.arena_offset = 0 : i64} : tensor<?xi32> -> tensor<?x16xf32>
    // expected-error @below {{the step function must return the logits first}}
    return %h : tensor<?x16xf32>
  }
}

// -----

// A value spark-plan-memory did not place.
// expected-error @below {{a value has no spark.arena_offset (run spark-plan-memory)}}
module attributes {spark.arena = {bytes = 3840 : i64, rows = 15 : i64}} {
  spark.weight @E : tensor<64x16xf32>
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
    %h = spark.embed %ids table @E : tensor<?xi32> -> tensor<?x16xf32>
    %l = spark.logits %h head @E : tensor<?x16xf32> -> tensor<?x64xf32>
    return %l : tensor<?x64xf32>
  }
}
