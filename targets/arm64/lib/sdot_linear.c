/* sdot_linear.c - NEON dot-product kernels for int8-activation builds (w8a8,
 * w4a8) and for 16-bit-activation builds (w8a16, w4a16 with its 4- and 6-bit
 * groups) on arm64.
 *
 * Same interface as the Halide linear kernels with int8 inputs:
 *   w8a8: (x f32 [K, T], w s8 [K, N], scales f32 [N], out f32 [N, T])
 *   w4a8: (x f32 [K, T], w u8 [K/2, N] two 4-bit codes a byte, low nibble
 *          first, scales f16 [K/128, N], out f32 [N, T])
 * Each call quantizes every input row to symmetric int8 codes with its own
 * scale, max |x| / 127 (microkernel_support.h, the rule of the Halide kernels);
 * every sdot multiplies 16 signed byte pairs into 4 int32 lanes.
 *   w8a8: weight rows straight from the pack times the input codes; exact
 *         int32 sums, scaled once per row and token.
 *   w4a8: each 16-byte load holds 32 codes; low nibbles are the even
 *         elements, high nibbles the odd ones; the codes 0..15 are signed
 *         bytes as they are, the -8 comes off through the group's sum of
 *         input codes (each sum starts at -8 x it).
 *         The input codes of each group are reordered once per call into
 *         [even 16 | odd 16] per 32 elements to meet them. Each group's int32
 *         sums are scaled by its f16 scale into f32 accumulators.
 *   w6a8: 6-bit asymmetric groups (the int6 recipe rule; w u8 [3K/4, N]:
 *         each row's K/2 bytes of low nibbles, then K/4 bytes of top bits,
 *         spark_six_bit_top in model_abi.h; scales and zeros f16 [K/128,
 *         N], then the input scale): each 16 nibble bytes as in w4a8, each
 *         16 bytes of top bits serve nibble bytes i and i+32 of a group
 *         (bits 0-3 and 4-7), shifted to bits 4-5 beside the nibbles:
 *         codes 0..63 as signed bytes; the zero point comes off as scale x
 *         zero x the group's sum of input codes.
 *   w4a16, w6a16: (x f32 [K, T], w as w4a8 (dense or grouped rows) or w6a8,
 *         scales and zeros f16 [K/128, N], out f32 [N, T]): the inputs
 *         rounded to f16 (bf16) and taken per group of 128 as int16
 *         multiples of a power of two (spark_int16_group, as on x86), split
 *         into low bytes (unsigned, udot with the codes) and high bytes
 *         (signed, sdot); the zero point comes off as for w6a8.
 *   w8a16: (x f32 [K, T], w s8 [K, N], scales f32 [N], out f32 [N, T]):
 *         the inputs as for w4a16, in their order; sdot of the codes with
 *         the high bytes, udot of the codes plus 128 with the low bytes,
 *         each group's sums started at -128 x its sum of low bytes.
 * Each task takes a block of rows; 4 rows x 4 tokens at a time (16
 * accumulators in registers), the last tokens and decode 4 rows x 1 (w8a16,
 * w4a16, w6a16: 4 rows x 1 token, every token in turn).
 * Needs K % 16 == 0 (w8a8) or K % 128 == 0 (the others), and N % 4 == 0.
 * Compiled with -march=armv8.2-a+dotprod; entered only when the kernel's
 * hwcaps report ASIMDDP. */
#include "HalideRuntime.h"
#include "microkernel_support.h"

#include <arm_neon.h>
#include <stdint.h>
#include <stdlib.h>

enum { kRowsPerTask = 64, kGroup = SPARK_MK_GROUP };

