/* amx_linear.c - full-depth AMX tile microkernels for prefill GEMMs: bf16
 * (tdpbf16ps) and int8 (tdpbssd, w8a8 builds).
 *
 * Same interface as the Halide prefill kernels it replaces (spark-compile
 * --amx-kernel=tiles): out(n, t) = sum_k w(k, n) * x(k, t) with x f32 [K, T],
 * w bf16 [K, N] (the pack's row-major weight rows) and out f32 [N, T].
 * Halide 14 lowers each tile product with K = 2; here every tdpbf16ps covers
 * a whole tile depth (K = 32). Weight rows load as A tiles straight from the
 * pack; the activations are packed once per call into the B operand's VNNI
 * layout (bf16 pairs). Each task multiplies 32 weight rows (two A tiles)
 * by 16 tokens (one B tile) at a time and writes the transposed result.
 * Needs K % 32 == 0 and N % 32 == 0 (spark-compile only uses it then).
 * The int8 kernel (w8a8) quantizes each token to int8 codes with its own
 * scale, packs the codes in groups of 4 along K (the B operand's layout),
 * and every tdpbssd covers K = 64 of int8 weights x int8 codes into int32;
 * needs K % 64 == 0 and N % 32 == 0.
 * Compiled with -mamx-tile -mamx-bf16 -mamx-int8; entered only after the
 * driver's CPUID and arch_prctl checks. */
#include "HalideRuntime.h"
#include "microkernel_support.h"

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct tile_config {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

static uint16_t to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

/* One task: rows [32 * block, 32 * block + 32) for every token. `dot`
 * takes a C tile, an A tile and the B tile (int8 or bf16 products); every A
 * tile row holds 64 bytes of K, so a step covers `k_step` elements. */
typedef struct amx_job {
  const uint8_t *w;      /* [N][row_bytes] */
  const uint8_t *packed; /* B operand: [K / k_pack][TP][4 bytes] */
  float *out;            /* [T][out_stride] */
  const float *row_scales, *token_scales; /* int8: [N], [TP] */
  int K, N, T, TP, out_stride, row_bytes, k_step, int8;
} amx_job;

static int amx_rows_task(void *user_context, int block, uint8_t *closure) {
  (void)user_context;
  const amx_job *job = (const amx_job *)closure;
  tile_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.palette = 1;
  for (int t = 0; t < 5; ++t) { /* tmm0-1: C, tmm2-3: A, tmm4: B */
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  _tile_loadconfig(&cfg);
  const int n0 = 32 * block;
  const size_t a_stride = (size_t)job->row_bytes, b_stride = (size_t)job->TP * 4;
  const size_t b_rows_per_step = 16; /* B rows of 4 bytes per token */
  union {
    float f[16][16];
    int32_t i[16][16];
  } c;
  for (int t0 = 0; t0 < job->TP; t0 += 16) {
    _tile_zero(0);
    _tile_zero(1);
    for (int k0 = 0, step = 0; k0 < job->K; k0 += job->k_step, ++step) {
      const size_t a_offset = (size_t)step * 64;
      _tile_loadd(2, job->w + (size_t)n0 * a_stride + a_offset, a_stride);
      _tile_loadd(3, job->w + (size_t)(n0 + 16) * a_stride + a_offset, a_stride);
      _tile_loadd(4, job->packed + ((size_t)step * b_rows_per_step * job->TP + t0) * 4,
                  b_stride);
      if (job->int8) {
        _tile_dpbssd(0, 2, 4);
        _tile_dpbssd(1, 3, 4);
      } else {
        _tile_dpbf16ps(0, 2, 4);
        _tile_dpbf16ps(1, 3, 4);
      }
    }
    for (int half = 0; half < 2; ++half) {
      if (half == 0)
        _tile_stored(0, &c, 64);
      else
        _tile_stored(1, &c, 64);
      /* c[n][t] -> out[t][n] for the tokens that exist. */
      const int nb = n0 + 16 * half;
      for (int t = 0; t < 16 && t0 + t < job->T; ++t)
        for (int n = 0; n < 16; ++n)
          job->out[(size_t)(t0 + t) * job->out_stride + nb + n] =
              job->int8 ? (float)c.i[n][t] * job->row_scales[nb + n] *
                              job->token_scales[t0 + t]
                        : c.f[n][t];
    }
  }
  _tile_release();
  return 0;
}

int spark_amx_linear_bf16(halide_buffer_t *x, halide_buffer_t *w,
                          halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % SPARK_MK_AMX_BF16_DEPTH != 0 || N % SPARK_MK_AMX_ROWS != 0 ||
      w->dim[0].extent != K || out->dim[0].extent != N ||
      out->dim[1].extent != T)
    return -1;
  const int TP = (T + 15) / 16 * 16, xs = x->dim[1].stride;
  const float *xf = (const float *)x->host;
  uint16_t *packed = NULL;
  if (spark_scratch_get((void **)&packed, (size_t)K / 2 * TP * 4) != 0)
    return -1;
  for (int kp = 0; kp < K / 2; ++kp)
    for (int t = 0; t < TP; ++t)
      for (int i = 0; i < 2; ++i)
        packed[((size_t)kp * TP + t) * 2 + i] =
            t < T ? to_bf16(xf[(size_t)t * xs + 2 * kp + i]) : 0;
  amx_job job = {w->host, (const uint8_t *)packed, (float *)out->host, NULL,
                 NULL, K, N, T, TP, out->dim[1].stride, K * 2, 32, 0};
  int rc = halide_do_par_for(NULL, amx_rows_task, 0, N / 32, (uint8_t *)&job);
  spark_scratch_put(packed);
  return rc;
}

int spark_amx_linear_w8a8(halide_buffer_t *x, halide_buffer_t *w,
                          halide_buffer_t *scales, float input_scale,
                          halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (!spark_linear_fits(x, w, out, 1, SPARK_MK_AMX_INT8_DEPTH,
                         SPARK_MK_AMX_ROWS))
    return -1;
  const int TP = (T + 15) / 16 * 16;
  int8_t *codes, *packed = NULL;
  float *token_scales;
  if (spark_quantize_rows(x, input_scale, &codes, &token_scales) != 0)
    return -1;
  if (spark_scratch_get((void **)&packed, (size_t)K * TP) != 0) {
    spark_scratch_put(codes);
    spark_scratch_put(token_scales);
    return -1;
  }
  /* B operand: groups of 4 consecutive K codes per token, [K/4][TP][4]. */
  memset(packed, 0, (size_t)K * TP);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k)
      packed[((size_t)(k / 4) * TP + t) * 4 + k % 4] = codes[(size_t)t * K + k];
  amx_job job = {w->host, (const uint8_t *)packed, (float *)out->host,
                 (const float *)scales->host, token_scales, K, N, T, TP,
                 out->dim[1].stride, K, 64, 1};
  int rc = halide_do_par_for(NULL, amx_rows_task, 0, N / 32, (uint8_t *)&job);
  spark_scratch_put(packed);
  spark_scratch_put(codes);
  spark_scratch_put(token_scales);
  return rc;
}
