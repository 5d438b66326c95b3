// RUN: spark-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of the spark_kernel dialect.

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: `out` must be positive, got 0}}
  spark_kernel.kernel @k <kind = linear, in = 16>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{rms_norm kernel: only linear kernels have a phase}}
  spark_kernel.kernel @k <kind = rms_norm, phase = decode, in = 16, epsilon = 1.0e-6 : f64>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: ui4 or ui6 weights and a group size come together (weight_type 'ui4', group 0)}}
  spark_kernel.kernel @k <kind = linear, weight_type = ui4, in = 256, out = 16>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: ui6 weights are asymmetric, dense groups (no `symmetric`, no row_bytes)}}
  spark_kernel.kernel @k <kind = linear, weight_type = ui6, in = 256, out = 16, group = 128, symmetric = true>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: group 128 does not divide the input width 192}}
  spark_kernel.kernel @k <kind = linear, weight_type = ui4, in = 192, out = 16, group = 128>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: input_block 48 needs int8 inputs and must divide 256}}
  spark_kernel.kernel @k <kind = linear, weight_type = i8, in = 256, out = 16, input_bits = 8, input_block = 48>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{weight_type must be f32, bf16, f16, i8, ui4 or ui6, got 'i32'}}
  spark_kernel.kernel @k <kind = embed, weight_type = i32, in = 16, out = 64>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{attention kernel: kv_heads 3 must divide heads 4}}
  spark_kernel.kernel @k <kind = attention, scale = 0.35 : f64, heads = 4, kv_heads = 3, head_dim = 8, slots = 32>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{attention kernel: cache elements must be f32, bf16 or f16, got 'i8'}}
  spark_kernel.kernel @k <kind = attention, weight_type = i8, scale = 0.35 : f64, heads = 4, kv_heads = 2, head_dim = 8, slots = 32>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{rope kernel: rotary_dim 12 must be even and at most head_dim 8}}
  spark_kernel.kernel @k <kind = rope, out = 32, heads = 4, head_dim = 8, rotary_dim = 12, block = 6>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{unary kernel: an exponent `parameter` is given exactly for pow}}
  spark_kernel.kernel @k <kind = unary, in = 16, op = pow>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{binary kernel: op must be add or mul, got rsqrt}}
  spark_kernel.kernel @k <kind = binary, in = 16, lhs_width = 16, rhs_width = 16, op = rsqrt>
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.kernel @a <kind = geglu, in = 32>
  // expected-error @+1 {{has the same spec as @a: a plan holds each distinct kernel once}}
  spark_kernel.kernel @b <kind = geglu, in = 32>
  spark_kernel.step(%pos0: i32) {}
}

// -----

// expected-error @+1 {{must hold one spark_kernel.step, holds 0}}
spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
}

// -----

// A chunk longer than the rows every arena value holds.
// expected-error @+1 {{needs 1 <= max_chunk <= max_rows, max_chunk <= max_context and arena_floats >= 0}}
spark_kernel.plan attributes {arena_floats = 0, max_chunk = 16, max_rows = 8, max_context = 32} {
  spark_kernel.step(%pos0: i32) {}
}

// -----

// No token per step.
// expected-error @+1 {{needs 1 <= max_chunk <= max_rows, max_chunk <= max_context and arena_floats >= 0}}
spark_kernel.plan attributes {arena_floats = 0, max_chunk = 0, max_rows = 8, max_context = 32} {
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{takes one argument, the first row's position (i32)}}
  spark_kernel.step(%pos0: i64) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{must be a [slots, kv_heads, head_dim] memref of f32, bf16 or f16, got 'memref<7x16xf32>'}}
  spark_kernel.cache @k : memref<7x16xf32> {layer = 0}
  spark_kernel.step(%pos0: i32) {}
}

// -----

