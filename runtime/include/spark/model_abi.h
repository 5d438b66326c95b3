/* model_abi.h - the interface between a compiled model library and the runtime.
 *
 * spark-compile generates libspark_model.a whose only exported entry point is
 * spark_model_definition(), returning a spark_model_def. The runtime
 * (runtime.h) drives any model through this struct; applications do not call
 * its members directly. Plain C, versioned by SPARK_MODEL_ABI_VERSION. */
#ifndef SPARK_MODEL_ABI_H
#define SPARK_MODEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPARK_MODEL_ABI_VERSION 3

/* Element types of pack tensors and caches. */
typedef enum spark_dtype {
  SPARK_DTYPE_F32 = 0,
  SPARK_DTYPE_F16 = 1,
  SPARK_DTYPE_BF16 = 2,
  SPARK_DTYPE_I8 = 3, /* quantized codes (scales in a companion tensor) */
  SPARK_DTYPE_U8 = 4, /* bytes of two 4-bit codes (low nibble first) */
} spark_dtype;

/* How a pack tensor is laid out (what its kernel reads). */
typedef enum spark_layout {
  SPARK_LAYOUT_ROW_MAJOR = 0, /* [rows][cols], the checkpoint's own order */
  SPARK_LAYOUT_TABLE =
      1, /* precomputed table (RoPE cos/sin) [positions][dims] */
  /* 4-bit weights with their group scales (and zero points) in each row
   * (U8 [rows][row bytes]): a row's K/2 code bytes, its K/group f16 scales,
   * then (asymmetric groups) its K/group f16 zero points, zero-padded to a
   * multiple of 64 bytes, so one stream holds everything a row needs. */
  SPARK_LAYOUT_GROUPED_ROWS = 2,
} spark_layout;

/* Bytes of one SPARK_LAYOUT_GROUPED_ROWS row of `in` 4-bit weights in groups
 * of `group`, with zero points unless `symmetric`. */
static inline int64_t spark_grouped_row_bytes(int64_t in, int64_t group,
                                              int symmetric) {
  const int64_t bytes = in / 2 + (in / group) * 2 * (symmetric ? 1 : 2);
  return (bytes + 63) / 64 * 64;
}

/* Bytes of one row of `in` 6-bit codes (row-major layout): in/2 bytes of
 * their low nibbles, two a byte, low nibble first (as 4-bit codes), then
 * in/4 bytes of their top two bits (spark_six_bit_top). */
static inline int64_t spark_six_bit_row_bytes(int64_t in) {
  return in / 2 + in / 4;
}

/* Where the top two bits of code k of a row of `in` 6-bit codes lie: byte
 * *byte of the row (from its start) at bits *shift..*shift+1. The tops come
 * in blocks of 128 codes (the last block may be shorter: in - 128 b codes,
 * a multiple of 4), 32 bytes a block (fewer for a shorter one): with h half
 * the block's codes, byte i of block b holds codes 2i and 2i+1 of the block
 * in bits 0-1 and 2-3, codes h+2i and h+2i+1 in bits 4-5 and 6-7. So the
 * byte of a block's first 64 nibble bytes' tops is the same i for nibble
 * bytes i and i+32: a vector kernel broadcasts the block's 32 bytes to both
 * halves of a 64-byte register and takes each half's bits in place. */
static inline void spark_six_bit_top(int64_t in, int64_t k, int64_t *byte,
                                     int *shift) {
  const int64_t b = k / 128, c = k % 128;
  const int64_t left = in - 128 * b, h = (left < 128 ? left : 128) / 2;
  *byte = in / 2 + 32 * b + (c % h) / 2;
  *shift = (int)(2 * (c % 2) + 4 * (c / h));
}

typedef enum spark_cache_layout {
  SPARK_CACHE_LINEAR = 0, /* slot p holds position p */
  SPARK_CACHE_RING = 1,   /* slot p mod slots holds position p */
} spark_cache_layout;

