/* vrmpy_linear.c - HVX matrix kernels of Hexagon's quantized builds: w8a8,
 * w4a8, w6a8 (int8 inputs), w4a16, w6a16, w8a16 (f16 or bf16 inputs).
 *
 * Same interfaces as the Halide linear kernels they stand in for:
 *   w8a8:  (x f32 [K, T], w s8 [K, N], scales f32 [N], input scale, out)
 *   w4a8:  (x, w u8 [K/2, N] two 4-bit codes a byte, low nibble first,
 *           scales f16 [K/128, N], input scale, out f32 [N, T])
 *   w6a8:  (x, w u8 [3K/4, N] rows of 6-bit codes (spark_six_bit_top),
 *           scales and zeros f16 [K/128, N], input scale, out)
 *   w4a16, w6a16: (x, w as w4a8 or w6a8, scales, zeros, out)
 *   w8a16: (x, w s8 [K, N], scales f32 [N], out)
 * int8 inputs: each call quantizes every input row to symmetric int8 codes
 * with its own scale, max |x| / 127 (microkernel_support.h, the rule of the
 * Halide kernels). 16-bit inputs: rounded to f16 (bf16) and taken per group
 * of 128 as int16 multiples of a power of two (spark_int16_group, the rule
 * of the x86 and arm64 kernels), split into low bytes (unsigned) and high
 * bytes (signed).
 *   w8a8: every vrmpy multiplies 128 signed byte pairs (weights straight from
 *         the pack x input codes) and adds each group of 4 products into one
 *         of 32 int32 lanes; the lanes are summed once per row and token, and
 *         scaled by the row's and the token's scales. Prefill accumulates 2
 *         rows x 2 tokens at a time in registers; decode (one token) streams
 *         4 weight rows per step.
 *   The others have a scale per group of 128, and v66 HVX has no float
 *   lanes: each pair of groups gives 32 int32 lanes, 16 a group (pair_dot),
 *   the lanes of 32 groups are added pairwise (vdeal of two vectors' words,
 *   then vadd: each step halves the lanes a group holds) down to one lane a
 *   group, the lane sums and the f16 scales (and zero points) are turned
 *   into f32 on HVX, exactly (float_bits, half_bits), and the scalar core
 *   multiplies and adds them into each row's f32 sum. 4- and 6-bit: a
 *   128-byte load of a row holds two groups' nibbles, the low ones the even
 *   codes, the high ones the odd codes, met by the inputs reordered once per
 *   call into [the even 128 | the odd 128] of each 256.
 * Needs K % 128 == 0. Compiled with -mhvx -mhvx-length=128B (v66). */
#include "HalideRuntime.h"
#include "microkernel_support.h"

#include <hexagon_types.h>
#include <hvx_hexagon_protos.h>

#include <stdint.h>
#include <stdlib.h>

typedef int32_t hvx_vector __attribute__((vector_size(128), aligned(128)));
typedef int32_t hvx_unaligned __attribute__((vector_size(128), aligned(1)));

/* 128 bytes from p, any alignment. clang reads the two aligned blocks
 * around them, so up to 255 bytes past p: within the pack, weights are
 * never its last tensor (the final norm's f32 weight is), and every tensor
 * starts on a 4096-byte boundary, so those bytes are mapped. */
static inline hvx_vector load(const int8_t *p) {
  return *(const hvx_unaligned *)p;
}

/* Where load() may read the `bytes` (<= 128) bytes at p: p itself, or
 * within 256 bytes of `end` (where the readable bytes end) `copy` (128
 * bytes, aligned), which then holds them, zeros after, so that nothing past
 * `end` is read. */
static inline __attribute__((always_inline)) const int8_t *
readable(const uint8_t *p, int bytes, const uint8_t *end, uint8_t *copy) {
  if (end - p >= 256)
    return (const int8_t *)p;
  for (int i = 0; i < 128; ++i)
    copy[i] = i < bytes && p + i < end ? p[i] : 0;
  return (const int8_t *)copy;
}

static inline int32_t lanes_sum(hvx_vector v) {
  int32_t lanes[32] __attribute__((aligned(128)));
  *(hvx_vector *)lanes = v;
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i)
    sum += lanes[i];
  return sum;
}

