/* spark_dsp_imp.c - written into the hexagon/ folder of a spark-compile
 * --target=s25 bundle.
 *
 * The DSP side of spark_dsp.idl: the implementation qaic's spark_dsp_skel.c
 * calls. Build with the Hexagon SDK (hexagon-clang, QuRT) into the DSP
 * shared object together with spark_dsp_skel.c, hexagon/libspark_model.a
 * and runtime/lib/runtime.c compiled for the DSP, with hexagon/ (this
 * folder: spark_model.h names the part's entry point) and runtime/include on
 * the include path. Not compiled or run by spark-compile's tests (they need
 * the SDK and a device). */
#include "spark_dsp.h" /* from qaic */
#include "HAP_farf.h"
#include "spark/runtime.h"
#include "spark_model.h" /* SPARK_MODEL_DEFINITION: the part's entry point */

#include <stdlib.h>

typedef struct spark_dsp_context {
  spark_model *model;
  spark_session *session;
} spark_dsp_context;

int spark_dsp_open(const char *uri, remote_handle64 *handle) {
  (void)uri;
  spark_dsp_context *c = calloc(1, sizeof(spark_dsp_context));
  if (!c)
    return AEE_ENOMEMORY;
  *handle = (remote_handle64)c;
  return AEE_SUCCESS;
}

int spark_dsp_close(remote_handle64 handle) {
  spark_dsp_context *c = (spark_dsp_context *)handle;
  if (c) {
    spark_session_destroy(c->session);
    spark_model_close(c->model);
    free(c);
  }
  return AEE_SUCCESS;
}

int spark_dsp_load(remote_handle64 handle, const char *pack_path,
                   int *vocab_size, int *max_chunk) {
  spark_dsp_context *c = (spark_dsp_context *)handle;
  char message[256] = "";
  spark_open_params params = spark_open_params_default();
  params.error_message = message;
  params.error_message_bytes = sizeof(message);
  if (spark_model_open(SPARK_MODEL_DEFINITION(), pack_path, &params,
                       &c->model) != SPARK_OK) {
    FARF(ERROR, "spark: %s", message);
    return AEE_EFAILED;
  }
  if (spark_session_create(c->model, NULL, &c->session) != SPARK_OK)
    return AEE_ENOMEMORY;
  spark_model_info info;
  spark_model_get_info(c->model, &info);
  *vocab_size = info.vocab_size;
  *max_chunk = info.max_chunk;
  return AEE_SUCCESS;
}

int spark_dsp_step(remote_handle64 handle, const int *ids, int ids_len,
                   int pos0, int n_logits, float *logits, int logits_len) {
  spark_dsp_context *c = (spark_dsp_context *)handle;
  spark_model_info info;
  if (!c->session || spark_model_get_info(c->model, &info) != SPARK_OK ||
      pos0 != spark_session_position(c->session) || n_logits < 1 ||
      n_logits > ids_len || logits_len < n_logits * info.vocab_size)
    return AEE_EBADPARM;
  /* One call evaluates the whole chunk: the step driver runs every kernel
   * of every layer here, on the DSP. */
  float *rows = n_logits == ids_len ? logits : NULL;
  if (spark_session_eval(c->session, (const int32_t *)ids, ids_len, 0, rows) !=
      SPARK_OK)
    return AEE_EFAILED;
  if (!rows) {
    const float *last;
    spark_session_logits(c->session, &last);
    for (int i = 0; i < info.vocab_size; ++i)
      logits[i] = last[i];
  }
  return AEE_SUCCESS;
}

int spark_dsp_reset(remote_handle64 handle) {
  spark_dsp_context *c = (spark_dsp_context *)handle;
  return c->session && spark_session_reset(c->session) == SPARK_OK
             ? AEE_SUCCESS
             : AEE_EFAILED;
}
