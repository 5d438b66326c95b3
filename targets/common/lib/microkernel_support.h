/* microkernel_support.h - what the hand-written linear kernels of every
 * target share: the shape rules of the Halide kernel interface they stand in
 * for, and int8 input quantization with the same rule as the Halide kernels
 * (kernels/lib/Kernels.cpp): scale = the static input_scale, or per token
 * max |x| / 127; code = clamp(round-to-nearest-even(x / scale), -127, 127). */
#ifndef SPARK_MICROKERNEL_SUPPORT_H
#define SPARK_MICROKERNEL_SUPPORT_H

#include "HalideRuntime.h"
#include "microkernel_shapes.h"
#include "scratch.h"
#include "spark/model_abi.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* Whether a linear call's buffers fit a kernel: x f32 [K, T], w [K / pack, N]
 * (pack 1: a byte per weight, 2: two 4-bit codes a byte) with dense rows,
 * out f32 [N, T], K a multiple of k_multiple and N of n_multiple. */
static inline int spark_linear_fits(const halide_buffer_t *x,
                                    const halide_buffer_t *w,
                                    const halide_buffer_t *out, int pack,
                                    int k_multiple, int n_multiple) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  return K % k_multiple == 0 && N % n_multiple == 0 &&
         w->dim[0].extent == K / pack && w->dim[1].stride == K / pack &&
         out->dim[0].extent == N && out->dim[1].extent == T;
}

/* Whether per-group side tensors (scales, zeros: [K / group, N]) are dense. */
static inline int spark_groups_fit(const halide_buffer_t *x,
                                   const halide_buffer_t *side, int group) {
  const int groups = x->dim[0].extent / group;
  return side->dim[0].extent == groups && side->dim[1].stride == groups;
}

/* Whether a 4-bit linear call's buffers fit a kernel that reads rows by
 * their strides: x f32 [K, T], w u8 [K/2, N], scales (and zeros, unless
 * NULL) f16 [K/group, N], out f32 [N, T], K a multiple of `group` and N of
 * n_multiple. The rows are dense ([N][K/2] codes, [N][K/group] scales and
 * zero points) or grouped (SPARK_LAYOUT_GROUPED_ROWS: each row's scales and
 * zero points in the same row as its codes, one row stride, a multiple of 64
 * bytes); either way the zero points, if any, are as far apart as the
 * scales. */
static inline int spark_grouped_rows_fit(const halide_buffer_t *x,
                                         const halide_buffer_t *w,
                                         const halide_buffer_t *scales,
                                         const halide_buffer_t *zeros,
                                         const halide_buffer_t *out, int group,
                                         int n_multiple) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  const int groups = K / group, stride = w->dim[1].stride;
  const int s_stride = scales->dim[1].stride;
  const int dense = stride == K / 2 && s_stride == groups;
  const int grouped = stride >= K / 2 + (zeros ? 4 : 2) * groups &&
                      stride % 64 == 0 && 2 * s_stride == stride;
  return K % group == 0 && N % n_multiple == 0 && w->dim[0].extent == K / 2 &&
         out->dim[0].extent == N && out->dim[1].extent == T &&
         scales->dim[0].extent == groups && (dense || grouped) &&
         (!zeros ||
          (zeros->dim[0].extent == groups && zeros->dim[1].stride == s_stride));
}

/* Whether x, 6-bit weights w (rows of spark_six_bit_row_bytes(K) bytes, any
 * stride), their f16
 * scales and zero points (dense [N][K / group], one stride) and out fit a 6-bit
 * microkernel: K a multiple of 128 (whole blocks of top bits,
 * spark_six_bit_top), groups of `group`. */