int spark_vrmpy_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, float input_scale,
                            halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_VRMPY_DEPTH, 1))
    return -1;
  const int os = out->dim[1].stride;
  int8_t *codes;
  float *token_scales;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  const int8_t *wq = (const int8_t *)w->host;
  const float *row_scales = (const float *)scales->host;
  float *o = (float *)out->host;
  if (T == 1) {
    /* Decode: four weight rows per step against the one token. */
    for (int n = 0; n < N; n += 4) {
      const int8_t *w0 = wq + (size_t)n * K;
      const int8_t *w1 = n + 1 < N ? w0 + K : w0;
      const int8_t *w2 = n + 2 < N ? w0 + 2 * (size_t)K : w0;
      const int8_t *w3 = n + 3 < N ? w0 + 3 * (size_t)K : w0;
      hvx_vector a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
      for (int k = 0; k < K; k += 128) {
        hvx_vector xv = load(codes + k);
        a0 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a0, load(w0 + k), xv);
        a1 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a1, load(w1 + k), xv);
        a2 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a2, load(w2 + k), xv);
        a3 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a3, load(w3 + k), xv);
      }
      const hvx_vector sums[4] = {a0, a1, a2, a3};
      for (int r = 0; r < 4 && n + r < N; ++r)
        o[n + r] = (float)lanes_sum(sums[r]) * row_scales[n + r] * token_scales[0];
    }
  }
  for (int t0 = 0; T > 1 && t0 < T; t0 += 2) {
    const int tokens = T - t0 < 2 ? T - t0 : 2;
    const int8_t *x0 = codes + (size_t)t0 * K;
    const int8_t *x1 = tokens == 2 ? x0 + K : x0;
    for (int n = 0; n < N; n += 2) {
      /* Rows n and n + 1 (the last row twice when N is odd) against tokens
       * t0 and t0 + 1 (t0 twice for the last odd token): four independent
       * accumulators in registers, two weight and two input loads per step. */
      const int8_t *w0 = wq + (size_t)n * K;
      const int8_t *w1 = n + 1 < N ? w0 + K : w0;
      hvx_vector a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0};
      for (int k = 0; k < K; k += 128) {
        hvx_vector wv0 = load(w0 + k), wv1 = load(w1 + k);
        hvx_vector xv0 = load(x0 + k), xv1 = load(x1 + k);
        a00 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a00, wv0, xv0);
        a01 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a01, wv0, xv1);
        a10 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a10, wv1, xv0);
        a11 = __builtin_HEXAGON_V6_vrmpybv_acc_128B(a11, wv1, xv1);
      }
      const hvx_vector sums[2][2] = {{a00, a01}, {a10, a11}};
      for (int r = 0; r < 2 && n + r < N; ++r)
        for (int t = 0; t < tokens; ++t)
          o[(size_t)(t0 + t) * os + n + r] = (float)lanes_sum(sums[r][t]) *
                                             row_scales[n + r] *
                                             token_scales[t0 + t];
    }
  }
  spark_scratch_put(codes);
  spark_scratch_put(token_scales);
  return 0;
}

/* ---- Rows with a scale per group of 128: w4a8, w6a8, w4a16, w6a16, w8a16 */

typedef int32_t hvx_pair __attribute__((vector_size(256), aligned(128)));

enum { kGroup = SPARK_MK_GROUP };

/* The lanes of `first` and `second` added in pairs: lane i < 16 holds
 * first's lanes 2i and 2i + 1, lane 16 + i second's; a group that held 2m
 * consecutive lanes of a vector holds m, in the same order. */
static inline hvx_vector pairwise(hvx_vector first, hvx_vector second) {
  const hvx_pair dealt = __builtin_HEXAGON_V6_vdealvdd_128B(second, first, -4);
  return __builtin_HEXAGON_V6_vaddw_128B(__builtin_HEXAGON_V6_lo_128B(dealt),
                                         __builtin_HEXAGON_V6_hi_128B(dealt));
}

/* What a row's pairs of groups hold and meet: 4-bit codes with int8 input
 * codes (w4a8), 4-bit codes with int16 inputs (w4a16), int8 codes with
 * int16 inputs (w8a16), 6-bit codes (the int6 recipe rule: 4-bit nibbles,
 * then the top bits, spark_six_bit_top) with int8 or int16 inputs (w6a8,
 * w6a16). */
enum pair_form { kFourBitA8, kFourBitA16, kEightBitA16, kSixBitA8, kSixBitA16 };

#define SPARK_SIX_BIT(form) ((form) == kSixBitA8 || (form) == kSixBitA16)
#define SPARK_INT8_INPUTS(form) ((form) == kFourBitA8 || (form) == kSixBitA8)
/* Weight bytes of a pair of groups: 128 nibble bytes (4- and 6-bit: the
 * 6-bit tops are 64 bytes more, after the row's nibbles), or 256 int8
 * codes. */
#define SPARK_PAIR_W(form) ((form) == kEightBitA16 ? 256 : 128)
/* Bytes of a token's inputs for one pair: int8 inputs the codes (the
 * even-index 128, then the odd-index 128); 4- and 6-bit codes with int16
 * inputs their low bytes (even, odd), then their high bytes (even, odd);
 * w8a16, in their order, the first group's low bytes and high bytes, then
 * the second's. */
#define SPARK_PAIR_X(form) (SPARK_INT8_INPUTS(form) ? 256 : 512)

/* Bits 4-5 of each byte from a nibble byte's 6-bit codes' tops: nibble
 * bytes 0-31 of a group take bits 0-1 (even code) and 2-3 (odd code) of top
 * byte i, nibble bytes 32-63 bits 4-5 and 6-7 of top byte i - 32 (the
 * masks select by position in the group). */
static const uint8_t kFirstHalves[128] __attribute__((aligned(128))) = {
#define SPARK_X8(v) v, v, v, v, v, v, v, v
#define SPARK_X32(v) SPARK_X8(v), SPARK_X8(v), SPARK_X8(v), SPARK_X8(v)
    SPARK_X32(0x30), SPARK_X32(0), SPARK_X32(0x30), SPARK_X32(0)};
static const uint8_t kSecondHalves[128] __attribute__((aligned(128))) = {
    SPARK_X32(0), SPARK_X32(0x30), SPARK_X32(0), SPARK_X32(0x30)};
