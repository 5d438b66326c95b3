/* runtime.h - the spark runtime: load a weight pack, keep explicit caches,
 * prefill, decode and sample with a model library built by spark-compile.
 *
 *   #include "spark/runtime.h"
 *   #include "spark_model.h"            // generated: spark_model_definition()
 *   spark_model *model;
 *   spark_open_params params = spark_open_params_default();
 *   if (spark_model_open(spark_model_definition(), "out/model.spkw", &params,
 *                        &model) != SPARK_OK) ...
 *
 * Conventions: opaque handles with create/destroy pairs; every function
 * returns a spark_status (no aborts, no exceptions); out-parameters come
 * last. A model is immutable after open and may be shared by threads; a
 * session is used by one thread at a time. Each model library carries its
 * own kernels and worker threads (set by spark_open_params.num_threads),
 * private to it: one program may link several libraries, each built with
 * its own --entry-point. */
#ifndef SPARK_RUNTIME_H
#define SPARK_RUNTIME_H

#include "spark/model_abi.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum spark_status {
  SPARK_OK = 0,
  SPARK_ERROR_INVALID_ARGUMENT = 1, /* a NULL handle, a size of 0, ... */
  SPARK_ERROR_IO = 2,               /* the pack cannot be opened or mapped */
  SPARK_ERROR_BAD_PACK = 3,         /* magic, version, size or checksum wrong */
  SPARK_ERROR_PACK_MISMATCH = 4,    /* pack built for another model/target/ABI */
  SPARK_ERROR_UNSUPPORTED_CPU = 5,  /* the library cannot run on this CPU */
  SPARK_ERROR_TOKEN_OUT_OF_RANGE = 6,
  SPARK_ERROR_CONTEXT_FULL = 7, /* the session's caches hold no more positions */
  SPARK_ERROR_OUT_OF_MEMORY = 8,
  SPARK_ERROR_KERNEL = 9,       /* a kernel reported an error */
  SPARK_ERROR_NO_LOGITS = 10,   /* nothing evaluated yet */
  SPARK_ERROR_BAD_SNAPSHOT = 11, /* damaged, or not a session snapshot */
} spark_status;

/* A static English description of a status. */
const char *spark_status_string(spark_status status);
/* The runtime's version, "MAJOR.MINOR.PATCH". */
const char *spark_runtime_version(void);

typedef struct spark_model spark_model;
typedef struct spark_session spark_session;

/* When spark_model_open verifies the tensors' checksums. */
enum {
  SPARK_VERIFY_NONE = 0,
  /* Before spark_model_open returns: the whole pack is read once, on one
   * thread per core whatever num_threads says (the pass is bound by memory
   * and over in tens of milliseconds). The default. */
  SPARK_VERIFY_AT_OPEN = 1,
  /* On a thread of its own (with one helper per further core), started by
   * spark_model_open, which returns once the header and the tensor table
   * are validated. The first step of any session runs beside the pass and
   * then waits for its verdict: a damaged pack makes spark_session_eval
   * return SPARK_ERROR_BAD_PACK (as does every later call that runs a step),
   * and nothing computed from it leaves the session.
   * spark_model_wait_verified waits for the verdict. Where the runtime has
   * no threads (Hexagon), the same as AT_OPEN. */
  SPARK_VERIFY_IN_BACKGROUND = 2,
};

typedef struct spark_open_params {
  /* SPARK_VERIFY_NONE, _AT_OPEN (the default) or _IN_BACKGROUND. */
  int verify_checksums;
  /* Kernel worker threads; 0 keeps the current setting (default: one per
   * core). Per model library (each library has its own worker pool): a
   * model of another library keeps its own count, but opening a second
   * model of the same library with a different count changes it for both.
   * Open with 0 to leave it alone. */
  int num_threads;
  /* Optional buffer that receives a message naming what failed. */
  char *error_message;
  size_t error_message_bytes;
} spark_open_params;

spark_open_params spark_open_params_default(void);

/* Waits for the checksum pass of a model opened with
 * SPARK_VERIFY_IN_BACKGROUND (returns at once otherwise, or once waited
 * for): SPARK_OK, or SPARK_ERROR_BAD_PACK with a sentence naming the first
 * failing tensor in `message` (when given). */
spark_status spark_model_wait_verified(spark_model *model, char *message,
                                       size_t message_bytes);

/* Maps pack_path and validates it against def (magic, version, ABI hash,
 * config hash, target, tensor table, checksums). Weights stay mapped: no
 * copy, no repacking. */
spark_status spark_model_open(const spark_model_def *def,
                              const char *pack_path,
                              const spark_open_params *params,
                              spark_model **out_model);
void spark_model_close(spark_model *model);

typedef struct spark_model_info {
  int32_t vocab_size;
  int32_t max_context;
  int32_t max_chunk;
  int32_t num_caches;
  size_t arena_bytes;
  size_t pack_bytes;
  const char *target;
  const char *dispatch; /* code path the kernels take on this CPU */
  const char *dispatch_reason; /* why a better path is not taken, or NULL */
  int32_t num_layers;
} spark_model_info;