static inline int spark_six_bit_rows_fit(const halide_buffer_t *x,
                                         const halide_buffer_t *w,
                                         const halide_buffer_t *scales,
                                         const halide_buffer_t *zeros,
                                         const halide_buffer_t *out,
                                         int group) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  const int groups = K / group;
  return K % 128 == 0 && K % group == 0 && w->dim[0].extent == K / 2 + K / 4 &&
         w->dim[1].stride >= w->dim[0].extent && out->dim[0].extent == N &&
         out->dim[1].extent == T && scales->dim[0].extent == groups &&
         zeros->dim[0].extent == groups &&
         zeros->dim[1].stride == scales->dim[1].stride &&
         scales->dim[1].stride >= groups;
}

/* The sum of each group of `group` int8 codes of a row of K, into
 * sums[0..K/group) (exact in f32: at most 127 x group). */
static inline void spark_group_code_sums(const int8_t *row, int K, int group,
                                         float *sums) {
  for (int g = 0; g < K / group; ++g) {
    int32_t sum = 0;
    for (int i = 0; i < group; ++i)
      sum += row[g * group + i];
    sums[g] = (float)sum;
  }
}

/* Writes the K codes of x with `scale` (> 0: a static, calibrated scale), or
 * else with the row's own, max |x| / 127; returns the scale used. */
static inline float spark_quantize_row(const float *x, int K, float scale,
                                       int8_t *codes) {
  if (!(scale > 0.0f)) {
    float largest = 0.0f;
    for (int k = 0; k < K; ++k)
      largest = fmaxf(largest, fabsf(x[k]));
    scale = largest / 127.0f;
  }
  const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int k = 0; k < K; ++k) {
    float q = nearbyintf(x[k] * inverse);
    codes[k] = (int8_t)(q < -127.0f ? -127.0f : q > 127.0f ? 127.0f : q);
  }
  return scale;
}

/* Quantizes the T rows of x (f32 [K, T], any row stride) into *codes
 * ([T][K], 128-byte aligned) and *scales ([T]), with the kernel's
 * input_scale argument (> 0: static; otherwise per token). Returns 0, or -1
 * with nothing allocated. Free both with spark_scratch_put(). */
static inline int spark_quantize_rows(const halide_buffer_t *x,
                                      float input_scale, int8_t **codes,
                                      float **scales) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  *codes = NULL;
  *scales =
      (float *)spark_scratch_alloc(sizeof(float) * (size_t)(T > 0 ? T : 1));
  if (!*scales || spark_scratch_get((void **)codes,
                                    (size_t)(T > 0 ? T : 1) * (size_t)K) != 0) {
    spark_scratch_put(*scales);
    *scales = NULL;
    *codes = NULL;
    return -1;
  }
  for (int t = 0; t < T; ++t)
    (*scales)[t] = spark_quantize_row((const float *)x->host + (size_t)t * xs,
                                      K, input_scale, *codes + (size_t)t * K);
  return 0;
}

/* Decode streams each weight row once, from memory, one row at a time: the
 * line `ahead` bytes past `line` is requested before `line` is used.
 * Distances measured on the 1.7b, one thread, tg64:
 *   AMD EPYC Zen 3, avx2 w4a8: none 16.0 tok/s, 256 B 16.1, 1 KiB 18.9,
 *     1.5 KiB 20.6, 2 KiB 20.0, 4 KiB 18.4 (avx2_linear.c: 1.5 KiB);
 *   AMD EPYC Zen 5, avx512bf16 w4a16: 1.5 KiB 79% of the roofline, 4 KiB
 *     87%, 8 KiB 79%;
 *   Intel Xeon (AMX), avx512bf16 w4a16, the pack in 2 MiB page-cache folios,
 *     2 threads: 4 KiB 24.6 tok/s, 8 KiB 25.4, 12 KiB 27.1-28.6, 16 KiB
 *     26.7-28.1, 24 KiB 27.5-27.8, 32 KiB 26.0-26.6 (the AVX-512 kernels:
 *     12 KiB). */
enum { kSparkPrefetchAvx2 = 1536, kSparkPrefetchAvx512 = 12288 };

