/* amx_linear.c - a full-depth AMX tile microkernel for bf16 prefill GEMMs.
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
 * Compiled with -mamx-tile -mamx-bf16; entered only after the driver's
 * CPUID and arch_prctl checks. */
#include "HalideRuntime.h"

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

typedef struct amx_job {
  const uint16_t *w;      /* [N][K] bf16 */
  const uint16_t *packed; /* [K/2][TP][2] bf16 */
  float *out;             /* [T][out_stride] */
  int K, N, T, TP, out_stride;
} amx_job;

static uint16_t to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

/* One task: rows [32 * block, 32 * block + 32) for every token. */
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
  const size_t a_stride = (size_t)job->K * 2, b_stride = (size_t)job->TP * 4;
  float c[16][16];
  for (int t0 = 0; t0 < job->TP; t0 += 16) {
    _tile_zero(0);
    _tile_zero(1);
    for (int k0 = 0; k0 < job->K; k0 += 32) {
      _tile_loadd(2, job->w + (size_t)n0 * job->K + k0, a_stride);
      _tile_loadd(3, job->w + (size_t)(n0 + 16) * job->K + k0, a_stride);
      _tile_loadd(4, job->packed + ((size_t)(k0 / 2) * job->TP + t0) * 2,
                  b_stride);
      _tile_dpbf16ps(0, 2, 4);
      _tile_dpbf16ps(1, 3, 4);
    }
    for (int half = 0; half < 2; ++half) {
      if (half == 0)
        _tile_stored(0, c, 64);
      else
        _tile_stored(1, c, 64);
      /* c[n][t] -> out[t][n] for the tokens that exist. */
      for (int t = 0; t < 16 && t0 + t < job->T; ++t)
        for (int n = 0; n < 16; ++n)
          job->out[(size_t)(t0 + t) * job->out_stride + n0 + 16 * half + n] =
              c[n][t];
    }
  }
  _tile_release();
  return 0;
}

int spark_amx_linear_bf16(halide_buffer_t *x, halide_buffer_t *w,
                          halide_buffer_t *out) {
  const int K = x->dim[0].extent, T = x->dim[1].extent, N = w->dim[1].extent;
  if (K % 32 != 0 || N % 32 != 0 || w->dim[0].extent != K ||
      out->dim[0].extent != N || out->dim[1].extent != T)
    return -1;
  const int TP = (T + 15) / 16 * 16, xs = x->dim[1].stride;
  const float *xf = (const float *)x->host;
  uint16_t *packed = NULL;
  if (posix_memalign((void **)&packed, 64, (size_t)K / 2 * TP * 4) != 0)
    return -1;
  for (int kp = 0; kp < K / 2; ++kp)
    for (int t = 0; t < TP; ++t)
      for (int i = 0; i < 2; ++i)
        packed[((size_t)kp * TP + t) * 2 + i] =
            t < T ? to_bf16(xf[(size_t)t * xs + 2 * kp + i]) : 0;
  amx_job job = {(const uint16_t *)w->host, packed, (float *)out->host,
                 K, N, T, TP, out->dim[1].stride};
  int rc = halide_do_par_for(NULL, amx_rows_task, 0, N / 32, (uint8_t *)&job);
  free(packed);
  return rc;
}