typedef struct sdot_job {
  const int8_t *w8;             /* w8a8: [N][K] */
  const uint8_t *w4;            /* w4a8: [N][K/2] */
  const float *scales;          /* w8a8: [N] */
  const __fp16 *group_scales;   /* w4a8: [N][K/128] */
  const int8_t *codes;          /* [T][K] (w4a8: reordered per 32) */
  const float *token_scales;    /* [T] */
  float *out;                   /* [T][out_stride] */
  int K, N, T, out_stride;
  /* w6a8: rows `w_stride` bytes apart, f16 zero points as the scales (rows
   * `s_stride` apart); per token and group, w4a8, w6a8: the sum of the input
   * codes; w4a16, w6a16: what the int16 inputs stand for; w8a16: the sum of
   * their low bytes */
  const __fp16 *group_zeros;
  const float *group_sums; /* [T][K/128] */
  int w_stride, s_stride;
  /* w4a16, w6a16, w8a16: the inputs as int16 (prepare_int16), and per
   * token and group the power of two they are multiples of */
  const uint8_t *x16;
  const float *x16_scales; /* [T][K/128] */
} sdot_job;

/* Rows n..n+3 times tokens t0..t0+TT-1. Always inlined with a constant TT
 * (4, or 1 for the last tokens and decode), so the loops over rows and
 * tokens unroll and the accumulators stay in registers. */
#define SPARK_BLOCK static inline __attribute__((always_inline)) void