#undef SPARK_X32
#undef SPARK_X8

/* The 6-bit tops of a pair of groups (64 bytes at tops, the rest of the
 * row after them; `end`: the end of the readable bytes) beside its nibble
 * bytes: even codes' tops, then odd codes', in bits 4-5. */
static inline __attribute__((always_inline)) void
six_bit_tops(const uint8_t *tops, const uint8_t *end, hvx_vector *even,
             hvx_vector *odd) {
  uint8_t copy[128] __attribute__((aligned(128)));
  const hvx_vector block = load(readable(tops, 64, end, copy));
  /* each group's 32 top bytes twice: [A, A, B, B] */
  const hvx_vector t = Q6_V_lo_W(Q6_W_vshuff_VVR(block, block, -32));
  const hvx_vector first = *(const hvx_vector *)kFirstHalves,
                   second = *(const hvx_vector *)kSecondHalves;
  *even = Q6_V_vor_VV(Q6_V_vand_VV(Q6_Vh_vasl_VhR(t, 4), first),
                      Q6_V_vand_VV(t, second));
  *odd = Q6_V_vor_VV(Q6_V_vand_VV(Q6_Vh_vasl_VhR(t, 2), first),
                     Q6_V_vand_VV(Q6_Vuh_vlsr_VuhR(t, 2), second));
}

/* One pair of groups of a row (from w, 128-byte aligned if `aligned`;
 * 6-bit: the tops from `tops`, readable up to `end`) times their inputs
 * (x, aligned): lanes 0-15 the first group's partial sums, 16-31 the
 * second's. 4-bit: the nibbles 0..15 as unsigned bytes, the low ones the
 * even codes (6-bit: their tops beside them, 0..63); against the signed
 * input codes (w4a8, w6a8), or against the int16 inputs' high bytes
 * (signed) and low bytes (unsigned), high x 256 + low (w4a16, w6a16); int8
 * codes against the high and the low bytes (w8a16), 32 lanes a group, then
 * added pairwise. Every sum is exact in int32. */
static inline __attribute__((always_inline)) hvx_vector
pair_dot(const uint8_t *w, const uint8_t *tops, const uint8_t *end,
         const int8_t *x, const int aligned, const enum pair_form form) {
  const hvx_vector *in = (const hvx_vector *)x;
  if (form == kEightBitA16) {
    hvx_vector dot[2];
    for (int h = 0; h < 2; ++h) {
      const hvx_vector codes = aligned ? *(const hvx_vector *)(w + 128 * h)
                                       : load((const int8_t *)w + 128 * h);
      dot[h] = __builtin_HEXAGON_V6_vaddw_128B(
          __builtin_HEXAGON_V6_vaslw_128B(
              __builtin_HEXAGON_V6_vrmpybv_128B(in[2 * h + 1], codes), 8),
          __builtin_HEXAGON_V6_vrmpybusv_128B(in[2 * h], codes));
    }
    return pairwise(dot[0], dot[1]);
  }
  const hvx_vector low = __builtin_HEXAGON_V6_lvsplatw_128B(0x0f0f0f0f);
  const hvx_vector v =
      aligned ? *(const hvx_vector *)w : load((const int8_t *)w);
  hvx_vector even = __builtin_HEXAGON_V6_vand_128B(v, low);
  hvx_vector odd = __builtin_HEXAGON_V6_vand_128B(
      __builtin_HEXAGON_V6_vlsrh_128B(v, 4), low);
  if (SPARK_SIX_BIT(form)) {
    hvx_vector top_even, top_odd;
    six_bit_tops(tops, end, &top_even, &top_odd);
    even = Q6_V_vor_VV(even, top_even);
    odd = Q6_V_vor_VV(odd, top_odd);
  }
  if (SPARK_INT8_INPUTS(form))
    return __builtin_HEXAGON_V6_vrmpybusv_acc_128B(
        __builtin_HEXAGON_V6_vrmpybusv_128B(even, in[0]), odd, in[1]);
  const hvx_vector high = __builtin_HEXAGON_V6_vrmpybusv_acc_128B(
      __builtin_HEXAGON_V6_vrmpybusv_128B(even, in[2]), odd, in[3]);
  const hvx_vector lows = __builtin_HEXAGON_V6_vrmpyubv_acc_128B(
      __builtin_HEXAGON_V6_vrmpyubv_128B(in[0], even), in[1], odd);
  return __builtin_HEXAGON_V6_vaddw_128B(
      __builtin_HEXAGON_V6_vaslw_128B(high, 8), lows);
}

/* Eight pairs of groups of a row from w times their inputs: 16 groups x 2
 * lanes, in order (straight-line code, the common case). */
static inline __attribute__((always_inline)) hvx_vector
eight_pairs(const uint8_t *w, const uint8_t *tops, const uint8_t *end,
            const int8_t *x, const int aligned, const enum pair_form form) {
  const int wb = SPARK_PAIR_W(form), xb = SPARK_PAIR_X(form);
  hvx_vector half[4];
#pragma clang loop unroll(full) /* the halves in registers */
  for (int i = 0; i < 4; ++i)
    half[i] = pairwise(pair_dot(w + 2 * wb * i, tops + 128 * i, end,
                                x + 2 * xb * i, aligned, form),
                       pair_dot(w + (2 * i + 1) * wb, tops + 128 * i + 64, end,
                                x + (2 * i + 1) * xb, aligned, form));
  return pairwise(pairwise(half[0], half[1]), pairwise(half[2], half[3]));
}

