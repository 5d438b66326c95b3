// RUN: spark-opt %s -split-input-file -verify-diagnostics
// One case per verifier error of the spark dialect.

// expected-error @+1 {{weight shape must be static, got [?, 16]}}
spark.weight @w : tensor<?x16xf32>

// -----

// expected-error @+1 {{weight element type must be f32, f16 or bf16, got 'i32'}}
spark.weight @w : tensor<16xi32>

// -----

// expected-error @+1 {{a quantized weight stores i8, i6 or i4 codes, got 'f32'}}
spark.weight @w : tensor<16x16xf32> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}

// -----

// expected-error @+1 {{stores 'i4' codes but is quantized to 6 bits}}
spark.weight @w : tensor<16x64xi4> {quant = #spark.quant<bits = 6, group_size = 32, symmetric = false>}

// -----

// expected-error @+1 {{quantization bits must be 4, 6 or 8, got 3}}
spark.weight @w : tensor<16x16xi8> {quant = #spark.quant<bits = 3, group_size = 0, symmetric = true>}

// -----

// expected-error @+1 {{6-bit quantization is asymmetric and in groups (group_size > 0, symmetric = false), got group_size = 0, symmetric}}
spark.weight @w : tensor<16x16xi6> {quant = #spark.quant<bits = 6, group_size = 0, symmetric = true>}

// -----

// expected-error @+1 {{quantization group_size must be >= 0 (0 means per output channel), got -1}}
spark.weight @w : tensor<16x16xi8> {quant = #spark.quant<bits = 8, group_size = -1, symmetric = true>}

// -----

func.func @f() -> tensor<16xf32> {
  // expected-error @+1 {{weight @missing does not name a spark.weight}}
  %w = spark.get_weight @missing : tensor<16xf32>
  return %w : tensor<16xf32>
}

// -----

spark.weight @w : tensor<8xf32>
func.func @f() -> tensor<16xf32> {
  // expected-error @+1 {{weight @w has shape [8] but the op needs [16]}}
  %w = spark.get_weight @w : tensor<16xf32>
  return %w : tensor<16xf32>
}

// -----

spark.weight @table : tensor<64x8xf32>
func.func @f(%ids: tensor<?xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{table @table has shape [64, 8] but the op needs [?, 16]}}
  %h = spark.embed %ids table @table : tensor<?xi32> -> tensor<?x16xf32>
  return %h : tensor<?x16xf32>
}

// -----

spark.weight @table : tensor<64x16xf32>
func.func @f(%ids: tensor<3xi32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{has 3 positions for 4 token rows}}
  %h = spark.embed %ids table @table : tensor<3xi32> -> tensor<4x16xf32>
  return %h : tensor<4x16xf32>
}

// -----

spark.weight @table : tensor<64x16xf32>
func.func @f(%ids: tensor<3xi32>) -> tensor<3x2x8xf32> {
  // expected-error @+1 {{result must be [tokens, hidden], got [3, 2, 8]}}
  %h = spark.embed %ids table @table : tensor<3xi32> -> tensor<3x2x8xf32>
  return %h : tensor<3x2x8xf32>
}

// -----

spark.weight @n : tensor<8xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{weight @n has shape [8] but the op needs [16]}}
  %y = spark.rms_norm %x weight @n eps 1.0e-6 : tensor<?x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

spark.weight @n : tensor<16xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{result type must equal the input type}}
  %y = spark.rms_norm %x weight @n eps 1.0e-6 : tensor<?x16xf32> -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

spark.weight @n : tensor<16xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{epsilon must be positive, got 0}}
  %y = spark.rms_norm %x weight @n eps 0.0 : tensor<?x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

spark.weight @n : tensor<16xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{output_zero_point needs output_scale}}
  %y = spark.rms_norm %x weight @n eps 1.0e-6 {output_zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

spark.weight @n : tensor<16xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{output_scale must be positive}}
  %y = spark.rms_norm %x weight @n eps 1.0e-6 {output_scale = -1.0 : f64} : tensor<?x16xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