SPARK_BLOCK w8a8_block(const sdot_job *job, int n, int t0, const int TT) {
  const int K = job->K;
  int32x4_t acc[4][4];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = vdupq_n_s32(0);
  for (int k = 0; k < K; k += 16) {
    int8x16_t wv[4];
    for (int r = 0; r < 4; ++r)
      wv[r] = vld1q_s8(job->w8 + (size_t)(n + r) * K + k);
    for (int t = 0; t < TT; ++t) {
      int8x16_t xv = vld1q_s8(job->codes + (size_t)(t0 + t) * K + k);
      for (int r = 0; r < 4; ++r)
        acc[r][t] = vdotq_s32(acc[r][t], wv[r], xv);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
          (float)vaddvq_s32(acc[r][t]) * job->scales[n + r] *
          job->token_scales[t0 + t];
}

SPARK_BLOCK w4a8_block(const sdot_job *job, int n, int t0, const int TT) {
  const int K = job->K, groups = K / kGroup;
  const uint8x16_t low = vdupq_n_u8(0x0f);
  float32x4_t acc[4][4];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = vdupq_n_f32(0.0f);
  for (int g = 0; g < groups; ++g) {
    /* The sums start at -8 x the group's sum of input codes (-2 x it in
     * each lane), so that the nibbles 0..15 multiply the codes as they are
     * and the lanes add up to the sum over (nibble - 8) x code, exactly. */
    int32x4_t dot[4][4];
    for (int t = 0; t < TT; ++t) {
      const int32x4_t start = vdupq_n_s32(
          -2 * (int32_t)job->group_sums[(size_t)(t0 + t) * groups + g]);
      for (int r = 0; r < 4; ++r)
        dot[r][t] = start;
    }
    /* Rolled: unrolled, GCC 12 spills the 4 x 4 tile's sums. */
#pragma GCC unroll 1
    for (int c = 0; c < kGroup; c += 32) {
      int8x16_t even[4], odd[4];
      for (int r = 0; r < 4; ++r) {
        uint8x16_t bytes = vld1q_u8(job->w4 + (size_t)(n + r) * (K / 2) +
                                    (size_t)(g * kGroup + c) / 2);
        even[r] = vreinterpretq_s8_u8(vandq_u8(bytes, low));
        odd[r] = vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4));
      }
      for (int t = 0; t < TT; ++t) {
        const int8_t *x = job->codes + (size_t)(t0 + t) * K + g * kGroup + c;
        int8x16_t xe = vld1q_s8(x), xo = vld1q_s8(x + 16);
        for (int r = 0; r < 4; ++r)
          dot[r][t] = vdotq_s32(vdotq_s32(dot[r][t], even[r], xe), odd[r], xo);
      }
    }
    for (int r = 0; r < 4; ++r) {
      const float scale = (float)job->group_scales[(size_t)(n + r) * groups + g];
      for (int t = 0; t < TT; ++t)
        acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(dot[r][t]), scale);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
          vaddvq_f32(acc[r][t]) * job->token_scales[t0 + t];
}

SPARK_BLOCK w6a8_block(const sdot_job *job, int n, int t0, const int TT) {
  const int K = job->K, groups = K / kGroup;
  const uint8x16_t low = vdupq_n_u8(0x0f), bits45 = vdupq_n_u8(0x30);
  float32x4_t acc[4][4];
  float offset[4][4];
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t) {
      acc[r][t] = vdupq_n_f32(0.0f);
      offset[r][t] = 0.0f;
    }
  for (int g = 0; g < groups; ++g) {
    int32x4_t dot[4][4];
    for (int r = 0; r < 4; ++r)
      for (int t = 0; t < TT; ++t)
        dot[r][t] = vdupq_n_s32(0);
    for (int q = 0; q < 4; ++q) { /* nibble bytes 16q..16q+15 of the group */
      int8x16_t even[4], odd[4];
      for (int r = 0; r < 4; ++r) {
        const uint8_t *row = job->w4 + (size_t)(n + r) * job->w_stride;
        const uint8x16_t bytes = vld1q_u8(row + (size_t)g * 64 + 16 * q);
        const uint8x16_t tops =
            vld1q_u8(row + K / 2 + (size_t)g * 32 + 16 * (q % 2));
        /* the tops of nibble bytes 0-31 in bits 0-3, of 32-63 in 4-7 */
        const uint8x16_t top_even = q < 2 ? vshlq_n_u8(tops, 4) : tops;
        const uint8x16_t top_odd =
            q < 2 ? vshlq_n_u8(tops, 2) : vshrq_n_u8(tops, 2);
        even[r] = vreinterpretq_s8_u8(
            vorrq_u8(vandq_u8(bytes, low), vandq_u8(top_even, bits45)));
        odd[r] = vreinterpretq_s8_u8(
            vorrq_u8(vshrq_n_u8(bytes, 4), vandq_u8(top_odd, bits45)));
      }
      for (int t = 0; t < TT; ++t) {
        const int8_t *x =
            job->codes + (size_t)(t0 + t) * K + g * kGroup + 32 * q;
        int8x16_t xe = vld1q_s8(x), xo = vld1q_s8(x + 16);
        for (int r = 0; r < 4; ++r)
          dot[r][t] = vdotq_s32(vdotq_s32(dot[r][t], even[r], xe), odd[r], xo);
      }
    }
    for (int r = 0; r < 4; ++r) {
      const size_t at = (size_t)(n + r) * job->s_stride + g;
      const float scale = (float)job->group_scales[at];
      const float zero = (float)job->group_zeros[at];
      for (int t = 0; t < TT; ++t) {
        acc[r][t] = vfmaq_n_f32(acc[r][t], vcvtq_f32_s32(dot[r][t]), scale);
        offset[r][t] +=
            scale * zero * job->group_sums[(size_t)(t0 + t) * groups + g];
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < TT; ++t)
      job->out[(size_t)(t0 + t) * job->out_stride + n + r] =
          (vaddvq_f32(acc[r][t]) - offset[r][t]) * job->token_scales[t0 + t];
}

/* Four f16 (f32) values from p, the last 4 - count of them zero. */
static inline float32x4_t four_halves(const __fp16 *p, int count) {
  if (count == 4)
    return vcvt_f32_f16(vld1_f16(p));
  __fp16 part[4] = {0, 0, 0, 0};
  for (int i = 0; i < count; ++i)
    part[i] = p[i];
  return vcvt_f32_f16(vld1_f16(part));
}

static inline float32x4_t four_floats(const float *p, int count) {
  if (count == 4)
    return vld1q_f32(p);
  float part[4] = {0, 0, 0, 0};
  for (int i = 0; i < count; ++i)
    part[i] = p[i];
  return vld1q_f32(part);
}

/* w4a16 (six = 0) and w6a16 (six = 1): rows n..n+3 times token t, the
 * inputs as int16 (prepare_int16), each split into a low byte (unsigned) and
 * a high byte (signed): per 32 weights of a row, two udot of the codes with
 * the low bytes and two sdot with the high bytes, into exact int32 sums
 * (high * 256 + low; at most 63 x 255 x 32 and 63 x 128 x 32 x 256 a lane),
 * scaled once per group by its scale times the inputs' power of two. The
 * zero points come off as scale x zero x what the group's inputs stand for.
 * One token at a time: each 16 input bytes serve the 4 rows. */
SPARK_BLOCK a16_block(const sdot_job *job, int n, int t, const int six) {
  const int K = job->K, groups = K / kGroup;
  const uint8x16_t low = vdupq_n_u8(0x0f), bits45 = vdupq_n_u8(0x30);
  const uint8_t *x = job->x16 + (size_t)t * groups * (2 * kGroup);
  const float *input_scales = job->x16_scales + (size_t)t * groups;
  const float *sums = job->group_sums + (size_t)t * groups;
  float32x4_t acc[4], offset[4];
  for (int r = 0; r < 4; ++r)
    acc[r] = offset[r] = vdupq_n_f32(0.0f);
  /* Four groups at a time: their factors (scale times the inputs' power of
   * two) and zero-point terms as vectors. */
  for (int g0 = 0; g0 < groups; g0 += 4) {
    const int count = groups - g0 < 4 ? groups - g0 : 4;
    const float32x4_t powers = four_floats(input_scales + g0, count),
                      stand_for = four_floats(sums + g0, count);
    float factor[4][4];
    for (int r = 0; r < 4; ++r) {
      const size_t at = (size_t)(n + r) * job->s_stride + g0;
      const float32x4_t scale = four_halves(job->group_scales + at, count),
                        zero = four_halves(job->group_zeros + at, count);
      vst1q_f32(factor[r], vmulq_f32(scale, powers));
      offset[r] = vfmaq_f32(offset[r], vmulq_f32(scale, zero), stand_for);
    }
    for (int j = 0; j < count; ++j) {
      const int g = g0 + j;
      uint32x4_t lo[4];
      int32x4_t hi[4];
      for (int r = 0; r < 4; ++r) {
        lo[r] = vdupq_n_u32(0);
        hi[r] = vdupq_n_s32(0);
      }
      /* Two chunks at a time: unrolled in full, GCC 12 loads the group's 16
       * weight vectors and 16 input vectors first and spills them to the
       * stack; rolled, a chunk takes 38 instructions, by two 34.5. */
#pragma GCC unroll 2
      for (int q = 0; q < 4; ++q) { /* nibble bytes 16q..16q+15 */
        const uint8_t *xq = x + (size_t)g * (2 * kGroup) + 64 * q;
        const uint8x16_t low_even = vld1q_u8(xq), low_odd = vld1q_u8(xq + 16);
        const int8x16_t high_even = vld1q_s8((const int8_t *)xq + 32),
                        high_odd = vld1q_s8((const int8_t *)xq + 48);
        for (int r = 0; r < 4; ++r) {
          const uint8_t *row = job->w4 + (size_t)(n + r) * job->w_stride;
          const uint8x16_t bytes = vld1q_u8(row + (size_t)g * 64 + 16 * q);
          uint8x16_t even = vandq_u8(bytes, low), odd = vshrq_n_u8(bytes, 4);
          if (six) { /* as w6a8_block */
            const uint8x16_t tops =
                vld1q_u8(row + K / 2 + (size_t)g * 32 + 16 * (q % 2));
            const uint8x16_t top_even = q < 2 ? vshlq_n_u8(tops, 4) : tops;
            const uint8x16_t top_odd =
                q < 2 ? vshlq_n_u8(tops, 2) : vshrq_n_u8(tops, 2);
            even = vorrq_u8(even, vandq_u8(top_even, bits45));
            odd = vorrq_u8(odd, vandq_u8(top_odd, bits45));
          }
          lo[r] = vdotq_u32(vdotq_u32(lo[r], even, low_even), odd, low_odd);
          hi[r] =
              vdotq_s32(vdotq_s32(hi[r], vreinterpretq_s8_u8(even), high_even),
                        vreinterpretq_s8_u8(odd), high_odd);
        }
      }
      for (int r = 0; r < 4; ++r) {
        const int32x4_t dot =
            vmlaq_n_s32(vreinterpretq_s32_u32(lo[r]), hi[r], 256);
        acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(dot), factor[r][j]);
      }
    }
  }
  for (int r = 0; r < 4; ++r)
    job->out[(size_t)t * job->out_stride + n + r] =
        vaddvq_f32(acc[r]) - vaddvq_f32(offset[r]);
}

/* w8a16: rows n..n+3 times token t, the inputs as int16 (prepare_int16,
 * int8 weights): per 16 weight bytes of a row one sdot of the codes with
 * the high bytes (signed) and one udot of the codes plus 128 (an exclusive
 * or of the sign bit) with the low bytes (unsigned), whose sums start at
 * -128 x the group's sum of low bytes (-32 x it a lane) so that they come
 * out exact for the codes; high * 256 + low scaled once per group by the
 * inputs' power of two, the row by its scale at the end. */
SPARK_BLOCK w8a16_block(const sdot_job *job, int n, int t) {
  const int K = job->K, groups = K / kGroup;
  const uint8x16_t sign = vdupq_n_u8(0x80);
  const uint8_t *x = job->x16 + (size_t)t * groups * (2 * kGroup);
  const float *powers = job->x16_scales + (size_t)t * groups;
  const float *low_sums = job->group_sums + (size_t)t * groups;
  float32x4_t acc[4];
  for (int r = 0; r < 4; ++r)
    acc[r] = vdupq_n_f32(0.0f);
  for (int g = 0; g < groups; ++g) {
    const uint32x4_t start =
        vreinterpretq_u32_s32(vdupq_n_s32(-32 * (int32_t)low_sums[g]));
    uint32x4_t lo[4];
    int32x4_t hi[4];
    for (int r = 0; r < 4; ++r) {
      lo[r] = start;
      hi[r] = vdupq_n_s32(0);
    }
#pragma GCC unroll 1
    for (int q = 0; q < 4; ++q) { /* inputs 32q..32q+31 of the group */
      const uint8_t *xq = x + (size_t)g * (2 * kGroup) + 64 * q;
      const uint8x16_t low0 = vld1q_u8(xq), low1 = vld1q_u8(xq + 16);
      const int8x16_t high0 = vld1q_s8((const int8_t *)xq + 32),
                      high1 = vld1q_s8((const int8_t *)xq + 48);
      for (int r = 0; r < 4; ++r) {
        const int8_t *w = job->w8 + (size_t)(n + r) * K + g * kGroup + 32 * q;
        const int8x16_t w0 = vld1q_s8(w), w1 = vld1q_s8(w + 16);
        hi[r] = vdotq_s32(vdotq_s32(hi[r], w0, high0), w1, high1);
        lo[r] = vdotq_u32(
            vdotq_u32(lo[r], veorq_u8(vreinterpretq_u8_s8(w0), sign), low0),
            veorq_u8(vreinterpretq_u8_s8(w1), sign), low1);
      }
    }
    for (int r = 0; r < 4; ++r) {
      const int32x4_t dot =
          vmlaq_n_s32(vreinterpretq_s32_u32(lo[r]), hi[r], 256);
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(dot), powers[g]);
    }
  }
  for (int r = 0; r < 4; ++r)
    job->out[(size_t)t * job->out_stride + n + r] =
        vaddvq_f32(acc[r]) * job->scales[n + r];
}