/* The same for 1..8 pairs (the last from `tail` if not NULL), the missing
 * ones zero. */
static inline __attribute__((always_inline)) hvx_vector
some_pairs(const uint8_t *w, const uint8_t *tops, const uint8_t *end,
           const int8_t *x, int pairs, const uint8_t *tail,
           const enum pair_form form) {
  const hvx_vector zero = {0};
  hvx_vector dots[8];
#pragma clang loop unroll(full)
  for (int j = 0; j < 8; ++j)
    dots[j] =
        j < pairs
            ? pair_dot(tail && j == pairs - 1 ? tail
                                              : w + SPARK_PAIR_W(form) * j,
                       tops + 64 * j, end, x + SPARK_PAIR_X(form) * j, 0, form)
            : zero;
  hvx_vector half[4];
#pragma clang loop unroll(full)
  for (int i = 0; i < 4; ++i)
    half[i] = pairwise(dots[2 * i], dots[2 * i + 1]);
  return pairwise(pairwise(half[0], half[1]), pairwise(half[2], half[3]));
}

/* A row of codes and one token's inputs, read 32 groups at a time (two
 * runs of eight pairs): `tail` holds the last pair when the row has an odd
 * number of groups (its second half zero). */
typedef struct pair_row {
  const uint8_t *row;
  const uint8_t *tops, *end; /* 6-bit: the row's tops; the readable end */
  const int8_t *x;
  int groups, pairs;
  const uint8_t *tail;
} pair_row;

/* Groups 2 p0 .. 2 p0 + 31 of the row (those it has): one lane a group, the
 * lanes after its last zero. */
static inline __attribute__((always_inline)) hvx_vector
chunk_sums(const pair_row *r, int p0, const enum pair_form form) {
  const hvx_vector zero = {0};
  const int whole = r->pairs / 8 * 8; /* pairs in runs of eight */
  hvx_vector runs[2];
  for (int i = 0; i < 2; ++i) {
    const int p = p0 + 8 * i;
    const uint8_t *w = r->row + (size_t)p * SPARK_PAIR_W(form);
    const uint8_t *tops = r->tops + (size_t)p * 64;
    const int8_t *xp = r->x + (size_t)p * SPARK_PAIR_X(form);
    if (p + 8 > whole)
      runs[i] = p < r->pairs ? some_pairs(w, tops, r->end, xp, r->pairs - p,
                                          r->tail, form)
                             : zero;
    else if ((uintptr_t)w % 128 == 0) /* rows of K % 256 == 0 in the pack */
      runs[i] = eight_pairs(w, tops, r->end, xp, 1, form);
    else
      runs[i] = eight_pairs(w, tops, r->end, xp, 0, form);
  }
  return pairwise(runs[0], runs[1]);
}

/* Row n of w (rows `stride` bytes apart, K codes a row, the readable
 * bytes ending at `end`) with one token's inputs x; `tail` a 128-byte
 * aligned buffer of 256 bytes for an odd last group. */
static inline pair_row pair_row_at(const uint8_t *w, size_t stride,
                                   const uint8_t *end, int n, int K,
                                   const int8_t *x, uint8_t *tail,
                                   const enum pair_form form) {
  const int wb = SPARK_PAIR_W(form), group_bytes = wb / 2;
  pair_row r = {.row = w + (size_t)n * stride,
                .tops = w + (size_t)n * stride + K / 2,
                .end = end,
                .x = x,
                .groups = K / kGroup,
                .pairs = (K / kGroup + 1) / 2,
                .tail = NULL};
  if (r.groups % 2) { /* the last pair's second group is past the row */
    for (int i = 0; i < group_bytes; ++i) {
      tail[i] = r.row[(size_t)(r.pairs - 1) * wb + i];
      tail[group_bytes + i] = 0;
    }
    r.tail = tail;
  }
  return r;
}

/* f32 bits of int32 lanes (|v| < 2^31), rounded to nearest even past 24
 * significant bits, as (float)v gives them: the magnitude shifted up to its
 * leading one, 24 bits kept, the exponent from the leading zeros. `small`:
 * every |v| < 2^24 (exact, nothing to round). */
static inline __attribute__((always_inline)) hvx_vector
float_bits(hvx_vector v, const int small) {
  const hvx_vector zero = {0};
  const hvx_vector a = Q6_Vw_vabs_Vw(v);
  const hvx_vector lz = Q6_Vuw_vcl0_Vuw(a);
  const hvx_vector m = Q6_Vw_vasl_VwVw(a, lz); /* the leading one at bit 31 */
  hvx_vector q = Q6_Vuw_vlsr_VuwR(m, 8);
  if (!small) /* + 1 when the 8 bits dropped are above half, or half and q
                 odd */
    q = Q6_Vw_vadd_VwVw(
        q, Q6_Vuw_vlsr_VuwR(
               Q6_Vw_vadd_VwVw(
                   Q6_Vw_vadd_VwVw(Q6_V_vand_VV(m, Q6_V_vsplat_R(0xff)),
                                   Q6_V_vand_VV(q, Q6_V_vsplat_R(1))),
                   Q6_V_vsplat_R(0x7f)),
               8));
  /* exponent 31 - lz, biased 158 - lz; q's leading one (or a carry out of
   * the rounding) adds one more: (157 - lz) << 23 + q */
  const hvx_vector bits = Q6_V_vor_VV(
      Q6_Vw_vadd_VwVw(
          Q6_Vw_vasl_VwR(Q6_Vw_vsub_VwVw(Q6_V_vsplat_R(157), lz), 23), q),
      Q6_V_vand_VV(v, Q6_V_vsplat_R((int32_t)0x80000000)));
  return Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(a, zero), zero, bits);
}

