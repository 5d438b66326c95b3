// RUN: spark-opt %s | spark-opt | FileCheck %s
// RUN: spark-opt %s --mlir-print-op-generic | spark-opt | FileCheck %s
// Round trip of every spark_kernel op: a one-layer plan of hidden 16 whose
// arena holds two values of 16 floats (offsets 0 and 240) at 15 rows.

// CHECK: spark_kernel.plan attributes {arena_floats = 480 : i64, max_chunk = 8 : i64, max_context = 32 : i64, max_rows = 15 : i64} {
spark_kernel.plan attributes {arena_floats = 480, max_chunk = 8, max_rows = 15, max_context = 32} {
  // Fields at their default are not printed.
  // CHECK-NEXT: spark_kernel.kernel @embed <kind = embed, weight_type = ui4, in = 256, out = 64, group = 128, symmetric = true>
  spark_kernel.kernel @embed <kind = embed, weight_type = ui4, in = 256, out = 64, group = 128, symmetric = true, phase = any, ring = false>
  // CHECK-NEXT: spark_kernel.kernel @norm <kind = rms_norm, in = 16, epsilon = 9.9999999999999995E-7 : f64>
  spark_kernel.kernel @norm <kind = rms_norm, in = 16, epsilon = 1.0e-6 : f64>
  // CHECK-NEXT: spark_kernel.kernel @proj <kind = linear, phase = prefill, weight_type = i8, in = 16, out = 16, input_bits = 8>
  spark_kernel.kernel @proj <kind = linear, phase = prefill, weight_type = i8, in = 16, out = 16, input_bits = 8>
  // CHECK-NEXT: spark_kernel.kernel @proj1 <kind = linear, phase = decode, weight_type = i8, in = 16, out = 16, input_bits = 8>
  spark_kernel.kernel @proj1 <kind = linear, phase = decode, weight_type = i8, in = 16, out = 16, input_bits = 8>
  // CHECK-NEXT: spark_kernel.kernel @attn <kind = attention, weight_type = bf16, scale = 3.500000e-01 : f64, heads = 2, kv_heads = 1, head_dim = 8, window = 8, slots = 7, ring = true>
  spark_kernel.kernel @attn <kind = attention, weight_type = bf16, scale = 0.35 : f64, heads = 2, kv_heads = 1, head_dim = 8, window = 8, slots = 7, ring = true>
  // CHECK-NEXT: spark_kernel.tensor @table : tensor<64x128xui8> {group = 128 : i64, symmetric}
  spark_kernel.tensor @table : tensor<64x128xui8> {group = 128, symmetric}
  // CHECK-NEXT: spark_kernel.tensor @table.scales : tensor<64x2xf32>
  spark_kernel.tensor @table.scales : tensor<64x2xf32>
  // CHECK-NEXT: spark_kernel.tensor @layer.0.norm : tensor<16xf32>
  spark_kernel.tensor @"layer.0.norm" : tensor<16xf32>
  // CHECK-NEXT: spark_kernel.cache @k : memref<7x1x8xbf16> {layer = 0 : i64, ring}
  spark_kernel.cache @k : memref<7x1x8xbf16> {layer = 0, ring}
  // CHECK-NEXT: spark_kernel.cache @v : memref<7x1x8xbf16> {layer = 0 : i64, ring, values}
  spark_kernel.cache @v : memref<7x1x8xbf16> {layer = 0, ring, values}
  // CHECK-NEXT: spark_kernel.step(%[[POS:.+]]: i32) {
  spark_kernel.step(%pos0: i32) {
    // CHECK-NEXT: %[[IDS:.+]] = spark_kernel.view tokens : memref<?xi32>
    %ids = spark_kernel.view tokens : memref<?xi32>
    // CHECK-NEXT: spark_kernel.view weight @table : memref<64x128xui8>
    %table = spark_kernel.view weight @table : memref<64x128xui8>
    // CHECK-NEXT: spark_kernel.view arena : memref<?x16xf32>
    %h = spark_kernel.view arena : memref<?x16xf32>
    %scales = spark_kernel.view weight @table.scales : memref<64x2xf32>
    // CHECK: spark_kernel.call @embed(%[[IDS]], {{.*}}) {layer = 0 : i64} :
    spark_kernel.call @embed(%ids, %table, %scales, %h) {layer = 0} : memref<?xi32>, memref<64x128xui8>, memref<64x2xf32>, memref<?x16xf32>
    %w = spark_kernel.view weight @"layer.0.norm" : memref<16xf32>
    %o = spark_kernel.view arena : memref<?x16xf32, strided<[16, 1], offset: 240>>
    // CHECK: spark_kernel.call @norm({{.*}}) {head_rows, probe_layer = 0 : i64}
    spark_kernel.call @norm(%h, %w, %o) {head_rows, probe_layer = 0} : memref<?x16xf32>, memref<16xf32>, memref<?x16xf32, strided<[16, 1], offset: 240>>
    // CHECK: %[[S:.+]] = arith.constant 0.000000e+00 : f32
    %s = arith.constant 0.0 : f32
    // CHECK: spark_kernel.call @proj decode @proj1({{.*}}, %[[S]], {{.*}}) :
    spark_kernel.call @proj decode @proj1(%o, %table, %w, %s, %h) : memref<?x16xf32, strided<[16, 1], offset: 240>>, memref<64x128xui8>, memref<16xf32>, f32, memref<?x16xf32>
    // CHECK: %[[C:.+]] = arith.constant 7 : i32
    // CHECK-NEXT: %[[CACHED:.+]] = arith.minsi %[[POS]], %[[C]] : i32
    %c7 = arith.constant 7 : i32
    %cached = arith.minsi %pos0, %c7 : i32
    %kc = spark_kernel.view cache @k : memref<7x1x8xbf16>
    %vc = spark_kernel.view cache @v : memref<7x1x8xbf16>
    // CHECK: spark_kernel.call @attn({{.*}}, %[[POS]], %[[CACHED]], {{.*}})
    spark_kernel.call @attn(%h, %h, %h, %kc, %vc, %pos0, %cached, %o) : memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<7x1x8xbf16>, memref<7x1x8xbf16>, i32, i32, memref<?x16xf32, strided<[16, 1], offset: 240>>
    // A column of a wider value: rows 16 apart, 8 wide.
    // CHECK: %[[KEYS:.+]] = spark_kernel.view arena : memref<?x8xf32, strided<[16, 1], offset: 248>>
    %keys = spark_kernel.view arena : memref<?x8xf32, strided<[16, 1], offset: 248>>
    // CHECK-NEXT: spark_kernel.cache_write %[[KEYS]] to @k : memref<?x8xf32, strided<[16, 1], offset: 248>>
    spark_kernel.cache_write %keys to @k : memref<?x8xf32, strided<[16, 1], offset: 248>>
  }
}