/* One task: a block of rows, 4 rows x 4 tokens at a time, then the last
 * tokens one by one (decode: one token). */
#define SPARK_TASK(name, block)                                                \
  static int name(void *user_context, int task, uint8_t *closure) {           \
    (void)user_context;                                                        \
    const sdot_job *job = (const sdot_job *)closure;                           \
    const int n0 = task * kRowsPerTask;                                        \
    const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;   \
    for (int n = n0; n < n1; n += 4) {                                         \
      int t0 = 0;                                                              \
      for (; t0 + 4 <= job->T; t0 += 4)                                        \
        block(job, n, t0, 4);                                                  \
      for (; t0 < job->T; ++t0)                                                \
        block(job, n, t0, 1);                                                  \
    }                                                                          \
    return 0;                                                                  \
  }

SPARK_TASK(w8a8_task, w8a8_block)
SPARK_TASK(w4a8_task, w4a8_block)
SPARK_TASK(w6a8_task, w6a8_block)

/* w8a16, w4a16 and w6a16: a block of rows, 4 at a time, each against every
 * token (a decode step: one); `block(job, n, t, ...)`. */
#define SPARK_TOKEN_TASK(name, block, ...)                                     \
  static int name(void *user_context, int task, uint8_t *closure) {            \
    (void)user_context;                                                        \
    const sdot_job *job = (const sdot_job *)closure;                           \
    const int n0 = task * kRowsPerTask;                                        \
    const int n1 = n0 + kRowsPerTask < job->N ? n0 + kRowsPerTask : job->N;    \
    for (int n = n0; n < n1; n += 4)                                           \
      for (int t = 0; t < job->T; ++t)                                         \
        block(job, n, t, ##__VA_ARGS__);                                       \
    return 0;                                                                  \
  }

SPARK_TOKEN_TASK(w8a16_task, w8a16_block)
SPARK_TOKEN_TASK(w4a16_task, a16_block, 0)
SPARK_TOKEN_TASK(w6a16_task, a16_block, 1)

/* Quantizes the inputs (w4a8: reordered per 32 elements), runs `task` over
 * blocks of rows, frees. */
static int run_sdot(halide_buffer_t *x, float input_scale, sdot_job *job,
                    int reorder, int (*task)(void *, int, uint8_t *)) {
  int8_t *codes;
  float *token_scales;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  /* w4a8, w6a8: each group's sum of input codes, before the reordering */
  float *sums = NULL;
  if (reorder) {
    const int groups = job->K / kGroup;
    sums = (float *)spark_scratch_alloc(
        sizeof(float) * (size_t)(job->T > 0 ? job->T : 1) * (size_t)groups);
    if (!sums) {
      spark_scratch_put(codes);
      spark_scratch_put(token_scales);
      return -1;
    }
    for (int t = 0; t < job->T; ++t)
      spark_group_code_sums(codes + (size_t)t * job->K, job->K, kGroup,
                            sums + (size_t)t * groups);
    job->group_sums = sums;
  }
  for (int t = 0; reorder && t < job->T; ++t)
    spark_split_even_odd(codes + (size_t)t * job->K, job->K, 32);
  job->codes = codes;
  job->token_scales = token_scales;
  int rc = halide_do_par_for(NULL, task, 0,
                             (job->N + kRowsPerTask - 1) / kRowsPerTask,
                             (uint8_t *)job);
  spark_scratch_put(codes);
  spark_scratch_put(token_scales);
  spark_scratch_put(sums);
  return rc;
}

int spark_sdot_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_SDOT_DEPTH, SPARK_MK_ROWS))
    return -1;
  sdot_job job = {.w8 = (const int8_t *)w->host,
                  .scales = (const float *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride};
  return run_sdot(x, input_scale, &job, 0, w8a8_task);
}