// 16 floats x 8 rows from offset 64 need 192 floats.
spark_kernel.plan attributes {arena_floats = 160, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{reaches past the arena of 160 floats at 8 rows}}
    %0 = spark_kernel.view arena : memref<?x16xf32, strided<[16, 1], offset: 64>>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{weight views name their tensor or cache}}
    %0 = spark_kernel.view weight : memref<16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{arena views do not name their tensor or cache}}
    %0 = spark_kernel.view arena @w : memref<16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{token ids are i32, got 'memref<?xi64>'}}
    %0 = spark_kernel.view tokens : memref<?xi64>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.cache @c : memref<4x1x8xf32> {layer = 0}
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{views of caches start at their first element, got offset 4}}
    %0 = spark_kernel.view cache @c : memref<8xf32, strided<[1], offset: 4>>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    // A view inside a tensor fits up to its last element: 12 + 8 > 16.
    %ok = spark_kernel.view weight @w : memref<8xf32, strided<[1], offset: 8>>
    // expected-error @+1 {{does not fit @w (16 elements of 'f32')}}
    %0 = spark_kernel.view weight @w : memref<8xf32, strided<[1], offset: 12>>
  }
}

// -----

// Only grouped rows (layout 2) are read as another type: their f16 scales.
spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<4x64xui8> {group = 32}
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{does not fit @w (256 elements of 'ui8')}}
    %0 = spark_kernel.view weight @w : memref<4x2xf16, strided<[32, 1], offset: 16>>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<4x64xui8> {group = 32, layout = 2}
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{reads @w's grouped rows as 'f32'; expected ui8 codes or f16 scales and zero points}}
    %0 = spark_kernel.view weight @w : memref<4x2xf32, strided<[16, 1], offset: 8>>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<4x64xui8> {group = 32, layout = 2}
  spark_kernel.step(%pos0: i32) {
    // The last row's scales past the tensor's 128 halves: 3 * 32 + 31 + 2.
    // expected-error @+1 {{does not fit @w (128 elements of 'f16')}}
    %0 = spark_kernel.view weight @w : memref<4x2xf16, strided<[32, 1], offset: 31>>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: row_bytes 64 must be even and hold a ui4 row's codes, scales and zero points (80)}}
  spark_kernel.kernel @k <kind = linear, weight_type = ui4, in = 128, out = 16, group = 32, row_bytes = 64>
  spark_kernel.step(%pos0: i32) {
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{linear kernel: row_bytes 72 must be even and hold a ui4 row's codes, scales and zero points (ui4 weights only)}}
  spark_kernel.kernel @k <kind = linear, weight_type = i8, in = 128, out = 16, row_bytes = 72>
  spark_kernel.step(%pos0: i32) {
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{does not fit @w (16 elements of 'f32')}}
    %0 = spark_kernel.view weight @w : memref<2x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xbf16>
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{does not fit @w (16 elements of 'bf16')}}
    %0 = spark_kernel.view weight @w : memref<16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    // expected-error @+1 {{names @w, which is not a spark_kernel.cache}}
    %0 = spark_kernel.view cache @w : memref<16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    %w = spark_kernel.view weight @w : memref<16xf32>
    // expected-error @+1 {{calls @norm, which is not a spark_kernel.kernel}}
    spark_kernel.call @norm(%x, %w, %x) : memref<?x16xf32>, memref<16xf32>, memref<?x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.kernel @norm <kind = rms_norm, in = 16, epsilon = 1.0e-6 : f64>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    // expected-error @+1 {{passes 2 operands to @norm, which takes 3}}
    spark_kernel.call @norm(%x, %x) : memref<?x16xf32>, memref<?x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.kernel @rope <kind = rope, out = 32, heads = 2, head_dim = 8, rotary_dim = 8, block = 6>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    // expected-error @+1 {{must pass the output view last}}
    spark_kernel.call @rope(%x, %x, %x, %x, %x, %x, %pos0) : memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, i32
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.kernel @p <kind = linear, phase = prefill, in = 16, out = 16>
  spark_kernel.kernel @d <kind = linear, phase = decode, in = 16, out = 16>
  spark_kernel.tensor @w : tensor<16x16xf32>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    %w = spark_kernel.view weight @w : memref<16x16xf32>
    // expected-error @+1 {{calls the prefill kernel @p without its other phase}}
    spark_kernel.call @p(%x, %w, %x) : memref<?x16xf32>, memref<16x16xf32>, memref<?x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.kernel @p <kind = linear, phase = prefill, in = 16, out = 16>
  spark_kernel.kernel @d <kind = linear, phase = decode, in = 16, out = 16>
  spark_kernel.tensor @w : tensor<16x16xf32>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    %w = spark_kernel.view weight @w : memref<16x16xf32>
    // expected-error @+1 {{pairs @d and @p: expected a prefill kernel and a decode kernel of the same signature}}
    spark_kernel.call @d decode @p(%x, %w, %x) : memref<?x16xf32>, memref<16x16xf32>, memref<?x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.cache @k : memref<7x2x8xf32> {layer = 0}
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x8xf32>
    // expected-error @+1 {{writes rows of 8 values into @k, whose slots hold 16}}
    spark_kernel.cache_write %x to @k : memref<?x8xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 256, max_chunk = 8, max_rows = 8, max_context = 32} {
  spark_kernel.tensor @w : tensor<16xf32>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x16xf32>
    // expected-error @+1 {{writes @w, which is not a spark_kernel.cache}}
    spark_kernel.cache_write %x to @w : memref<?x16xf32>
  }
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{4- or 6-bit codes (group 32) are stored as ui8 bytes, got 'tensor<4x64xi8>'}}
  spark_kernel.tensor @w : tensor<4x64xi8> {group = 32}
  spark_kernel.step(%pos0: i32) {}
}

