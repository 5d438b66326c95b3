/* avx2_attention.c - attention for the avx2 variant (x86_attention.h: one
 * task per key / value head and token). Same interface as the Halide
 * attention kernel, plus the layer's constants (scale, window, ring), which
 * come from a wrapper the generated driver defines per kernel. Needs
 * hd % 8 == 0; f32, bf16 or f16 caches. Compiled with -mavx2 -mfma -mf16c. */
#include "x86_attention.h"

int spark_avx2_attention(halide_buffer_t *q, halide_buffer_t *k,
                         halide_buffer_t *v, halide_buffer_t *k_cache,
                         halide_buffer_t *v_cache, halide_buffer_t *gate,
                         int32_t pos0, int32_t cached, halide_buffer_t *out,
                         float scale, int32_t window, int32_t ring) {
  attention_job job;
  if (spark_attention_job(&job, q, k, v, k_cache, v_cache, gate, pos0, cached,
                          out, scale, window, ring) != 0)
    return -1;
  return halide_do_par_for(NULL, attention_task, 0, job.kv_heads * job.n,
                           (uint8_t *)&job);
}