int spark_sdot_linear_w4a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, float input_scale,
                           halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 2, kGroup, SPARK_MK_ROWS) ||
      !spark_groups_fit(x, scales, kGroup))
    return -1;
  sdot_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const __fp16 *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride};
  return run_sdot(x, input_scale, &job, 1, w4a8_task);
}

int spark_sdot_linear_w6a8(halide_buffer_t *x, halide_buffer_t *w,
                           halide_buffer_t *scales, halide_buffer_t *zeros,
                           float input_scale, halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup) ||
      N % SPARK_MK_ROWS != 0)
    return -1;
  sdot_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const __fp16 *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .group_zeros = (const __fp16 *)zeros->host,
                  .w_stride = w->dim[1].stride,
                  .s_stride = scales->dim[1].stride};
  return run_sdot(x, input_scale, &job, 1, w6a8_task);
}

/* The T rows of x (f32 [K, T], any row stride) rounded to f16 (bf16: to
 * bfloat16), taken per group of 128 as int16 multiples of a power of two
 * (spark_int16_group, the rule of the x86 kernels), into *bytes
 * ([T][K/128][4][64]: per 32 inputs their low bytes, then their high bytes;
 * for 4-bit weights the even-index ones, then the odd-index ones, to meet
 * the low and high nibbles of 16 weight bytes; for int8 weights (`int8`) in
 * their order), *scales ([T][K/128]: the powers of two) and *sums (4-bit:
 * what each group's int16 stand for; int8: the sum of its low bytes).
 * Returns 0, or -1 with nothing allocated. */
