// RUN: spark-opt %s | spark-opt | FileCheck %s
// RUN: spark-opt %s --mlir-print-op-generic | spark-opt | FileCheck %s
// Round trip of every spark op: parse, print, parse again.

// CHECK: spark.weight @model.embedding.weight : tensor<64x16xbf16> {source = "model.safetensors"}
spark.weight @model.embedding.weight : tensor<64x16xbf16> {source = "model.safetensors"}
// CHECK: spark.weight @norm : tensor<16xf32>
spark.weight @norm : tensor<16xf32>
// CHECK: spark.weight @qkv : tensor<64x16xf16>
spark.weight @qkv : tensor<64x16xf16>
// CHECK: spark.weight @head : tensor<64x16xf32>
spark.weight @head : tensor<64x16xf32>
// CHECK: spark.weight @q8 : tensor<32x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
spark.weight @q8 : tensor<32x16xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// CHECK: spark.weight @q4 : tensor<32x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = false>}
spark.weight @q4 : tensor<32x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = false>}

// CHECK-LABEL: func @get_weight
func.func @get_weight() -> tensor<16xf32> {
  // CHECK: %[[W:.+]] = spark.get_weight @norm : tensor<16xf32>
  %w = spark.get_weight @norm : tensor<16xf32>
  // CHECK: return %[[W]]
  return %w : tensor<16xf32>
}

