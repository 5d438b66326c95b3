// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a16 group-size=64" | FileCheck %s --check-prefix=G64
// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=head=int8,*.down=int4:32,keep=none activations=bf16" | FileCheck %s --check-prefix=RECIPE
// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a8 recipe=*.down=int4,*.down=int4:256" | FileCheck %s --check-prefix=A8
// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a8 activation-block=64" | FileCheck %s --check-prefix=BLOCK
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w8a16 activation-block=64" 2>&1 | FileCheck %s --check-prefix=BLOCKA16
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w8a8 activation-block=48" 2>&1 | FileCheck %s --check-prefix=BLOCK48
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 group-size=48" 2>&1 | FileCheck %s --check-prefix=BADGROUP
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=nothing*=int8" 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=head=int3" 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=head" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=head=int4:100" 2>&1 | FileCheck %s --check-prefix=RULEGROUP
// RUN: spark-opt %s --spark-quantize-weights="scheme=w4a8 recipe=head=int6,*.down=int6:32" | FileCheck %s --check-prefix=SIX
// RUN: spark-opt %s --spark-quantize-weights="scheme=w8a16 group-size=64 recipe=head=int6,narrow=int6" 2>&1 | FileCheck %s --check-prefix=SIXA16
// RUN: not spark-opt %s --spark-quantize-weights="scheme=w4a16 recipe=head=int6:48" 2>&1 | FileCheck %s --check-prefix=SIXGROUP

// --group-size sets the 4-bit groups; a matrix whose rows are not whole
// groups keeps int8.
// G64: spark.weight @head : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 64, symmetric = false>}
// G64-NEXT: spark.weight @layer.down : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 64, symmetric = false>}
// G64-NEXT: spark.weight @keep : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 64, symmetric = false>}
// G64-NEXT: spark.weight @narrow : tensor<64x96xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}

// The recipe overrides per weight (glob on the name, the last matching rule
// wins); `none` leaves the weight and its product unquantized.
// RECIPE: spark.weight @head : tensor<64x256xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// RECIPE-NEXT: spark.weight @layer.down : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 32, symmetric = false>}
// RECIPE-NEXT: spark.weight @keep : tensor<64x256xf32>{{$}}
// RECIPE-NEXT: spark.weight @narrow : tensor<64x96xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// RECIPE: spark.linear %arg0 weight @head {input_type = bf16}
// RECIPE: spark.linear %arg0 weight @layer.down {input_type = bf16}
// RECIPE: spark.linear %arg0 weight @keep :

// With int8 inputs a 4-bit override is symmetric (the w4a8 codes); groups
// that do not divide the rows fall back to int8.
// A8: spark.weight @head : tensor<64x256xi8>
// A8-NEXT: spark.weight @layer.down : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 256, symmetric = true>}
// A8: spark.linear %arg0 weight @layer.down {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}

// activation-block: int8 inputs with one scale per token and block of 64
// inputs; a product whose inputs are not whole blocks keeps per-token scales.
// BLOCK: spark.linear %arg0 weight @head {input_quant = #spark.quant<bits = 8, group_size = 64, symmetric = true>}
// BLOCK: spark.linear %arg1 weight @narrow {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// BLOCKA16: spark-quantize-weights: activation-block 64 needs dynamic int8 activations (w8a8, w4a8) and a block of 32, 64, 128 or 256
// BLOCK48: spark-quantize-weights: activation-block 48 needs dynamic int8 activations

// int6 (the scheme's group) and int6:G: asymmetric 6-bit groups, with int8
// inputs too; rows that are not whole groups keep int8.
// SIX: spark.weight @head : tensor<64x256xi6> {quant = #spark.quant<bits = 6, group_size = 128, symmetric = false>}
// SIX-NEXT: spark.weight @layer.down : tensor<64x256xi6> {quant = #spark.quant<bits = 6, group_size = 32, symmetric = false>}
// SIX-NEXT: spark.weight @keep : tensor<64x256xi4> {quant = #spark.quant<bits = 4, group_size = 128, symmetric = true>}
// SIX: spark.linear %arg0 weight @head {input_quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// SIXA16: warning: spark-quantize-weights: narrow has rows of 96 values, not a multiple of the 6-bit group of 64: kept at int8 per output channel (8 bits per weight)
// SIXA16: spark.weight @head : tensor<64x256xi6> {quant = #spark.quant<bits = 6, group_size = 64, symmetric = false>}
// SIXA16-NEXT: spark.weight @layer.down : tensor<64x256xi8>
// SIXA16-NEXT: spark.weight @keep : tensor<64x256xi8>
// SIXA16-NEXT: spark.weight @narrow : tensor<64x96xi8> {quant = #spark.quant<bits = 8, group_size = 0, symmetric = true>}
// SIXGROUP: spark-quantize-weights: recipe rule 'head=int6:48': the group of int6:G must be 32, 64, 128 or 256

// BADGROUP: spark-quantize-weights: group-size 48 is not supported; expected 32, 64, 128 or 256
// UNUSED: spark-quantize-weights: recipe rule 'nothing*=int8' matches no quantized weight; names are those of the fused IR
// PRECISION: spark-quantize-weights: recipe rule 'head=int3': unknown precision 'int3'; expected int8, int6, int6:G, int4, int4:G or none
// SYNTAX: spark-quantize-weights: recipe rule 'head': expected PATTERN=PRECISION
// RULEGROUP: spark-quantize-weights: recipe rule 'head=int4:100': the group of int4:G must be 32, 64, 128 or 256
spark.weight @head : tensor<64x256xf32>
spark.weight @layer.down : tensor<64x256xf32>
spark.weight @keep : tensor<64x256xf32>
spark.weight @narrow : tensor<64x96xf32>

func.func @step(%x: tensor<?x256xf32>, %y: tensor<?x96xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %0 = spark.linear %x weight @head : tensor<?x256xf32> -> tensor<?x64xf32>
  %1 = spark.linear %x weight @layer.down : tensor<?x256xf32> -> tensor<?x64xf32>
  %2 = spark.linear %x weight @keep : tensor<?x256xf32> -> tensor<?x64xf32>
  %3 = spark.linear %y weight @narrow : tensor<?x96xf32> -> tensor<?x64xf32>
  return %0, %1, %2, %3 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}