static int prepare_int16(const halide_buffer_t *x, int bf16, int int8,
                         uint8_t **bytes, float **scales, float **sums) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const int groups = K / kGroup;
  const size_t cells = (size_t)(T > 0 ? T : 1) * (groups > 0 ? groups : 1);
  *bytes = (uint8_t *)spark_scratch_alloc(cells * 2 * kGroup);
  *scales = (float *)spark_scratch_alloc(sizeof(float) * cells);
  *sums = (float *)spark_scratch_alloc(sizeof(float) * cells);
  if (!*bytes || !*scales || !*sums) {
    spark_scratch_put(*bytes);
    spark_scratch_put(*scales);
    spark_scratch_put(*sums);
    return -1;
  }
  for (int t = 0; t < T; ++t)
    for (int g = 0; g < groups; ++g) {
      const float *from = (const float *)x->host + (size_t)t * xs + g * kGroup;
      float v[kGroup];
      int16_t q[kGroup];
      for (int i = 0; i < kGroup; ++i)
        v[i] = bf16 ? spark_round_bf16(from[i]) : (float)(__fp16)from[i];
      int32_t total;
      const size_t c = (size_t)t * groups + g;
      (*scales)[c] = spark_int16_group(v, kGroup, q, &total);
      uint8_t *to = *bytes + c * 2 * kGroup;
      int32_t low_bytes = 0;
      for (int i = 0; i < kGroup; ++i) {
        uint8_t *at =
            to + 64 * (i / 32) + (int8 ? i % 32 : 16 * (i % 2) + (i % 32) / 2);
        at[0] = (uint8_t)((uint16_t)q[i] & 0xff);
        at[32] = (uint8_t)((uint16_t)q[i] >> 8);
        low_bytes += at[0];
      }
      /* int8: at most 128 x 255, exact */
      (*sums)[c] = int8 ? (float)low_bytes : (float)total * (*scales)[c];
    }
  return 0;
}