spark.weight @w : tensor<32x8xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{weight @w has shape [32, 8] but the op needs [32, 16]}}
  %y = spark.linear %x weight @w : tensor<?x16xf32> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<5x32xf32> {
  // expected-error @+1 {{input and result disagree in dimension 0 ([4, 16] vs [5, 32])}}
  %y = spark.linear %x weight @w : tensor<4x16xf32> -> tensor<5x32xf32>
  return %y : tensor<5x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_quant must be #spark.quant<bits = 8, group_size = 0 (per token) or 32, 64, 128, 256 (per block), symmetric = true> (int8 inputs), got #spark.quant<bits = 4, group_size = 0, symmetric = true>}}
  %y = spark.linear %x weight @w {input_quant = #spark.quant<bits = 4, group_size = 0, symmetric = true>} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @head : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_quant must be #spark.quant<bits = 8, group_size = 0 (per token) or 32, 64, 128, 256 (per block), symmetric = true> (int8 inputs), got #spark.quant<bits = 8, group_size = 0, symmetric = false>}}
  %y = spark.logits %x head @head {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = false>} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x48xf32>
func.func @f(%x: tensor<4x48xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_quant blocks of 32 do not divide the input width 48}}
  %y = spark.linear %x weight @w {input_quant = #spark.quant<bits = 8, group_size = 32, symmetric = true>} : tensor<4x48xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x64xf32>
func.func @f(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_scale (one static scale) does not combine with per-block input_quant}}
  %y = spark.linear %x weight @w {input_quant = #spark.quant<bits = 8, group_size = 32, symmetric = true>, input_scale = 0.5 : f32} : tensor<4x64xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_scale (a static int8 input scale) needs input_quant}}
  %y = spark.linear %x weight @w {input_scale = 0.5 : f32} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_range must be a positive finite number, got -2}}
  %y = spark.linear %x weight @w {input_range = -2.0 : f32} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @head : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_scale must be a positive finite number, got 0}}
  %y = spark.logits %x head @head {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_scale = 0.0 : f32} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{input and result must have the same rank (2 vs 1)}}
  %y = spark.linear %x weight @w : tensor<4x16xf32> -> tensor<32xf32>
  return %y : tensor<32xf32>
}

// -----

spark.weight @head : tensor<64x8xf32>
func.func @f(%x: tensor<?x16xf32>) -> tensor<?x64xf32> {
  // expected-error @+1 {{head @head has shape [64, 8] but the op needs [64, 16]}}
  %y = spark.logits %x head @head : tensor<?x16xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

spark.weight @head : tensor<64x16xf32>
func.func @f(%x: tensor<2x16xf32>) -> tensor<3x64xf32> {
  // expected-error @+1 {{input and result disagree in dimension 0}}
  %y = spark.logits %x head @head : tensor<2x16xf32> -> tensor<3x64xf32>
  return %y : tensor<3x64xf32>
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{has 2 sizes but 3 results}}
  %a, %b, %c = spark.split %x [32, 32] : tensor<?x64xf32> -> tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{split sizes must be positive, got 0}}
  %a, %b = spark.split %x [0, 64] : tensor<?x64xf32> -> tensor<?x0xf32>, tensor<?x64xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{split sizes add up to 48 but the input has 64 features}}
  %a, %b = spark.split %x [32, 16] : tensor<?x64xf32> -> tensor<?x32xf32>, tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{a result has 16 features, expected 32}}
  %a, %b = spark.split %x [32, 32] : tensor<?x64xf32> -> tensor<?x16xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{num_heads and head_dim must be positive}}
  %y = spark.rope %x, %p {num_heads = 0 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{rotary_dim must be positive and even, got 3}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 3 : i64, theta = 1.0e4 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{rotary_dim 10 exceeds head_dim 8}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 10 : i64, theta = 1.0e4 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{theta must be positive}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = -1.0 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{input has 32 features, expected 16}}
  %y = spark.rope %x, %p {num_heads = 2 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<2x32xf32>, %p: tensor<3xi32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{has 3 positions for 2 token rows}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64} : tensor<2x32xf32>, tensor<3xi32>
  return %y : tensor<2x32xf32>
}

// -----

func.func @f(%c: tensor<7x2x8xf32>, %k: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<7x2x8xf32> {
  // expected-error @+1 {{values has 32 features, expected 16}}
  %0 = spark.kv_write ring %k, %p into %c : tensor<?x32xf32>, tensor<?xi32> -> tensor<7x2x8xf32>
  return %0 : tensor<7x2x8xf32>
}

// -----

func.func @f(%c: tensor<7x2x8xf32>, %k: tensor<2x16xf32>, %p: tensor<1xi32>) -> tensor<7x2x8xf32> {
  // expected-error @+1 {{has 1 positions for 2 token rows}}
  %0 = spark.kv_write ring %k, %p into %c : tensor<2x16xf32>, tensor<1xi32> -> tensor<7x2x8xf32>
  return %0 : tensor<7x2x8xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{num_heads, num_kv_heads and head_dim must be positive}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 0 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x24xf32>, %c: tensor<64x3x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{num_heads 4 is not divisible by num_kv_heads 3}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 3 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x24xf32>, tensor<?x24xf32>, tensor<64x3x8xf32>, tensor<64x3x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{scale must be positive}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.0 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{a sliding layer needs a window}}
  %0 = spark.attention sliding linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{a full layer takes no window}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{window must be positive, got 0}}
  %0 = spark.attention sliding linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 0 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %d: tensor<64x2x8xbf16>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{key and value caches must have the same type}}
  %0 = spark.attention full linear %q, %k, %k, %c, %d, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xbf16>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x4x4xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{cache shape [64, 4, 4] does not match [slots, 2, 8]}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x4x4xf32>, tensor<64x4x4xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{a full layer cannot use a ring cache}}
  %0 = spark.attention full ring %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<6x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{a ring of 6 slots cannot hold the 7 past keys of window 8}}
  %0 = spark.attention sliding ring %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, window = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<6x2x8xf32>, tensor<6x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x16xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{query has 16 features, expected 32}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x32xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{key has 32 features, expected 16}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %v: tensor<?x32xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{value has 32 features, expected 16}}
  %0 = spark.attention full linear %q, %k, %v, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x32xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{result has 16 features, expected 32}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  return %0 : tensor<?x16xf32>
}