/* f32 bits of the 32 f16 values at h (finite), exact: normal values moved
 * to f32's places with the exponent rebiased; subnormal ones (a multiple of
 * 2^-24) converted from their integer. `end`: where the readable f16 values
 * end (readable). */
static inline hvx_vector half_bits(const uint16_t *h, const uint16_t *end) {
  const hvx_vector zero = {0};
  uint8_t copy[128] __attribute__((aligned(128)));
  /* zero-extended: even halves in the low vector, odd in the high one;
   * shuffled back into their order */
  const HVX_VectorPair wide = Q6_Wuw_vzxt_Vuh(
      load(readable((const uint8_t *)h, 64, (const uint8_t *)end, copy)));
  const hvx_vector w =
      Q6_V_lo_W(Q6_W_vshuff_VVR(Q6_V_hi_W(wide), Q6_V_lo_W(wide), -4));
  const hvx_vector m = Q6_V_vand_VV(w, Q6_V_vsplat_R(0x7fff));
  const hvx_vector normal =
      Q6_Vw_vadd_VwVw(Q6_Vw_vasl_VwR(m, 13), Q6_V_vsplat_R(112 << 23));
  const hvx_vector small =
      Q6_V_vmux_QVV(Q6_Q_vcmp_eq_VwVw(m, zero), zero,
                    Q6_Vw_vsub_VwVw(float_bits(m, 1), Q6_V_vsplat_R(24 << 23)));
  return Q6_V_vor_VV(
      Q6_V_vmux_QVV(Q6_Q_vcmp_gt_VwVw(Q6_V_vsplat_R(0x400), m), small, normal),
      Q6_Vw_vasl_VwR(Q6_V_vand_VV(w, Q6_V_vsplat_R(0x8000)), 16));
}

/* 32 lanes' f32 values, stored from their bits. */
typedef union lane_floats {
  hvx_vector bits;
  float value[32];
} lane_floats;

/* How a call's rows are read: two at a time when a row has 16 groups (K =
 * 2048: its eight pairs reduce to 2 lanes a group, two rows' fill the 32
 * lanes) and the rows' side values (scales, zero points) are dense (the two
 * rows' 32 in a row), else one at a time, 32 groups a vector. */
static inline int rows_at_once(int groups, int side_stride) {
  return groups == 16 && side_stride == groups ? 2 : 1;
}

/* Where a call's weights are: rows `stride` bytes apart, `end` the end of
 * the last row (what the kernel may read). */
typedef struct weight_rows {
  const uint8_t *w, *end;
  size_t stride;
} weight_rows;

static inline weight_rows weight_rows_of(const halide_buffer_t *w,
                                         size_t row_bytes) {
  const int N = w->dim[1].extent;
  const weight_rows r = {.w = (const uint8_t *)w->host,
                         .end = (const uint8_t *)w->host +
                                (size_t)(N - 1) * w->dim[1].stride + row_bytes,
                         .stride = (size_t)w->dim[1].stride};
  return r;
}

/* The lanes of rows n (and n + 1 when `rows` is 2) for groups 2 p0 .. 2 p0
 * + 31 of one token's inputs x: lane i of two rows is group i % 16 of row
 * n + i / 16. */
static inline __attribute__((always_inline)) hvx_vector
block_sums(const weight_rows *w, int n, int rows, int K, const int8_t *x,
           uint8_t *tail, int p0, const enum pair_form form) {
  const pair_row r = pair_row_at(w->w, w->stride, w->end, n, K, x, tail, form);
  if (rows == 1)
    return chunk_sums(&r, p0, form);
  const uint8_t *next = r.row + w->stride, *next_tops = r.tops + w->stride;
  if ((uintptr_t)r.row % 128 == 0 && w->stride % 128 == 0)
    return pairwise(eight_pairs(r.row, r.tops, r.end, x, 1, form),
                    eight_pairs(next, next_tops, r.end, x, 1, form));
  return pairwise(eight_pairs(r.row, r.tops, r.end, x, 0, form),
                  eight_pairs(next, next_tops, r.end, x, 0, form));
}

/* Row n's output (and row n + 1's) from lane sums: lanes [first, first +
 * count) of row n, the rest of row n + 1 when `rows` is 2. */
#define SPARK_EACH_ROW(rows, count, body)                                      \
  for (int row = 0; row < (rows); ++row)                                       \
    for (int i = row * 16, e = (rows) == 2 ? i + 16 : (count); i < e; ++i)     \
  body

/* w4a8 (symmetric 4-bit groups: the codes' -8 through 8 x each group's
 * input code sum, taken off the lanes) and w6a8 (`six`: asymmetric 6-bit
 * groups, the zero point through the same sum on the scalar core). Always
 * inlined with a constant `six`, so that each entry's rows are straight
 * code for its form. */
