// RUN: spark-opt %s --spark-lower-step-to-emitc | FileCheck %s
// The step of a one-layer plan (hidden 16, chunks of 8, 32 positions) as the
// ABI's step function: every call behind `rc == 0`, the head's calls also
// behind `n_logits > 0`, views as spark_view() buffers, the i-th kernel
// through the driver's spark_kernel_<i> with the variant select_variant()
// chose for the CPU.

// CHECK: emitc.func @step(%[[W:.+]]: !emitc.ptr<!emitc.opaque<"const void *const">>, %[[C:.+]]: !emitc.ptr<!emitc.opaque<"void *const">>, %[[ARENA:.+]]: !emitc.ptr<!emitc.opaque<"void">>, %[[IDS:.+]]: !emitc.ptr<!emitc.opaque<"const int32_t">>, %[[POS:.+]]: i32, %[[N:.+]]: i32, %[[NL:.+]]: i32, %[[LOGITS:.+]]: !emitc.ptr<f32>) -> i32 attributes {specifiers = ["static"]}
// CHECK: %[[A:.+]] = cast %[[ARENA]] : !emitc.ptr<!emitc.opaque<"void">> to !emitc.ptr<f32>
// CHECK: %[[VAR:.+]] = "emitc.variable"() {{.*}} -> !emitc.lvalue<i32>
// CHECK: %[[SEL:.+]] = call_opaque "select_variant"() : () -> i32
// CHECK: assign %[[SEL]] : i32 to %[[VAR]]
// CHECK: %[[HOOKS:.+]] = address_of
// CHECK: %[[RC:.+]] = "emitc.variable"() <{value = 0 : i32}>
// The step's arguments against max_chunk 8 and max_context 32.
// CHECK: %[[CHUNK:.+]] = literal "8" : i32
// CHECK: %[[CTX:.+]] = literal "32" : i32
// CHECK: call_opaque "spark_check_step"(%{{.+}}, %[[POS]], %[[N]], %[[NL]], %[[CHUNK]], %[[CTX]])
// CHECK: %[[HEADROW:.+]] = sub %[[N]], %[[NL]]

// Call 0, the embedding: tokens from ids, the output at arena offset 0.
// CHECK: verbatim "/* 0: embed */"
// CHECK: %[[RC0:.+]] = load %[[RC]]
// CHECK: cmp eq, %[[RC0]]
// CHECK: if
// CHECK: call_opaque "spark_profile_begin"(%[[HOOKS]])
// CHECK: "emitc.variable"() {{.*}} -> !emitc.array<4x!emitc.opaque<"spark_view_t">>
// CHECK: %[[V0:.+]] = load %[[VAR]] : <i32>
// CHECK: call_opaque "spark_view"(%{{.+}}, %[[IDS]], %{{.+}}, %{{.+}}, %{{.+}}, %[[N]],
// CHECK: call_opaque "spark_kernel_0"(%[[V0]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}) : (i32, !emitc.ptr<!emitc.opaque<"halide_buffer_t">>,
// CHECK: assign %{{.+}} : i32 to %[[RC]]
// CHECK: call_opaque "spark_profile_end"

// Call 1 runs on the head's rows: n_logits of them from row n - n_logits,
// (hidden 16 floats apart), and probes layer 0's output after it.
// CHECK: verbatim "/* 1: norm */"
// CHECK: %[[GT:.+]] = cmp gt, %[[NL]]
// CHECK: logical_and %{{.+}}, %[[GT]]
// CHECK: load %[[VAR]]
// CHECK: %[[WIDE:.+]] = cast %[[HEADROW]] : i32 to i64
// CHECK: %[[STRIDE:.+]] = literal "16" : i64
// CHECK: mul %[[WIDE]], %[[STRIDE]]
// CHECK: call_opaque "spark_view"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[NL]],
// CHECK: call_opaque "spark_kernel_1"
// CHECK: call_opaque "spark_profile_end"
// CHECK: call_opaque "spark_probe"(%[[HOOKS]], %{{.+}}, %[[N]],

// Call 2, a matrix product: its decode kernel (3) for one row, else the
// prefill kernel (2) on the rows rounded up to a multiple of 8.
// CHECK: verbatim "/* 2: proj */"
// CHECK: %[[ONE:.+]] = literal "1" : i32
// CHECK: cmp eq, %[[N]], %[[ONE]]
// CHECK: "emitc.constant"() <{value = 0.000000e+00 : f32}>
// CHECK: call_opaque "spark_kernel_3"
// CHECK: } else {
// CHECK: %[[SEVEN:.+]] = literal "7" : i32
// CHECK: %[[UP:.+]] = add %[[N]], %[[SEVEN]]
// CHECK: %[[EIGHT:.+]] = literal "8" : i32
// CHECK: %[[WHOLE:.+]] = div %[[UP]], %[[EIGHT]]
// CHECK: %[[EIGHT2:.+]] = literal "8" : i32
// CHECK: %[[ROWS:.+]] = mul %[[WHOLE]], %[[EIGHT2]]
// CHECK: call_opaque "spark_view"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[ROWS]],
// CHECK: call_opaque "spark_kernel_2"