// -----

func.func @f(%q: tensor<3x32xf32>, %k: tensor<2x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<3xi32>) -> tensor<3x32xf32> {
  // expected-error @+1 {{query and key/value disagree in dimension 0}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<3x32xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<3xi32>) -> tensor<3x32xf32>
  return %0 : tensor<3x32xf32>
}

// -----

func.func @f(%q: tensor<3x32xf32>, %k: tensor<3x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<2xi32>) -> tensor<3x32xf32> {
  // expected-error @+1 {{has 2 positions for 3 token rows}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<3x32xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<2xi32>) -> tensor<3x32xf32>
  return %0 : tensor<3x32xf32>
}

// -----

func.func @f(%o: tensor<?x32xf32>, %g: tensor<?x4xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{num_heads must be positive}}
  %y = spark.head_gate %o, %g {num_heads = 0 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%o: tensor<?x32xf32>, %g: tensor<?x8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{gate has 8 features, expected 4}}
  %y = spark.head_gate %o, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x8xf32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%o: tensor<?x30xf32>, %g: tensor<?x4xf32>) -> tensor<?x30xf32> {
  // expected-error @+1 {{input width 30 is not a multiple of num_heads 4}}
  %y = spark.head_gate %o, %g {num_heads = 4 : i64} : tensor<?x30xf32>, tensor<?x4xf32>
  return %y : tensor<?x30xf32>
}

// -----

func.func @f(%o: tensor<2x32xf32>, %g: tensor<3x4xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{input and gate disagree in dimension 0}}
  %y = spark.head_gate %o, %g {num_heads = 4 : i64} : tensor<2x32xf32>, tensor<3x4xf32>
  return %y : tensor<2x32xf32>
}

// -----

func.func @f(%a: tensor<?x16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{result rank 1 differs from the broadcast rank 2}}
  %y = spark.add %a, %b : tensor<?x16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %y : tensor<16xf32>
}

// -----

func.func @f(%a: tensor<?x16xf32>, %b: tensor<8xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{operands [?, 16] and [8] do not broadcast}}
  %y = spark.mul %a, %b : tensor<?x16xf32>, tensor<8xf32> -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

func.func @f(%a: tensor<?x1xf32>, %b: tensor<16xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{result [?, 8] is not the broadcast of [?, 1] and [16]}}
  %y = spark.mul %a, %b : tensor<?x1xf32>, tensor<16xf32> -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{result keeps the reduced dimension with size 1}}
  %m = spark.mean %x : tensor<?x16xf32> -> tensor<?x16xf32>
  return %m : tensor<?x16xf32>
}

// -----

func.func @f(%x: tensor<4x16xf32>) -> tensor<3x1xf32> {
  // expected-error @+1 {{input and result disagree in dimension 0}}
  %m = spark.mean %x : tensor<4x16xf32> -> tensor<3x1xf32>
  return %m : tensor<3x1xf32>
}

// -----

func.func @f() -> tensor<1xf32> {
  // expected-error @+1 {{value must hold f32 elements, got 'f64'}}
  %c = spark.constant dense<1.0> : tensor<1xf64> : tensor<1xf32>
  return %c : tensor<1xf32>
}

// -----

func.func @f() -> tensor<2xf32> {
  // expected-error @+1 {{value shape [1] differs from the result shape [2]}}
  %c = spark.constant dense<1.0> : tensor<1xf32> : tensor<2xf32>
  return %c : tensor<2xf32>
}

// -----