static inline __attribute__((always_inline)) int
int8_input_rows(halide_buffer_t *x, halide_buffer_t *w, halide_buffer_t *scales,
                halide_buffer_t *zeros, float input_scale, halide_buffer_t *out,
                const int six) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (six ? !spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup)
          : !spark_linear_fits(x, w, out, 2, kGroup, 1) ||
                !spark_groups_fit(x, scales, kGroup))
    return -1;
  const int groups = K / kGroup, padded = (K + 255) / 256 * 256;
  const int sides = (groups + 31) / 32 * 32; /* xsum8 entries a token */
  const int s_stride = scales->dim[1].stride;
  const int rows_max = rows_at_once(groups, s_stride);
  int8_t *codes, *reordered = NULL;
  float *token_scales;
  int32_t *xsum8 = NULL;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  const size_t tokens = (size_t)(T > 0 ? T : 1);
  if (spark_scratch_get((void **)&reordered, tokens * (size_t)padded) != 0 ||
      spark_scratch_get((void **)&xsum8,
                        sizeof(int32_t) * tokens * (size_t)sides) != 0) {
    spark_scratch_put(reordered);
    spark_scratch_put(codes);
    spark_scratch_put(token_scales);
    return -1;
  }
  /* per 256 codes: the even ones, then the odd ones, as the nibbles of a
   * 128-byte load hold them (a last half pair's missing half zero); each
   * group's code sum in the lane of its sums (two rows at once: twice), 8 x
   * it for w4a8 */
  for (int t = 0; t < T; ++t) {
    const int8_t *c = codes + (size_t)t * K;
    int8_t *r = reordered + (size_t)t * padded;
    for (int k = 0; k < padded; ++k)
      r[k] = k < K ? c[k] : 0;
    spark_split_even_odd(r, padded, 256);
    int32_t *s8 = xsum8 + (size_t)t * sides;
    for (int lane = 0; lane < sides; ++lane) {
      const int g = lane % (rows_max == 2 ? 16 : sides);
      int32_t sum = 0;
      for (int i = 0; g < groups && i < kGroup; ++i)
        sum += c[g * kGroup + i];
      s8[lane] = six ? sum : 8 * sum;
    }
  }
  const enum pair_form form = six ? kSixBitA8 : kFourBitA8;
  const weight_rows rows_of_w =
      weight_rows_of(w, six ? (size_t)spark_six_bit_row_bytes(K) : K / 2);
  const uint16_t *s = (const uint16_t *)scales->host,
                 *s_end = s + (size_t)(N - 1) * s_stride + groups;
  const uint16_t *z = six ? (const uint16_t *)zeros->host : NULL,
                 *z_end = six ? z + (size_t)(N - 1) * s_stride + groups : NULL;
  float *o = (float *)out->host;
  const int os = out->dim[1].stride, pairs = (groups + 1) / 2;
  uint8_t tail[256] __attribute__((aligned(128)));
  for (int n = 0; n < N;) {
    const int rows = n + 1 < N ? rows_max : 1;
    for (int t = 0; t < T; ++t) {
      const int32_t *sums_t = xsum8 + (size_t)t * sides;
      float acc[2] = {0.0f, 0.0f};
      for (int p0 = 0; p0 < pairs; p0 += 16) {
        const int g0 = 2 * p0, count = groups - g0 < 32 ? groups - g0 : 32;
        const size_t at = (size_t)n * s_stride + g0;
        hvx_vector sums =
            block_sums(&rows_of_w, n, rows, K, reordered + (size_t)t * padded,
                       tail, p0, form);
        /* w4a8: sum - 8 x code sum; exact in f32 (below 2^20) */
        if (!six)
          sums = Q6_Vw_vsub_VwVw(sums, *(const hvx_vector *)(sums_t + g0));
        const lane_floats lanes = {float_bits(sums, 1)};
        const lane_floats scale = {half_bits(s + at, s_end)};
        if (!six) {
          SPARK_EACH_ROW(rows, count,
                         { acc[row] += lanes.value[i] * scale.value[i]; })
          continue;
        }
        const lane_floats zero = {half_bits(z + at, z_end)};
        SPARK_EACH_ROW(rows, count, {
          acc[row] += scale.value[i] *
                      (lanes.value[i] - zero.value[i] * (float)sums_t[g0 + i]);
        })
      }
      for (int row = 0; row < rows; ++row)
        o[(size_t)t * os + n + row] = acc[row] * token_scales[t];
    }
    n += rows;
  }
  spark_scratch_put(reordered);
  spark_scratch_put(xsum8);
  spark_scratch_put(codes);
  spark_scratch_put(token_scales);
  return 0;
}

/* w4a8: x f32 [K, T], w u8 [K/2, N] (two 4-bit codes a byte, low nibble
 * first), scales f16 [K/128, N], out f32 [N, T]: out = the token's scale *
 * sum over groups of scale * sum_k (code - 8) * the input's int8 code. */
int spark_vrmpy_linear_w4a8(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, float input_scale,
                            halide_buffer_t *out) {
  return int8_input_rows(x, w, scales, NULL, input_scale, out, 0);
}