// Grouped 4-bit rows (layout 2): each row of 128 bytes holds 64 code bytes,
// then 4 f16 scales, then 4 f16 zero points; the scales and zeros operands
// are f16 views of the same rows (offsets and strides in halves).
// CHECK: spark_kernel.plan
spark_kernel.plan attributes {arena_floats = 256, max_chunk = 1, max_rows = 1, max_context = 8} {
  // CHECK-NEXT: spark_kernel.kernel @q <kind = linear, weight_type = ui4, in = 128, out = 4, group = 32, row_bytes = 128>
  spark_kernel.kernel @q <kind = linear, weight_type = ui4, in = 128, out = 4, group = 32, row_bytes = 128>
  // CHECK-NEXT: spark_kernel.tensor @q.w : tensor<4x128xui8> {group = 32 : i64, layout = 2 : i64}
  spark_kernel.tensor @q.w : tensor<4x128xui8> {group = 32, layout = 2}
  // Symmetric 4-bit codes (w4a8): no zero points stored.
  // CHECK-NEXT: spark_kernel.tensor @s.w : tensor<4x128xui8> {group = 32 : i64, layout = 2 : i64, symmetric}
  spark_kernel.tensor @s.w : tensor<4x128xui8> {group = 32, layout = 2, symmetric}
  spark_kernel.step(%pos0: i32) {
    %x = spark_kernel.view arena : memref<?x128xf32>
    // CHECK: spark_kernel.view weight @q.w : memref<4x64xui8, strided<[128, 1]>>
    %codes = spark_kernel.view weight @q.w : memref<4x64xui8, strided<[128, 1]>>
    // CHECK-NEXT: spark_kernel.view weight @q.w : memref<4x4xf16, strided<[64, 1], offset: 32>>
    %scales = spark_kernel.view weight @q.w : memref<4x4xf16, strided<[64, 1], offset: 32>>
    // CHECK-NEXT: spark_kernel.view weight @q.w : memref<4x4xf16, strided<[64, 1], offset: 36>>
    %zeros = spark_kernel.view weight @q.w : memref<4x4xf16, strided<[64, 1], offset: 36>>
    %o = spark_kernel.view arena : memref<?x4xf32, strided<[4, 1], offset: 128>>
    spark_kernel.call @q(%x, %codes, %scales, %zeros, %o) : memref<?x128xf32>, memref<4x64xui8, strided<[128, 1]>>, memref<4x4xf16, strided<[64, 1], offset: 32>>, memref<4x4xf16, strided<[64, 1], offset: 36>>, memref<?x4xf32, strided<[4, 1], offset: 128>>
  }
}