func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xi8> {
  // expected-error @+1 {{scale must be positive, got 0}}
  %q = spark.quantize %x {scale = 0.0 : f64, zero_point = 0 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  return %q : tensor<?x16xi8>
}

// -----

func.func @f(%x: tensor<?x16xf32>) -> tensor<?x16xi8> {
  // expected-error @+1 {{zero_point 200 is outside 'i8' [-128, 127]}}
  %q = spark.quantize %x {scale = 0.5 : f64, zero_point = 200 : i64} : tensor<?x16xf32> -> tensor<?x16xi8>
  return %q : tensor<?x16xi8>
}

// -----

func.func @f(%x: tensor<?x16xui8>) -> tensor<?x16xf32> {
  // expected-error @+1 {{zero_point -1 is outside 'ui8' [0, 255]}}
  %d = spark.dequantize %x {scale = 0.5 : f64, zero_point = -1 : i64} : tensor<?x16xui8> -> tensor<?x16xf32>
  return %d : tensor<?x16xf32>
}

// -----

func.func @f(%x: tensor<?x16xi8>) -> tensor<?x8xf32> {
  // expected-error @+1 {{input and result shapes differ}}
  %d = spark.dequantize %x {scale = 0.5 : f64, zero_point = 0 : i64} : tensor<?x16xi8> -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// -----

spark.rope_table @t {theta = 1.0e4 : f64, rotary_dim = 8 : i64, positions = 64 : i64, block = 8 : i64}
func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{table @t has theta 1.000000e+04 and rotary_dim 8, the op needs theta 1.000000e+04 and rotary_dim 4}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 4 : i64, theta = 1.0e4 : f64, table = @t} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

func.func @f(%x: tensor<?x32xf32>, %p: tensor<?xi32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{table @missing does not name a spark.rope_table}}
  %y = spark.rope %x, %p {num_heads = 4 : i64, head_dim = 8 : i64, rotary_dim = 8 : i64, theta = 1.0e4 : f64, table = @missing} : tensor<?x32xf32>, tensor<?xi32>
  return %y : tensor<?x32xf32>
}

// -----

// expected-error @+1 {{rotary_dim must be positive and even, got 7}}
spark.rope_table @t {theta = 1.0e4 : f64, rotary_dim = 7 : i64, positions = 64 : i64, block = 8 : i64}

// -----

// expected-error @+1 {{positions and block must be positive}}
spark.rope_table @t {theta = 1.0e4 : f64, rotary_dim = 8 : i64, positions = 64 : i64, block = 0 : i64}

// -----

// expected-error @+1 {{theta must be positive}}
spark.rope_table @t {theta = 0.0 : f64, rotary_dim = 8 : i64, positions = 64 : i64, block = 8 : i64}

// -----

func.func @f(%q: tensor<?x32xf32>, %k: tensor<?x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<?xi32>, %g: tensor<?x8xf32>) -> tensor<?x32xf32> {
  // expected-error @+1 {{gate has 8 features, expected 4}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p gate %g {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<?x32xf32>, tensor<?x16xf32>, tensor<?x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<?xi32>, tensor<?x8xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

func.func @f(%q: tensor<3x32xf32>, %k: tensor<3x16xf32>, %c: tensor<64x2x8xf32>, %p: tensor<3xi32>, %g: tensor<2x4xf32>) -> tensor<3x32xf32> {
  // expected-error @+1 {{query and gate disagree in dimension 0}}
  %0 = spark.attention full linear %q, %k, %k, %c, %c, %p gate %g {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64, scale = 0.5 : f64} : (tensor<3x32xf32>, tensor<3x16xf32>, tensor<3x16xf32>, tensor<64x2x8xf32>, tensor<64x2x8xf32>, tensor<3xi32>, tensor<2x4xf32>) -> tensor<3x32xf32>
  return %0 : tensor<3x32xf32>
}

// -----

spark.weight @a : tensor<8x16xf32>
// expected-error @+1 {{part @missing does not name a spark.weight}}
spark.weight @ab : tensor<16x16xf32> {parts = [@a, @missing]}

// -----

spark.weight @a : tensor<8x16xf32>
spark.weight @b : tensor<8x8xf32>
// expected-error @+1 {{part @b of type 'tensor<8x8xf32>' does not stack into 'tensor<16x16xf32>'}}
spark.weight @ab : tensor<16x16xf32> {parts = [@a, @b]}

// -----

spark.weight @a : tensor<8x16xf32>
// expected-error @+1 {{parts have 16 rows in all, the weight 24}}
spark.weight @ab : tensor<24x16xf32> {parts = [@a, @a]}

// -----

spark.weight @a : tensor<16xf32>
// expected-error @+1 {{a weight made of parts must be 2-D}}
spark.weight @ab : tensor<32xf32> {parts = [@a, @a]}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{input_type must be bf16 or f16 (16-bit activations), got 'i8'}}
  %y = spark.linear %x weight @w {input_type = i8} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

spark.weight @w : tensor<32x16xf32>
func.func @f(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{has both input_quant (int8 inputs) and input_type (16-bit inputs); expected one}}
  %y = spark.linear %x weight @w {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>, input_type = bf16} : tensor<4x16xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