/* w6a8: as w4a8 with 6-bit asymmetric groups (w u8 [3K/4, N],
 * spark_six_bit_top; scales and zeros f16 [K/128, N]): sum over groups of
 * scale * sum_k (code - zero) * the input's code. */
int spark_vrmpy_linear_w6a8(halide_buffer_t *x, halide_buffer_t *w,
                            halide_buffer_t *scales, halide_buffer_t *zeros,
                            float input_scale, halide_buffer_t *out) {
  return int8_input_rows(x, w, scales, zeros, input_scale, out, 1);
}

/* 16-bit inputs as int16: per token and pair of groups SPARK_PAIR_X bytes
 * (w4a16, w6a16: the even/odd order of the nibbles; w8a16: their order; a last
 * half pair's missing half zero); per token and group the power of two the
 * int16 stand for (`power`) and what they stand for, summed (`total`). */
typedef struct int16_inputs {
  int8_t *bytes;
  float *power, *total;
  int pairs, groups;
} int16_inputs;

/* The T inputs of x rounded to f16 (`bf16`: bf16) and taken per group of
 * 128 as int16 multiples of a power of two (spark_int16_group, the rule of
 * the x86 and arm64 kernels), laid out for `form` (kFourBitA16,
 * kSixBitA16 or kEightBitA16). Returns 0, or -1 with nothing allocated. */
static int prepare_int16(const halide_buffer_t *x, int bf16,
                         const enum pair_form form, int16_inputs *in) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, xs = x->dim[1].stride;
  const size_t tokens = (size_t)(T > 0 ? T : 1);
  in->groups = K / kGroup;
  in->pairs = (in->groups + 1) / 2;
  const size_t per_token = (size_t)in->pairs * SPARK_PAIR_X(form);
  in->bytes = NULL;
  in->power = (float *)spark_scratch_alloc(sizeof(float) * tokens * in->groups);
  in->total = (float *)spark_scratch_alloc(sizeof(float) * tokens * in->groups);
  if (!in->power || !in->total ||
      spark_scratch_get((void **)&in->bytes, tokens * per_token) != 0) {
    spark_scratch_put(in->power);
    spark_scratch_put(in->total);
    return -1;
  }
  for (int t = 0; t < T; ++t) {
    int8_t *to = in->bytes + (size_t)t * per_token;
    for (size_t i = 0; i < per_token; ++i)
      to[i] = 0;
    for (int g = 0; g < in->groups; ++g) {
      const float *from = (const float *)x->host + (size_t)t * xs + g * kGroup;
      float v[kGroup];
      int16_t q[kGroup];
      for (int i = 0; i < kGroup; ++i)
        v[i] = bf16 ? spark_round_bf16(from[i]) : spark_round_f16(from[i]);
      int32_t sum;
      const size_t c = (size_t)t * in->groups + g;
      in->power[c] = spark_int16_group(v, kGroup, q, &sum);
      in->total[c] = (float)sum * in->power[c];
      /* w4a16: input k of the pair's 256 meets nibble byte k / 2 of the
       * pair's 128-byte load, the low nibbles (even k) in the even vectors;
       * w8a16: code i of the group's 128 */
      int8_t *pair = to + (size_t)(g / 2) * SPARK_PAIR_X(form);
      for (int i = 0; i < kGroup; ++i) {
        const int k = (g % 2) * kGroup + i; /* within the pair */
        const int low =
            form == kEightBitA16 ? (g % 2) * 256 + i : (k % 2) * 128 + k / 2;
        const int high = form == kEightBitA16 ? low + 128 : low + 256;
        pair[low] = (int8_t)((uint16_t)q[i] & 0xff);
        pair[high] = (int8_t)((uint16_t)q[i] >> 8);
      }
    }
  }
  return 0;
}

/* w4a16 and w6a16 (`six`, a constant after inlining): asymmetric 4- or
 * 6-bit groups with the inputs rounded to f16 (`bf16`: bf16) and taken as
 * int16. */