// CHECK-LABEL: func @embed
// CHECK-SAME: (%[[IDS:.+]]: tensor<?xi32>)
func.func @embed(%ids: tensor<?xi32>) -> tensor<?x16xf32> {
  // CHECK: spark.embed %[[IDS]] table @model.embedding.weight : tensor<?xi32> -> tensor<?x16xf32>
  %h = spark.embed %ids table @model.embedding.weight : tensor<?xi32> -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// CHECK-LABEL: func @rms_norm
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @rms_norm(%x: tensor<?x16xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  // CHECK: spark.rms_norm %[[X]] weight @norm eps 9.9999999999999995E-7 : tensor<?x16xf32> -> tensor<?x16xf32>
  %0 = spark.rms_norm %x weight @norm eps 1.0e-6 : tensor<?x16xf32> -> tensor<?x16xf32>
  // CHECK: spark.rms_norm %[[X]] weight @norm eps 1.000000e-05 {output_scale = 2.500000e-02 : f64, output_zero_point = 3 : i64}
  %1 = spark.rms_norm %x weight @norm eps 1.0e-5 {output_scale = 0.025 : f64, output_zero_point = 3 : i64} : tensor<?x16xf32> -> tensor<?x16xf32>
  return %0, %1 : tensor<?x16xf32>, tensor<?x16xf32>
}

// CHECK-LABEL: func @linear
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @linear(%x: tensor<?x16xf32>) -> tensor<?x64xf32> {
  // CHECK: spark.linear %[[X]] weight @qkv : tensor<?x16xf32> -> tensor<?x64xf32>
  %y = spark.linear %x weight @qkv : tensor<?x16xf32> -> tensor<?x64xf32>
  // CHECK: spark.linear %[[X]] weight @qkv {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>} : tensor<?x16xf32> -> tensor<?x64xf32>
  %z = spark.linear %x weight @qkv {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>} : tensor<?x16xf32> -> tensor<?x64xf32>
  // CHECK: spark.linear %[[X]] weight @qkv {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_range = 3.175000e+00 : f32, input_scale = 2.500000e-02 : f32} : tensor<?x16xf32> -> tensor<?x64xf32>
  %zs = spark.linear %x weight @qkv {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_range = 3.175 : f32, input_scale = 0.025 : f32} : tensor<?x16xf32> -> tensor<?x64xf32>
  %s = spark.add %y, %z : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// CHECK-LABEL: func @logits
// CHECK-SAME: (%[[X:.+]]: tensor<3x16xf32>)
func.func @logits(%x: tensor<3x16xf32>) -> tensor<3x64xf32> {
  // CHECK: spark.logits %[[X]] head @model.embedding.weight : tensor<3x16xf32> -> tensor<3x64xf32>
  %y = spark.logits %x head @model.embedding.weight : tensor<3x16xf32> -> tensor<3x64xf32>
  return %y : tensor<3x64xf32>
}

// CHECK-LABEL: func @split
// CHECK-SAME: (%[[X:.+]]: tensor<?x64xf32>)
func.func @split(%x: tensor<?x64xf32>) -> (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  // CHECK: %[[S:.+]]:3 = spark.split %[[X]] [32, 16, 16] : tensor<?x64xf32> -> tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>
  %q, %k, %v = spark.split %x [32, 16, 16] : tensor<?x64xf32> -> tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>
  // CHECK: return %[[S]]#0, %[[S]]#1, %[[S]]#2
  return %q, %k, %v : tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// CHECK-LABEL: func @rope
// CHECK-SAME: (%[[X:.+]]: tensor<?x32xf32>, %[[P:.+]]: tensor<?xi32>)
func.func @rope(%x: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
  // CHECK: spark.rope %[[X]], %[[P]] {head_dim = 8 : i64, num_heads = 4 : i64, rotary_dim = 2 : i64, theta = 5.000000e+06 : f64} : tensor<?x32xf32>, tensor<?xi32>
  %y = spark.rope %x, %pos {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 2 : i64, theta = 5.0e6 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func @kv_write
// CHECK-SAME: (%[[C:.+]]: tensor<7x2x8xbf16>, %[[K:.+]]: tensor<?x16xf32>, %[[P:.+]]: tensor<?xi32>)
func.func @kv_write(%cache: tensor<7x2x8xbf16>, %k: tensor<?x16xf32>, %pos: tensor<?xi32>) -> (tensor<7x2x8xbf16>, tensor<7x2x8xbf16>) {
  // CHECK: spark.kv_write linear %[[K]], %[[P]] into %[[C]] : tensor<?x16xf32>, tensor<?xi32> -> tensor<7x2x8xbf16>
  %0 = spark.kv_write linear %k, %pos into %cache : tensor<?x16xf32>, tensor<?xi32> -> tensor<7x2x8xbf16>
  // CHECK: spark.kv_write ring %[[K]], %[[P]] into %[[C]]
  %1 = spark.kv_write ring %k, %pos into %cache : tensor<?x16xf32>, tensor<?xi32> -> tensor<7x2x8xbf16>
  return %0, %1 : tensor<7x2x8xbf16>, tensor<7x2x8xbf16>
}

// CHECK-LABEL: func @attention
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x32xf32>, %[[K:[^:]+]]: tensor<?x16xf32>, %[[V:[^:]+]]: tensor<?x16xf32>, %[[KC:[^:]+]]: tensor<7x2x8xf32>, %[[VC:[^:]+]]: tensor<7x2x8xf32>, %[[LC:[^:]+]]: tensor<64x2x8xf32>, %[[P:[^:]+]]: tensor<?xi32>)
func.func @attention(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x16xf32>,
                     %kc: tensor<7x2x8xf32>, %vc: tensor<7x2x8xf32>, %lc: tensor<64x2x8xf32>,
                     %pos: tensor<?xi32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK: spark.attention sliding ring %[[Q]], %[[K]], %[[V]], %[[KC]], %[[VC]], %[[P]] {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64, window = 8 : i64}
  %0 = spark.attention sliding ring %q, %k, %v, %kc, %vc, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 8 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<7x2x8xf32>, tensor<7x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  // CHECK: spark.attention full linear %[[Q]], %[[K]], %[[V]], %[[LC]], %[[LC]], %[[P]] {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64}
  %1 = spark.attention full linear %q, %k, %v, %lc, %lc, %pos {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0, %1 : tensor<?x32xf32>, tensor<?x32xf32>
}

// CHECK-LABEL: func @head_gate
// CHECK-SAME: (%[[O:.+]]: tensor<?x32xf32>, %[[G:.+]]: tensor<?x4xf32>)
func.func @head_gate(%o: tensor<?x32xf32>, %g: tensor<?x4xf32>) -> tensor<?x32xf32> {
  // CHECK: spark.head_gate %[[O]], %[[G]] {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  %y = spark.head_gate %o, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func @geglu
// CHECK-SAME: (%[[G:.+]]: tensor<?x32xf32>, %[[U:.+]]: tensor<?x32xf32>)
func.func @geglu(%gate: tensor<?x32xf32>, %up: tensor<?x32xf32>) -> tensor<?x32xf32> {
  // CHECK: spark.geglu %[[G]], %[[U]] : tensor<?x32xf32>
  %y = spark.geglu %gate, %up : tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func @decomposed_rms_norm
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @decomposed_rms_norm(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // CHECK: %[[SQ:.+]] = spark.pow %[[X]], 2.000000e+00 : tensor<?x16xf32>
  %sq = spark.pow %x, 2.0 : tensor<?x16xf32>
  // CHECK: %[[M:.+]] = spark.mean %[[SQ]] : tensor<?x16xf32> -> tensor<?x1xf32>
  %m = spark.mean %sq : tensor<?x16xf32> -> tensor<?x1xf32>
  // CHECK: %[[EPS:.+]] = spark.constant dense<9.99999997E-7> : tensor<1xf32> : tensor<1xf32>
  %eps = spark.constant dense<1.0e-6> : tensor<1xf32> : tensor<1xf32>
  // CHECK: %[[ME:.+]] = spark.add %[[M]], %[[EPS]] : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  %me = spark.add %m, %eps : tensor<?x1xf32>, tensor<1xf32> -> tensor<?x1xf32>
  // CHECK: %[[R:.+]] = spark.rsqrt %[[ME]] : tensor<?x1xf32>
  %r = spark.rsqrt %me : tensor<?x1xf32>
  // CHECK: %[[N:.+]] = spark.mul %[[X]], %[[R]] : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  %n = spark.mul %x, %r : tensor<?x16xf32>, tensor<?x1xf32> -> tensor<?x16xf32>
  // CHECK: %[[W:.+]] = spark.get_weight @norm
  %w = spark.get_weight @norm : tensor<16xf32>
  // CHECK: spark.mul %[[N]], %[[W]] : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  %y = spark.mul %n, %w : tensor<?x16xf32>, tensor<16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: func @decomposed_geglu_and_gate
func.func @decomposed_geglu_and_gate(%gate: tensor<?x32xf32>, %up: tensor<?x32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  // CHECK: %[[E:.+]] = spark.gelu %{{.+}} : tensor<?x32xf32>
  %e = spark.gelu %gate : tensor<?x32xf32>
  // CHECK: spark.gelu %{{.+}} {approximate = true} : tensor<?x32xf32>
  %t = spark.gelu %gate {approximate = true} : tensor<?x32xf32>
  // CHECK: spark.mul %[[E]], %{{.+}} : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  %y = spark.mul %e, %up : tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  // CHECK: spark.sigmoid %{{.+}} : tensor<?x32xf32>
  %s = spark.sigmoid %t : tensor<?x32xf32>
  return %y, %s : tensor<?x32xf32>, tensor<?x32xf32>
}

// CHECK-LABEL: func @qdq
// CHECK-SAME: (%[[X:.+]]: tensor<?x16xf32>)
func.func @qdq(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // CHECK: %[[Q:.+]] = spark.quantize %[[X]] {scale = 2.500000e-02 : f64, zero_point = -3 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  %q = spark.quantize %x {scale = 0.025 : f64, zero_point = -3 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  // CHECK: spark.dequantize %[[Q]] {scale = 2.500000e-02 : f64, zero_point = -3 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  %d = spark.dequantize %q {scale = 0.025 : f64, zero_point = -3 : i64} : tensor<?x16xi8> -> tensor<?x16xf32>
  // CHECK: spark.quantize %{{.+}} {scale = 1.000000e-01 : f64, zero_point = 128 : i64} : tensor<?x16xf32> -> tensor<?x16xui8>
  %u = spark.quantize %d {scale = 0.1 : f64, zero_point = 128 : i64} : tensor<?x16xf32> -> tensor<?x16xui8>
  return %d : tensor<?x16xf32>
}

// CHECK: spark.rope_table @rope_t {block = 8 : i64, positions = 64 : i64, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64}
spark.rope_table @rope_t {theta = 1.0e4 : f64, rotary_dim = 8 : i64, positions = 64 : i64, block = 8 : i64}

// CHECK-LABEL: func @rope_with_table
func.func @rope_with_table(%x: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x32xf32> {
  // CHECK: spark.rope %{{.+}}, %{{.+}} {head_dim = 8 : i64, num_heads = 4 : i64, rotary_dim = 8 : i64, table = @rope_t, theta = 1.000000e+04 : f64}
  %y = spark.rope %x, %pos {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, table = @rope_t} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// CHECK-LABEL: func @gated_attention
func.func @gated_attention(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %pos: tensor<?xi32>, %g: tensor<?x4xf32>) -> tensor<?x32xf32> {
  // CHECK: spark.attention full linear %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} gate %{{.+}} {head_dim = 8 : i64
  %a = spark.attention full linear %q, %k, %k, %c, %c, %pos gate %g {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>, tensor<?x4xf32>) -> tensor<?x32xf32>
  return %a : tensor<?x32xf32>
}

// CHECK: spark.weight @stacked : tensor<128x16xf32> {parts = [@head, @head]}
spark.weight @stacked : tensor<128x16xf32> {parts = [@head, @head]}