/* Prepares the inputs as int16 (prepare_int16, `int8`: for int8 weights)
 * into the job, runs `task` over blocks of rows, frees: what the w4a16,
 * w6a16 and w8a16 entries share, as run_sdot for the int8 inputs. */
static int run_int16(halide_buffer_t *x, int bf16, int int8, sdot_job *job,
                     int (*task)(void *, int, uint8_t *)) {
  uint8_t *bytes;
  float *powers, *sums;
  if (prepare_int16(x, bf16, int8, &bytes, &powers, &sums) != 0)
    return -1;
  job->x16 = bytes;
  job->x16_scales = powers;
  job->group_sums = sums;
  const int rc = halide_do_par_for(NULL, task, 0,
                                   (job->N + kRowsPerTask - 1) / kRowsPerTask,
                                   (uint8_t *)job);
  spark_scratch_put(bytes);
  spark_scratch_put(powers);
  spark_scratch_put(sums);
  return rc;
}

/* w4a16 (six: w6a16) with the inputs rounded to f16 (bf16), taken as int16. */
static int a16(halide_buffer_t *x, halide_buffer_t *w, halide_buffer_t *scales,
               halide_buffer_t *zeros, halide_buffer_t *out, int bf16,
               int six) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (N % SPARK_MK_ROWS != 0 ||
      (six ? !spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup)
           : !spark_grouped_rows_fit(x, w, scales, zeros, out, kGroup,
                                     SPARK_MK_ROWS)))
    return -1;
  sdot_job job = {.w4 = (const uint8_t *)w->host,
                  .group_scales = (const __fp16 *)scales->host,
                  .out = (float *)out->host,
                  .K = K,
                  .N = N,
                  .T = T,
                  .out_stride = out->dim[1].stride,
                  .group_zeros = (const __fp16 *)zeros->host,
                  .w_stride = w->dim[1].stride,
                  .s_stride = scales->dim[1].stride};
  return run_int16(x, bf16, 0, &job, six ? w6a16_task : w4a16_task);
}