/* The one-row-at-a-time AVX-512 decode rows (w8a8, w4a8, w8a16, bf16) on
 * AMD cores: 6 KiB. AMD EPYC Zen 5 (2-core VM, 2026-12-03), 1.7b tg64 A/B
 * against 12 KiB, builds run in turn: one thread 1.04-1.24x (w8a8, 10
 * rounds), 1.05-1.09x (w4a8), 1.01-1.07x (w8a16); two threads 0.94-1.14x
 * (1.01x on average). The w4a16 tiles keep kSparkPrefetchAvx512 (two threads
 * 0.94-0.99x with 6 KiB). */
enum { kSparkPrefetchAvx512Amd = 6144 };

/* The w8a8 decode rows on AMD Zen 4: 3 KiB. Their two vpdpbusd a line (the
 * second takes off the +128 of the input codes) read less of the stream at
 * 6 KiB than rows of one instruction a line, where the w4a8 and w8a16 rows
 * want 6 KiB. AMD EPYC Zen 4 (2-core VM, 2026-12-06), spark-kernelbench, the
 * five matrices, one thread, % of the stream: w8a8 at 6 KiB 67-76%, 4 KiB
 * 80-86%, 3 KiB 87-96%, 2 KiB 88-98%; w4a8 at 6 KiB 81-96%, 3 KiB 47-65%;
 * w8a16 at 6 KiB 84-93%, 3 KiB 59-66%. Zen 5 keeps 6 KiB (its w8a8 1.7b
 * decode was slower at 3 KiB than at 6 when that was chosen). */
enum { kSparkPrefetchW8a8Zen4 = 3072 };

#if defined(__x86_64__) || defined(__i386__)
/* The distance the AVX-512 decode rows prefetch at on this CPU, taken once
 * per call into the kernel's job. */
static inline int spark_prefetch_avx512_rows(void) {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") ? kSparkPrefetchAvx512Amd
                                 : kSparkPrefetchAvx512;
}

/* The same for the w8a8 rows: kSparkPrefetchW8a8Zen4 on AMD family 0x19
 * (Zen 3 and Zen 4; those with AVX-512, the only ones to run these rows, are
 * Zen 4). CPUID is asked once (in a VM each CPUID is a trip to the
 * hypervisor); racing first callers store the same value. */
static inline int spark_prefetch_w8a8_rows(void) {
  static int known; /* 0: not asked yet */
  int ahead = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (ahead)
    return ahead;
  ahead = spark_prefetch_avx512_rows();
  unsigned eax, ebx, ecx, edx;
  if (ahead == kSparkPrefetchAvx512Amd &&
      __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
      ((eax >> 8) & 0xF) + ((eax >> 20) & 0xFF) == 0x19)
    ahead = kSparkPrefetchW8a8Zen4;
  __atomic_store_n(&known, ahead, __ATOMIC_RELAXED);
  return ahead;
}
#endif

/* Into every cache level (prefetcht0): the AVX2 kernels. */
static inline void spark_prefetch_ahead(const void *line, int ahead) {
  __builtin_prefetch((const char *)line + ahead, 0, 3);
}

/* Into L2 and the last level, not L1 (prefetcht1): the AVX-512 kernels. A
 * prefetch into L1 holds one of its few fill buffers until the line
 * arrives; one into L2 does not, so more lines are on their way at once.
 * Intel Xeon with AMX (2-core VM, 2026-12-01), 1.7b tg64 at 4 KiB, % of the
 * same run's roofline, 1 / 2 threads: w8a8 79% / 77% into L1, 97% / 98%
 * into L2; w8a16 70% / 73% -> 93% / 95%; w4a8 94% / 86% -> 96% / 87%;
 * w4a16 83% / 72% -> 85% / 80%. */
static inline void spark_prefetch_l2_ahead(const void *line, int ahead) {
  __builtin_prefetch((const char *)line + ahead, 0, 2);
}

/* x rounded to bfloat16 (to nearest, ties to even), as f32: what the Halide
 * kernels' cast to bfloat16 gives. NaN and infinity pass unchanged. */
