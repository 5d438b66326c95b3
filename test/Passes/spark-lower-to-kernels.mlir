// RUN: spark-opt %s --spark-lower-to-kernels | FileCheck %s --check-prefixes=CHECK,HOST
// RUN: spark-opt %s --spark-lower-to-kernels=target=arm64 | FileCheck %s --check-prefixes=CHECK,ARM64
// RUN: spark-opt %s --spark-lower-to-kernels="weight-type=bf16 max-context=16" | FileCheck %s --check-prefix=BF16

// The module after the pass pipeline: an embedding, a norm, two 4-bit
// products (groups of 32, asymmetric), a residual add, the same norm again
// and the tied head; arena offsets in bytes for 15 rows (max chunk 8 + 7).
module attributes {spark.arena = {bytes = 13440 : i64, rows = 15 : i64}, spark.max_context = 32 : i64} {
  spark.weight @E : tensor<64x32xf32>
  spark.weight @N : tensor<32xf32>
  spark.weight @A : tensor<64x32xi4> {quant = #spark.quant<bits = 4, group_size = 32, symmetric = false>}
  spark.weight @B : tensor<32x64xi4> {quant = #spark.quant<bits = 4, group_size = 32, symmetric = false>}
  func.func @step(%ids: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
    %h = spark.embed %ids table @E {spark.arena_offset = 0 : i64} : tensor<?xi32> -> tensor<?x32xf32>
    %n = spark.rms_norm %h weight @N eps 1.0e-6 {spark.arena_offset = 1920 : i64} : tensor<?x32xf32> -> tensor<?x32xf32>
    %u = spark.linear %n weight @A {spark.arena_offset = 3840 : i64} : tensor<?x32xf32> -> tensor<?x64xf32>
    %d = spark.linear %u weight @B {spark.arena_offset = 7680 : i64} : tensor<?x64xf32> -> tensor<?x32xf32>
    %r = spark.add %h, %d {spark.arena_offset = 9600 : i64} : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
    %m = spark.rms_norm %r weight @N eps 1.0e-6 {spark.arena_offset = 11520 : i64} : tensor<?x32xf32> -> tensor<?x32xf32>
    %l = spark.logits %m head @E : tensor<?x32xf32> -> tensor<?x64xf32>
    return %l : tensor<?x64xf32>
  }
}

// The module's contents are replaced and its spark.* attributes consumed;
// the context is the module's spark.max_context unless max-context says
// otherwise, the chunk the one the arena was planned for (15 rows: 8 + 7);
// arena_floats = 13440 / 4.
// CHECK: module {
// CHECK-NEXT: spark_kernel.plan attributes {arena_floats = 3360 : i64, max_chunk = 8 : i64, max_context = 32 : i64, max_rows = 15 : i64} {
// BF16: spark_kernel.plan attributes {arena_floats = 3360 : i64, max_chunk = 8 : i64, max_context = 16 : i64, max_rows = 15 : i64} {

// One kernel per distinct spec: both norms share one; each product has its
// prefill and its one-row kernel. The 4-bit weights are read as ui4 codes in
// groups of 32; x86 reads them as grouped rows of 64 bytes (16 or 32 bytes
// of codes, then an f16 scale and zero point per group, padded to 64).
// CHECK: spark_kernel.kernel @embed_d32_v64_f32 <kind = embed, in = 32, out = 64>
// BF16: spark_kernel.kernel @embed_d32_v64_bf16 <kind = embed, weight_type = bf16, in = 32, out = 64>
// CHECK-NEXT: spark_kernel.kernel @[[NORM:rms_norm_d32_eps600]] <kind = rms_norm, in = 32, epsilon = 9.9999999999999995E-7 : f64>
// HOST-NEXT: spark_kernel.kernel @[[APRE:linear_k32_n64_u4g32r64_prefill]] <kind = linear, phase = prefill, weight_type = ui4, in = 32, out = 64, group = 32, row_bytes = 64>
// HOST-NEXT: spark_kernel.kernel @[[ADEC:linear_k32_n64_u4g32r64_decode]] <kind = linear, phase = decode, weight_type = ui4, in = 32, out = 64, group = 32, row_bytes = 64>
// HOST-NEXT: spark_kernel.kernel @linear_k64_n32_u4g32r64_prefill <kind = linear, phase = prefill, weight_type = ui4, in = 64, out = 32, group = 32, row_bytes = 64>
// HOST-NEXT: spark_kernel.kernel @linear_k64_n32_u4g32r64_decode <kind = linear, phase = decode, weight_type = ui4, in = 64, out = 32, group = 32, row_bytes = 64>
// ARM64-NEXT: spark_kernel.kernel @[[APRE:linear_k32_n64_u4g32_prefill]] <kind = linear, phase = prefill, weight_type = ui4, in = 32, out = 64, group = 32>
// ARM64-NEXT: spark_kernel.kernel @[[ADEC:linear_k32_n64_u4g32_decode]] <kind = linear, phase = decode, weight_type = ui4, in = 32, out = 64, group = 32>
// ARM64-NEXT: spark_kernel.kernel @linear_k64_n32_u4g32_prefill <kind = linear, phase = prefill, weight_type = ui4, in = 64, out = 32, group = 32>
// ARM64-NEXT: spark_kernel.kernel @linear_k64_n32_u4g32_decode <kind = linear, phase = decode, weight_type = ui4, in = 64, out = 32, group = 32>
// CHECK-NEXT: spark_kernel.kernel @[[ADD:add_32_a32_b32]] <kind = binary, in = 32, lhs_width = 32, rhs_width = 32>
// The tied head: the embedding's table as a product, in the build's dtype.
// CHECK-NEXT: spark_kernel.kernel @[[HEAD:linear_k32_n64_f32_prefill]] <kind = linear, phase = prefill, in = 32, out = 64>
// CHECK-NEXT: spark_kernel.kernel @linear_k32_n64_f32_decode <kind = linear, phase = decode, in = 32, out = 64>
// BF16: spark_kernel.kernel @linear_k32_n64_bf16_prefill <kind = linear, phase = prefill, weight_type = bf16, in = 32, out = 64>
// CHECK-NOT: spark_kernel.kernel

// The pack's tensors as the target stores them: grouped rows on x86; on
// arm64 dense codes (two a byte) after their f16 scales and zero points
// ([rows, groups]).
// CHECK: spark_kernel.tensor @E : tensor<64x32xf32>
// BF16: spark_kernel.tensor @E : tensor<64x32xbf16>
// CHECK-NEXT: spark_kernel.tensor @N : tensor<32xf32>
// BF16-NEXT: spark_kernel.tensor @N : tensor<32xf32>
// HOST-NEXT: spark_kernel.tensor @A : tensor<64x64xui8> {group = 32 : i64, layout = 2 : i64}
// HOST-NEXT: spark_kernel.tensor @B : tensor<32x64xui8> {group = 32 : i64, layout = 2 : i64}
// ARM64-NEXT: spark_kernel.tensor @A.scales : tensor<64x1xf16>
// ARM64-NEXT: spark_kernel.tensor @A.zeros : tensor<64x1xf16>
// ARM64-NEXT: spark_kernel.tensor @A : tensor<64x16xui8> {group = 32 : i64}
// ARM64-NEXT: spark_kernel.tensor @B.scales : tensor<32x2xf16>
// ARM64-NEXT: spark_kernel.tensor @B.zeros : tensor<32x2xf16>
// ARM64-NEXT: spark_kernel.tensor @B : tensor<32x32xui8> {group = 32 : i64}
// CHECK-NOT: spark_kernel.tensor

// CHECK: spark_kernel.step(%pos0: i32) {
// CHECK: spark_kernel.call @embed_d32_v64_f32(
// CHECK: spark_kernel.call @[[NORM]](
// The grouped rows are viewed three times: the codes (bytes 0-15 of each
// 64-byte row), the scales (halves 8..) and the zero points (halves 9..).
// HOST: %[[CODES:.+]] = spark_kernel.view weight @A : memref<64x16xui8, strided<[64, 1]>>
// HOST-NEXT: %[[SCALES:.+]] = spark_kernel.view weight @A : memref<64x1xf16, strided<[32, 1], offset: 8>>
// HOST-NEXT: %[[ZEROS:.+]] = spark_kernel.view weight @A : memref<64x1xf16, strided<[32, 1], offset: 9>>
// ARM64: %[[CODES:.+]] = spark_kernel.view weight @A : memref<64x16xui8>
// ARM64-NEXT: %[[SCALES:.+]] = spark_kernel.view weight @A.scales : memref<64x1xf16>
// ARM64-NEXT: %[[ZEROS:.+]] = spark_kernel.view weight @A.zeros : memref<64x1xf16>
// CHECK-NEXT: %[[U:.+]] = spark_kernel.view arena : memref<?x64xf32, strided<[64, 1], offset: 960>>
// CHECK-NEXT: spark_kernel.call @[[APRE]] decode @[[ADEC]](%{{.+}}, %[[CODES]], %[[SCALES]], %[[ZEROS]], %[[U]])
// CHECK: spark_kernel.call @[[ADD]](
// CHECK: spark_kernel.call @[[NORM]](
// The logits are the head's output, on the rows whose logits are wanted.
// CHECK: %[[LOGITS:.+]] = spark_kernel.view logits : memref<?x64xf32>
// CHECK-NEXT: spark_kernel.call @[[HEAD]] decode @{{.+}}(%{{.+}}, %{{.+}}, %[[LOGITS]]) {head_rows}
// CHECK-NOT: spark.