spark_status spark_model_get_info(const spark_model *model,
                                  spark_model_info *out_info);

/* Calls probe(user, layer, ...) after every decoder layer of every step the
 * model's library runs, in this process (NULL removes it): a diagnostic hook
 * (spark-fidelity compares layer outputs of two builds with it). The hook is
 * one slot of the model's library, read atomically once at the start of
 * each step: setting it while other threads step is safe, and steps already
 * running finish with the hook they started with. */
spark_status spark_model_set_layer_probe(spark_model *model,
                                         spark_layer_probe probe, void *user);

/* The kernel calls one step makes (kind and decoder layer of each), for
 * profiles. *out_calls stays valid while the model is open. */
spark_status spark_model_get_calls(const spark_model *model,
                                   int32_t *out_num_calls,
                                   const spark_call_def **out_calls);

/* Profiling hook: while ns_per_call is non-NULL (num_calls entries), every
 * step of every session of this model's library, in this process, adds the
 * nanoseconds of call i, measured with clock_ns, to ns_per_call[i]. A
 * diagnostic like the layer probe, read the same way; the additions are not
 * atomic, so profile one thread's steps at a time. */
spark_status spark_model_set_profile(spark_model *model, uint64_t *ns_per_call,
                                     uint64_t (*clock_ns)(void));

/* Bytes of cache tensor i (0 <= i < num_caches; 2 per layer, keys first). */
spark_status spark_cache_bytes(const spark_model *model, int32_t index,
                               size_t *out_bytes);

/* A session: caches (owned by the session, or by the caller when
 * cache_buffers is non-NULL: then num_caches pointers of spark_cache_bytes
 * each, 64-byte aligned, that must outlive the session), a scratch arena and
 * the logits of the last evaluated token. */
spark_status spark_session_create(spark_model *model, void *const *cache_buffers,
                                  spark_session **out_session);
void spark_session_destroy(spark_session *session);

/* Forgets all positions (caches need no clearing: unwritten slots are never
 * read). */
spark_status spark_session_reset(spark_session *session);
/* Positions evaluated so far. */
int32_t spark_session_position(const spark_session *session);
/* The cache tensors themselves, for the application to inspect or copy. */
spark_status spark_session_cache(spark_session *session, int32_t index,
                                 void **out_data);

/* Snapshot / restore the whole session state (position, last logits,
 * caches). A snapshot carries a magic, the build's ABI and config hashes and
 * a checksum: restore refuses one of another build
 * (SPARK_ERROR_PACK_MISMATCH), a damaged one (SPARK_ERROR_BAD_SNAPSHOT) or
 * one of the wrong size (SPARK_ERROR_INVALID_ARGUMENT), and then leaves the
 * session as it was. */
spark_status spark_session_snapshot_bytes(const spark_session *session,
                                          size_t *out_bytes);
spark_status spark_session_snapshot(const spark_session *session, void *buffer,
                                    size_t buffer_bytes);
spark_status spark_session_restore(spark_session *session, const void *buffer,
                                   size_t buffer_bytes);

/* Evaluates n tokens after the current position in chunks of at most
 * chunk tokens (0: the model's max_chunk). When logits is non-NULL it
 * receives [n][vocab] floats, one row per token; otherwise only the last
 * token's logits are computed. Arguments are checked before anything runs
 * (a bad token or a full context changes nothing). If a kernel fails in a
 * later chunk, the chunks before it stay evaluated: spark_session_position
 * says how far it got (snapshot first to be able to roll back). */
spark_status spark_session_eval(spark_session *session, const int32_t *tokens,
                                int32_t n, int32_t chunk, float *logits);
/* Evaluates one token (a decode step). */
spark_status spark_session_decode(spark_session *session, int32_t token);
/* Logits of the last evaluated token: [vocab] floats, valid until the next
 * call on the session. */
spark_status spark_session_logits(const spark_session *session,
                                  const float **out_logits);

typedef struct spark_sampler_params {
  float temperature; /* <= 0: greedy */
  int32_t top_k;     /* <= 0: no limit */
  float top_p;       /* >= 1: no limit */
  uint64_t seed;
} spark_sampler_params;

spark_sampler_params spark_sampler_params_default(void);

typedef struct spark_sampler spark_sampler;
spark_status spark_sampler_create(const spark_sampler_params *params,
                                  int32_t vocab_size,
                                  spark_sampler **out_sampler);
void spark_sampler_destroy(spark_sampler *sampler);
/* Picks a token from logits [vocab]. -INFINITY marks a token that must not
 * be picked (a grammar's mask); a NaN or +INFINITY logit, or a row with
 * every token masked, is SPARK_ERROR_INVALID_ARGUMENT. spark_sampler_create
 * refuses a NaN or infinite temperature and a top_p that is NaN or <= 0. */
spark_status spark_sampler_sample(spark_sampler *sampler, const float *logits,
                                  int32_t *out_token);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_RUNTIME_H */