/* One tensor the model reads from the pack, in the order step() expects. */
typedef struct spark_tensor_def {
  const char *name;
  spark_dtype dtype;
  spark_layout layout;
  uint64_t bytes;
} spark_tensor_def;

/* One cache tensor: [slots][kv_heads][head_dim] of dtype. */
typedef struct spark_cache_def {
  spark_cache_layout layout;
  spark_dtype dtype;
  int32_t slots;
  int32_t kv_heads;
  int32_t head_dim;
} spark_cache_def;

/* Called after each decoder layer with its output (the residual stream):
 * rows [rows][width] floats, row r at hidden + r * row_stride. For
 * diagnostics (spark-fidelity); the data is valid during the call only. */
typedef void (*spark_layer_probe)(void *user, int32_t layer, int32_t rows,
                                  int32_t width, const float *hidden,
                                  int32_t row_stride);

/* One call of step(), for profiles: what it runs ("linear", "attention",
 * "rms_norm", "rope", "geglu", "head_gate", "embed", "head" for the logits
 * product, "cache_write", ...) and the decoder layer it belongs to (-1: the
 * embedding, the final norm and the head). */
typedef struct spark_call_def {
  const char *kind;
  int32_t layer;
} spark_call_def;

typedef struct spark_model_def {
  uint32_t abi_version; /* SPARK_MODEL_ABI_VERSION */
  uint64_t abi_hash;    /* tensor table + kernels; must equal the pack's */
  uint64_t config_hash; /* config.json content; must equal the pack's */
  const char *target;   /* e.g. "host"; must equal the pack's */
  int32_t vocab_size;
  int32_t hidden_size;
  int32_t num_layers;
  int32_t max_context; /* positions a session can hold */
  int32_t max_chunk;   /* tokens one step() call accepts */
  int32_t logits_rows; /* rows the logits buffer of step() must hold */
  size_t arena_bytes;  /* scratch one step() needs (per session) */
  int32_t num_tensors;
  const spark_tensor_def *tensors;
  int32_t num_caches; /* 2 per layer: keys then values */
  const spark_cache_def *caches;

  /* Returns 0 if this CPU can run the library (else the reason). */
  const char *(*unsupported_reason)(void);
  /* Which code path step() uses on this CPU, e.g. "x86-avx512". */
  const char *(*dispatch_name)(void);
  /* Sets the worker threads of this library's kernels. */
  void (*set_num_threads)(int threads);
  /* Evaluates tokens ids[0..n) at positions pos0..pos0+n-1 (1 <= n <=
   * max_chunk, pos0 + n <= max_context), reading and updating caches, and
   * writes logits of the last n_logits tokens ([n_logits][vocab]) to logits,
   * a buffer of logits_rows rows (rows past n_logits are scratch).
   * Returns 0 on success. */
  int (*step)(const void *const *weights, void *const *caches, void *arena,
              const int32_t *ids, int32_t pos0, int32_t n, int32_t n_logits,
              float *logits);
  /* Why the build's best code path is not used on this CPU (e.g. AMX
   * unavailable), or NULL. */
  const char *(*dispatch_reason)(void);
  /* Installs (NULL: removes) the layer probe of this library (atomic: a
   * step() reads it once, at its start). */
  void (*set_layer_probe)(spark_layer_probe probe, void *user);
  /* The calls one step() makes, in order. */
  int32_t num_calls;
  const spark_call_def *calls;
  /* Profiling, for the library (read like the probe): while ns is
   * non-NULL, every step() adds to ns[i] the time call i took, as clock()
   * after minus before (clock is the caller's: the library reads no clock
   * of its own). */
  void (*set_profile)(uint64_t *ns, uint64_t (*clock)(void));
} spark_model_def;

#ifdef __cplusplus
}
#endif

#endif /* SPARK_MODEL_ABI_H */
