/* microkernel_shapes.h - the shapes the hand-written matrix kernels take,
 * defined once: each kernel checks its call against them, and its target's
 * microkernelFor (X86Schedules.cpp, Arm64Target.cpp, HexagonTarget.cpp)
 * picks it only for a KernelSpec that fits. K is the input width (a
 * multiple of the kernel's depth), N the output width (a multiple of its
 * rows). Plain C (enumerators only): the C kernels and the C++ targets
 * include it alike. */
#ifndef SPARK_MICROKERNEL_SHAPES_H
#define SPARK_MICROKERNEL_SHAPES_H

enum spark_microkernel_shape {
  /* 4-bit weights: one f16 scale (and zero point) per this many codes, for
   * the int8 dot-product kernels of every target and the AVX-512 w4a16
   * kernels; the AVX2 ones also take SPARK_MK_SMALL_GROUP. */
  SPARK_MK_GROUP = 128,
  SPARK_MK_SMALL_GROUP = 64,
  /* Rows of a decode tile: N a multiple of it for every kernel below but
   * the AMX, bf16-dot and HVX ones. */
  SPARK_MK_ROWS = 4,
  /* x86: AMX tiles (bf16: 32 deep; int8: 64 deep; both 32 rows a step). */
  SPARK_MK_AMX_BF16_DEPTH = 32,
  SPARK_MK_AMX_INT8_DEPTH = 64,
  SPARK_MK_AMX_ROWS = 32,
  /* x86: AVX512_VNNI w8a8 (vpdpbusd over 64 bytes), AVX512_BF16 dot
   * products (bf16 and w8a16 weights). */
  SPARK_MK_VNNI_DEPTH = 64,
  SPARK_MK_BF16_DEPTH = 32,
  /* x86: the AVX2 kernels (w8a8; w8a16 and bf16). */
  SPARK_MK_AVX2_INT8_DEPTH = 32,
  SPARK_MK_AVX2_DEPTH = 16,
  /* arm64: sdot w8a8. */
  SPARK_MK_SDOT_DEPTH = 16,
  /* hexagon: HVX vrmpy over 128-byte vectors. */
  SPARK_MK_VRMPY_DEPTH = 128,
};

#endif /* SPARK_MICROKERNEL_SHAPES_H */