// -----

spark_kernel.plan attributes {arena_floats = 0, max_chunk = 8, max_rows = 8, max_context = 32} {
  // expected-error @+1 {{symmetric needs 4-bit codes (a group size)}}
  spark_kernel.tensor @w : tensor<4x64xi8> {symmetric}
  spark_kernel.step(%pos0: i32) {}
}

// -----

// An asymmetric 4-bit kernel on symmetric codes.
spark_kernel.plan attributes {arena_floats = 256, max_chunk = 1, max_rows = 1, max_context = 8} {
  spark_kernel.kernel @q <kind = linear, weight_type = ui4, in = 128, out = 4, group = 32, row_bytes = 128>
  spark_kernel.tensor @s.w : tensor<4x128xui8> {group = 32, layout = 2, symmetric}
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x128xf32>
    %codes = spark_kernel.view weight @s.w : memref<4x64xui8, strided<[128, 1]>>
    %scales = spark_kernel.view weight @s.w : memref<4x4xf16, strided<[64, 1], offset: 32>>
    %zeros = spark_kernel.view weight @s.w : memref<4x4xf16, strided<[64, 1], offset: 36>>
    %o = spark_kernel.view arena : memref<?x4xf32, strided<[4, 1], offset: 128>>
    // expected-error @+1 {{calls @q (4-bit groups of 32, asymmetric) on @s.w, stored with group 32, symmetric}}
    spark_kernel.call @q(%x, %codes, %scales, %zeros, %o) : memref<?x128xf32>, memref<4x64xui8, strided<[128, 1]>>, memref<4x4xf16, strided<[64, 1], offset: 32>>, memref<4x4xf16, strided<[64, 1], offset: 36>>, memref<?x4xf32, strided<[4, 1], offset: 128>>
  }
}

// -----

// A 6-bit kernel on 4-bit codes (rows of 64 bytes, not 96).
spark_kernel.plan attributes {arena_floats = 256, max_chunk = 1, max_rows = 1, max_context = 8} {
  spark_kernel.kernel @q <kind = linear, weight_type = ui6, in = 128, out = 4, group = 32>
  spark_kernel.tensor @w : tensor<4x64xui8> {group = 32}
  spark_kernel.tensor @w.scales : tensor<4x4xf16>
  spark_kernel.tensor @w.zeros : tensor<4x4xf16>
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x128xf32>
    %codes = spark_kernel.view weight @w : memref<4x64xui8>
    %scales = spark_kernel.view weight @w.scales : memref<4x4xf16>
    %zeros = spark_kernel.view weight @w.zeros : memref<4x4xf16>
    %o = spark_kernel.view arena : memref<?x4xf32, strided<[4, 1], offset: 128>>
    // expected-error @+1 {{calls @q (6-bit codes, rows of 96 bytes) on @w, stored as 'tensor<4x64xui8>'}}
    spark_kernel.call @q(%x, %codes, %scales, %zeros, %o) : memref<?x128xf32>, memref<4x64xui8>, memref<4x4xf16>, memref<4x4xf16>, memref<?x4xf32, strided<[4, 1], offset: 128>>
  }
}