// Call 3, the attention: the caches (C[0], C[1]), pos0 and min(pos0, 7).
// CHECK: verbatim "/* 3: attn */"
// CHECK: subscript %[[C]]
// CHECK: subscript %[[C]]
// CHECK: %[[LT:.+]] = cmp lt, %[[POS]], %[[S1:.+]] :
// CHECK-NEXT: %[[S2:.+]] = literal "7" : i32
// CHECK-NEXT: %[[CACHED:.+]] = conditional %[[LT]], %[[POS]], %[[S2]] : i32
// CHECK: call_opaque "spark_kernel_4"({{.*}}, %[[POS]], %[[CACHED]], %{{.+}})

// The keys written to their ring of 7 bf16 slots: 8 floats of a 16-float
// row at arena offset 248.
// CHECK: verbatim "/* 4: cache_write -> cache 0 (ring, 7 slots) */"
// CHECK: %[[DTYPE:.+]] = literal "SPARK_DTYPE_BF16" : i32
// CHECK-NEXT: %[[RING:.+]] = literal "7" : i32
// CHECK-NEXT: %[[WIDTH:.+]] = literal "8" : i32
// CHECK-NEXT: %[[OFF:.+]] = literal "248" : i64
// CHECK-NEXT: %[[SRC:.+]] = add %[[A]], %[[OFF]]
// CHECK-NEXT: %[[SRCSTRIDE:.+]] = literal "16" : i32
// CHECK-NEXT: call_opaque "spark_cache_write"(%{{.+}}, %[[DTYPE]], %[[RING]], %[[WIDTH]], %[[SRC]], %[[SRCSTRIDE]], %[[POS]], %[[N]])
// CHECK: %[[RET:.+]] = load %[[RC]]
// CHECK-NEXT: return %[[RET]] : i32

spark_kernel.plan attributes {arena_floats = 480, max_chunk = 8, max_rows = 15, max_context = 32} {
  spark_kernel.kernel @embed <kind = embed, weight_type = ui4, in = 256, out = 64, group = 128, symmetric = true>
  spark_kernel.kernel @norm <kind = rms_norm, in = 16, epsilon = 1.0e-6 : f64>
  spark_kernel.kernel @proj <kind = linear, phase = prefill, weight_type = i8, in = 16, out = 16, input_bits = 8>
  spark_kernel.kernel @proj1 <kind = linear, phase = decode, weight_type = i8, in = 16, out = 16, input_bits = 8>
  spark_kernel.kernel @attn <kind = attention, weight_type = bf16, scale = 0.35 : f64, heads = 2, kv_heads = 1, head_dim = 8, window = 8, slots = 7, ring = true>
  spark_kernel.tensor @table : tensor<64x128xui8> {group = 128, symmetric}
  spark_kernel.tensor @table.scales : tensor<64x2xf32>
  spark_kernel.tensor @"layer.0.norm" : tensor<16xf32>
  spark_kernel.cache @k : memref<7x1x8xbf16> {layer = 0, ring}
  spark_kernel.cache @v : memref<7x1x8xbf16> {layer = 0, ring, values}
  spark_kernel.step(%pos0: i32) {
    %ids = spark_kernel.view tokens : memref<?xi32>
    %table = spark_kernel.view weight @table : memref<64x128xui8>
    %h = spark_kernel.view arena : memref<?x16xf32>
    %scales = spark_kernel.view weight @table.scales : memref<64x2xf32>
    spark_kernel.call @embed(%ids, %table, %scales, %h) {layer = 0} : memref<?xi32>, memref<64x128xui8>, memref<64x2xf32>, memref<?x16xf32>
    %w = spark_kernel.view weight @"layer.0.norm" : memref<16xf32>
    %o = spark_kernel.view arena : memref<?x16xf32, strided<[16, 1], offset: 240>>
    spark_kernel.call @norm(%h, %w, %o) {head_rows, probe_layer = 0} : memref<?x16xf32>, memref<16xf32>, memref<?x16xf32, strided<[16, 1], offset: 240>>
    %s = arith.constant 0.0 : f32
    spark_kernel.call @proj decode @proj1(%o, %table, %w, %s, %h) : memref<?x16xf32, strided<[16, 1], offset: 240>>, memref<64x128xui8>, memref<16xf32>, f32, memref<?x16xf32>
    %c7 = arith.constant 7 : i32
    %cached = arith.minsi %pos0, %c7 : i32
    %kc = spark_kernel.view cache @k : memref<7x1x8xbf16>
    %vc = spark_kernel.view cache @v : memref<7x1x8xbf16>
    spark_kernel.call @attn(%h, %h, %h, %kc, %vc, %pos0, %cached, %o) : memref<?x16xf32>, memref<?x16xf32>, memref<?x16xf32>, memref<7x1x8xbf16>, memref<7x1x8xbf16>, i32, i32, memref<?x16xf32, strided<[16, 1], offset: 240>>
    %keys = spark_kernel.view arena : memref<?x8xf32, strided<[16, 1], offset: 248>>
    spark_kernel.cache_write %keys to @k : memref<?x8xf32, strided<[16, 1], offset: 248>>
  }
}