static inline float spark_round_bf16(float x) {
  union {
    float f;
    uint32_t u;
  } v = {x};
  if ((v.u & 0x7f800000u) != 0x7f800000u)
    v.u = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) & 0xffff0000u;
  return v.f;
}

/* x rounded to f16 (to nearest, ties to even), as f32: what a conversion to
 * f16 and back gives, without f16 instructions or routines (Hexagon v66 has
 * none, its small libc no conversion): 11 significant bits from 2^-14 up,
 * steps of 2^-24 below (f16's subnormals), infinity from 65520 up. NaN
 * and infinity pass unchanged. */
static inline float spark_round_f16(float x) {
  union {
    float f;
    uint32_t u;
  } v = {x};
  const uint32_t magnitude = v.u & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) /* infinity, NaN */
    return x;
  if (magnitude >= 0x477ff000u) /* 65520: the tie above 65504 rounds up */
    v.u = (v.u & 0x80000000u) | 0x7f800000u;
  else if (magnitude >= 0x38800000u) /* 2^-14: normal f16 */
    v.u = (v.u + 0xfffu + ((v.u >> 13) & 1u)) & ~0x1fffu;
  else /* subnormal f16: a multiple of 2^-24 (both products exact) */
    v.f = nearbyintf(x * 0x1p24f) * 0x1p-24f;
  return v.f;
}

/* 2^e for e in [-126, 127], from its bits (Hexagon's small libc has no
 * ldexpf). */
static inline float spark_pow2f(int e) {
  union {
    uint32_t u;
    float f;
  } v = {(uint32_t)(e + 127) << 23};
  return v.f;
}

/* The power of two of a group whose largest magnitude is `largest`: the e of
 * largest / 32767 = m x 2^e with m in [0.5, 1) (frexpf's; 2^e >= largest /
 * 32767), at least -126, so that 2^-e stays finite for groups of tiny values
 * (all below 2^-112: they keep 14 bits); 0 when largest / 32767 is 0. Read from
 * the float's exponent field, as frexpf would give it. */
static inline int spark_int16_exponent(float largest) {
  union {
    float f;
    uint32_t u;
  } v = {largest / 32767.0f};
  if (!(v.f > 0.0f)) /* frexpf of 0 (largest 0, or below 2^-135) */
    return 0;
  const int exponent = (int)((v.u >> 23) & 0xff) - 126; /* subnormal: -126 */
  return exponent < -126 ? -126 : exponent > 126 ? 126 : exponent;
}

/* The inputs of one scaling group (G rounded bf16 or f16 values v) as int16
 * multiples of a power of two, 2^spark_int16_exponent(max |v|), into q; returns
 * the power of two and, in *total, the sum of the int16 values. Every value
 * within 2^8 (bf16) or 2^5 (f16) of the group's largest is exact, a smaller
 * one is off by at most half the power of two. */
static inline float spark_int16_group(const float *v, int G, int16_t *q,
                                      int32_t *total) {
  float largest = 0.0f;
  for (int i = 0; i < G; ++i)
    largest = fmaxf(largest, fabsf(v[i]));
  const int exponent = spark_int16_exponent(largest);
  const float inverse = spark_pow2f(-exponent);
  int32_t sum = 0;
  for (int i = 0; i < G; ++i) {
    q[i] = (int16_t)nearbyintf(v[i] * inverse);
    sum += q[i];
  }
  *total = sum;
  return spark_pow2f(exponent);
}

/* Reorders each `span` consecutive codes of row[0, K) into the even-index
 * codes, then the odd-index ones: the order of the low and high nibbles of
 * span / 2 bytes of packed 4-bit weights. span <= 256. */
static inline void spark_split_even_odd(int8_t *row, int K, int span) {
  int8_t chunk[256];
  for (int c = 0; c + span <= K; c += span) {
    for (int i = 0; i < span; ++i)
      chunk[i] = row[c + i];
    for (int i = 0; i < span; ++i)
      row[c + (i % 2) * (span / 2) + i / 2] = chunk[i];
  }
}

#endif