/* w4a16 with f16 (bf16) inputs: x f32 [K, T], w u8 [K/2, N] (dense or
 * grouped rows), scales and zeros f16 [K/128, N], out f32 [N, T]; out = sum
 * over groups of scale * sum_k (code - zero) * the input rounded to f16
 * (bf16), each input taken as an int16 multiple of its group's power of
 * two. */
int spark_sdot_linear_w4a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *zeros, halide_buffer_t *out) {
  return a16(x, w, scales, zeros, out, 0, 0);
}

int spark_sdot_linear_w4a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return a16(x, w, scales, zeros, out, 1, 0);
}

/* w6a16: as w4a16, with 6-bit codes (w u8 [3K/4, N], spark_six_bit_top). */
int spark_sdot_linear_w6a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *zeros, halide_buffer_t *out) {
  return a16(x, w, scales, zeros, out, 0, 1);
}

int spark_sdot_linear_w6a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return a16(x, w, scales, zeros, out, 1, 1);
}

/* w8a16 with f16 (bf16) inputs: x f32 [K, T], w s8 [K, N], scales f32 [N],
 * out f32 [N, T]; out = scale * sum_k code * the input rounded to f16
 * (bf16), each input taken as an int16 multiple of its group's power of
 * two (groups of 128). */
static int w8a16(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *out, int bf16) {
  if (!spark_linear_fits(x, w, out, 1, kGroup, SPARK_MK_ROWS))
    return -1;
  sdot_job job = {.w8 = (const int8_t *)w->host,
                  .scales = (const float *)scales->host,
                  .out = (float *)out->host,
                  .K = x->dim[0].extent,
                  .N = w->dim[1].extent,
                  .T = x->dim[1].extent,
                  .out_stride = out->dim[1].stride};
  return run_int16(x, bf16, 1, &job, w8a16_task);
}

int spark_sdot_linear_w8a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                 halide_buffer_t *scales,
                                 halide_buffer_t *out) {
  return w8a16(x, w, scales, out, 0);
}

int spark_sdot_linear_w8a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *out) {
  return w8a16(x, w, scales, out, 1);
}
