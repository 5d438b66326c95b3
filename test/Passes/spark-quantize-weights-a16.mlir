// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a16 activations=bf16" | FileCheck %s --check-prefix=BF16
// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a16 activations=f16" | FileCheck %s --check-prefix=F16
// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a16 activations=f32" | FileCheck %s --check-prefix=F32
// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a16" | FileCheck %s --check-prefix=F32

// 16-bit activations: every product with a quantized weight (the tied head
// included) rounds its inputs to the type; the gate keeps f32 inputs; f32
// (the pass's default) sets nothing.
// BF16-LABEL: func @step
// BF16: spark.linear %{{.+}} weight @q {input_type = bf16}
// BF16: spark.linear %{{.+}} weight @g :
// BF16: spark.logits %{{.+}} head @E {input_type = bf16}
// F16-LABEL: func @step
// F16: spark.linear %{{.+}} weight @q {input_type = f16}
// F16: spark.linear %{{.+}} weight @g :
// F16: spark.logits %{{.+}} head @E {input_type = f16}
// F32-NOT: input_type
spark.weight @E : tensor<64x256xbf16>
spark.weight @q : tensor<32x256xbf16>
spark.weight @g : tensor<4x256xbf16>

func.func @step(%ids: tensor<?xi32>, %a: tensor<?x32xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %x = spark.embed %ids table @E : tensor<?xi32> -> tensor<?x256xf32>
  %q = spark.linear %x weight @q : tensor<?x256xf32> -> tensor<?x32xf32>
  %g = spark.linear %x weight @g : tensor<?x256xf32> -> tensor<?x4xf32>
  %o = spark.head_gate %a, %g {num_heads = 4 : i64} : tensor<?x32xf32>, tensor<?x4xf32>
  %l = spark.logits %x head @E : tensor<?x256xf32> -> tensor<?x64xf32>
  return %l, %q, %o : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}