static inline __attribute__((always_inline)) int
int16_input_rows(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *zeros,
                 halide_buffer_t *out, int bf16, const int six) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (six ? !spark_six_bit_rows_fit(x, w, scales, zeros, out, kGroup)
          : !spark_linear_fits(x, w, out, 2, kGroup, 1) ||
                !spark_groups_fit(x, scales, kGroup) ||
                !spark_groups_fit(x, zeros, kGroup))
    return -1;
  const enum pair_form form = six ? kSixBitA16 : kFourBitA16;
  int16_inputs in;
  if (prepare_int16(x, bf16, form, &in) != 0)
    return -1;
  const int groups = K / kGroup, s_stride = scales->dim[1].stride;
  const int rows_max = rows_at_once(groups, s_stride);
  const weight_rows rows_of_w =
      weight_rows_of(w, six ? (size_t)spark_six_bit_row_bytes(K) : K / 2);
  const uint16_t *s = (const uint16_t *)scales->host,
                 *z = (const uint16_t *)zeros->host;
  const size_t sides = (size_t)(N - 1) * s_stride + groups;
  float *o = (float *)out->host;
  const int os = out->dim[1].stride;
  const size_t per_token = (size_t)in.pairs * SPARK_PAIR_X(form);
  uint8_t tail[256] __attribute__((aligned(128)));
  for (int n = 0; n < N;) {
    const int rows = n + 1 < N ? rows_max : 1;
    for (int t = 0; t < T; ++t) {
      const float *power = in.power + (size_t)t * groups;
      const float *total = in.total + (size_t)t * groups;
      float acc[2] = {0.0f, 0.0f};
      for (int p0 = 0; p0 < in.pairs; p0 += 16) {
        const int g0 = 2 * p0, count = groups - g0 < 32 ? groups - g0 : 32;
        const size_t at = (size_t)n * s_stride + g0;
        /* scale x (power x sum of code x int16 input - zero x total) */
        const lane_floats lanes = {float_bits(
            block_sums(&rows_of_w, n, rows, K, in.bytes + (size_t)t * per_token,
                       tail, p0, form),
            0)};
        const lane_floats scale = {half_bits(s + at, s + sides)};
        const lane_floats zero = {half_bits(z + at, z + sides)};
        SPARK_EACH_ROW(rows, count, {
          const int g = g0 + i % (rows == 2 ? 16 : 32);
          acc[row] += scale.value[i] *
                      (lanes.value[i] * power[g] - zero.value[i] * total[g]);
        })
      }
      for (int row = 0; row < rows; ++row)
        o[(size_t)t * os + n + row] = acc[row];
    }
    n += rows;
  }
  spark_scratch_put(in.bytes);
  spark_scratch_put(in.power);
  spark_scratch_put(in.total);
  return 0;
}

/* w4a16 with f16 (bf16) inputs: x f32 [K, T], w u8 [K/2, N], scales and
 * zeros f16 [K/128, N], out f32 [N, T]; out = sum over groups of scale *
 * sum_k (code - zero) * the input rounded to f16 (bf16), each input taken
 * as an int16 multiple of its group's power of two. */
int spark_vrmpy_linear_w4a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return int16_input_rows(x, w, scales, zeros, out, 0, 0);
}

int spark_vrmpy_linear_w4a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                   halide_buffer_t *scales,
                                   halide_buffer_t *zeros,
                                   halide_buffer_t *out) {
  return int16_input_rows(x, w, scales, zeros, out, 1, 0);
}

/* w6a16: as w4a16, with 6-bit codes (w u8 [3K/4, N], spark_six_bit_top). */
int spark_vrmpy_linear_w6a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *zeros,
                                  halide_buffer_t *out) {
  return int16_input_rows(x, w, scales, zeros, out, 0, 1);
}

int spark_vrmpy_linear_w6a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                   halide_buffer_t *scales,
                                   halide_buffer_t *zeros,
                                   halide_buffer_t *out) {
  return int16_input_rows(x, w, scales, zeros, out, 1, 1);
}

static int w8a16(halide_buffer_t *x, halide_buffer_t *w,
                 halide_buffer_t *scales, halide_buffer_t *out, int bf16) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, kGroup, 1))
    return -1;
  int16_inputs in;
  if (prepare_int16(x, bf16, kEightBitA16, &in) != 0)
    return -1;
  const int groups = K / kGroup;
  const weight_rows rows_of_w = weight_rows_of(w, K);
  const float *row_scales = (const float *)scales->host;
  float *o = (float *)out->host;
  const int os = out->dim[1].stride;
  const size_t per_token = (size_t)in.pairs * SPARK_PAIR_X(kEightBitA16);
  uint8_t tail[256] __attribute__((aligned(128)));
  for (int n = 0; n < N;) {
    const int rows = n + 1 < N ? rows_at_once(groups, groups) : 1;
    for (int t = 0; t < T; ++t) {
      const float *power = in.power + (size_t)t * groups;
      float acc[2] = {0.0f, 0.0f};
      for (int p0 = 0; p0 < in.pairs; p0 += 16) {
        const int g0 = 2 * p0, count = groups - g0 < 32 ? groups - g0 : 32;
        /* power x sum of code x int16 input */
        const lane_floats lanes = {float_bits(
            block_sums(&rows_of_w, n, rows, K, in.bytes + (size_t)t * per_token,
                       tail, p0, kEightBitA16),
            0)};
        SPARK_EACH_ROW(rows, count, {
          acc[row] += lanes.value[i] * power[g0 + i % (rows == 2 ? 16 : 32)];
        })
      }
      for (int row = 0; row < rows; ++row)
        o[(size_t)t * os + n + row] = acc[row] * row_scales[n + row];
    }
    n += rows;
  }
  spark_scratch_put(in.bytes);
  spark_scratch_put(in.power);
  spark_scratch_put(in.total);
  return 0;
}

/* w8a16 with f16 (bf16) inputs: x f32 [K, T], w s8 [K, N], scales f32 [N],
 * out f32 [N, T]; out = scale * sum_k code * the input rounded to f16
 * (bf16), each input taken as an int16 multiple of its group's (128)
 * power of two. */
int spark_vrmpy_linear_w8a16_xf16(halide_buffer_t *x, halide_buffer_t *w,
                                  halide_buffer_t *scales,
                                  halide_buffer_t *out) {
  return w8a16(x, w, scales, out, 0);
}

int spark_vrmpy_linear_w8a16_xbf16(halide_buffer_t *x, halide_buffer_t *w,
                                   halide_buffer_t *scales,
                                   halide_buffer_t *out) {
  return w8a16(x, w, scales, out, 1);
}
