/* driver_support.h - the fixed part of every generated step driver.
 *
 * spark-compile writes a driver per build (spark_model_driver.c), all of it
 * EmitC printed by MLIR's C emitter: the kernels' declarations, one dispatch
 * function per kernel of the plan (the variant's function for it), the step
 * function lowered from the plan (passes/lib/LowerStepToEmitC.cpp), and the
 * function that fills the model's definition and tables. What does not
 * depend on the model is here: choosing the ISA variant this CPU runs,
 * filling the definition once, describing memory as Halide buffers, writing
 * cache rows, and the profile and layer-probe hooks a step reads once at its
 * start. The driver includes this file first;
 * it is compiled into the library with it and nothing else includes it. */
#ifndef SPARK_DRIVER_SUPPORT_H
#define SPARK_DRIVER_SUPPORT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "HalideRuntime.h"
#include "spark/model_abi.h"

extern int halide_set_num_threads(int n);
extern void spark_pool_set_threads(int n); /* thread_pool.c */

/* One ISA variant of a driver: the name the environment variable gives it,
 * the name dispatch_name() reports (its target family's, then its own), and
 * the CPU check of its target's dispatch header. The driver's kernel
 * dispatch functions take the variant's position among the driver's
 * variants. */
typedef struct spark_variant_def {
  const char *name;
  const char *full_name;
  int (*cpu_has)(void);
} spark_variant_def;

/* A driver's CPU dispatch: its variants, best first; the environment
 * variable that restricts the choice to one of them (still only if the CPU
 * has its features; for testing), and what unsupported_reason() says when
 * that variable names none this CPU runs (`restricted`) or when no variant
 * runs at all (`unsupported`). The choice is made once: CPUID, the
 * environment and the AMX permission do not change while the process runs,
 * and the AMX check is a system call. */
typedef struct spark_dispatch {
  const char *env;
  const char *restricted;
  const char *unsupported;
  int32_t count;
  const spark_variant_def *variants;
  const spark_variant_def *chosen; /* when decided */
  int32_t decided;
} spark_dispatch;

/* Sets a dispatch's variants and messages (the driver's, once, when it
 * fills the definition; still undecided). */
static inline void spark_set_dispatch(spark_dispatch *d, const char *env,
                                      const char *restricted,
                                      const char *unsupported, int32_t count,
                                      const spark_variant_def *variants) {
  const spark_dispatch set = {env,  restricted, unsupported, count, variants,
                              NULL, 0};
  *d = set;
}

/* The best variant this CPU runs, or NULL. */
static inline const spark_variant_def *
spark_find_variant(const spark_dispatch *d) {
  const char *only = getenv(d->env);
  for (int32_t i = 0; i < d->count; ++i) {
    const spark_variant_def *v = &d->variants[i];
    if ((!only || strcmp(only, v->name) == 0) && v->cpu_has())
      return v;
  }
  return NULL;
}

/* spark_find_variant(d), decided on the first call; racing first callers
 * compute the same value. */
static inline const spark_variant_def *spark_select_variant(spark_dispatch *d) {
  if (!__atomic_load_n(&d->decided, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&d->chosen, spark_find_variant(d), __ATOMIC_RELAXED);
    __atomic_store_n(&d->decided, 1, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&d->chosen, __ATOMIC_RELAXED);
}

/* The selected variant's position among d's variants, or -1 (no step
 * runs). */
static inline int32_t spark_select_index(spark_dispatch *d) {
  const spark_variant_def *v = spark_select_variant(d);
  return v ? (int32_t)(v - d->variants) : -1;
}

/* NULL if a variant runs here, else why not. */
static inline const char *spark_unsupported_reason(spark_dispatch *d) {
  if (spark_select_variant(d))
    return NULL;
  return getenv(d->env) ? d->restricted : d->unsupported;
}

/* The selected variant's full name, or "none". */
static inline const char *spark_dispatch_name(spark_dispatch *d) {
  const spark_variant_def *v = spark_select_variant(d);
  return v ? v->full_name : "none";
}

/* The driver's dispatch, which the generated driver's definition function
 * sets (spark_set_driver_dispatch) before the entry point returns the
 * definition, so before any function below runs. */
static spark_dispatch spark_driver_dispatch;

static inline void
spark_set_driver_dispatch(const char *env, const char *restricted,
                          const char *unsupported, int32_t count,
                          const spark_variant_def *variants) {
  spark_set_dispatch(&spark_driver_dispatch, env, restricted, unsupported,
                     count, variants);
}

/* The step's variant (its position; -1: no variant runs here), and the model
 * ABI's spark_model_def::unsupported_reason and ::dispatch_name. */
static inline int32_t select_variant(void) {
  return spark_select_index(&spark_driver_dispatch);
}

static inline const char *unsupported_reason(void) {
  return spark_unsupported_reason(&spark_driver_dispatch);
}

static inline const char *dispatch_name(void) {
  return spark_dispatch_name(&spark_driver_dispatch);
}

/* The generated driver's function that fills the model's definition, its
 * tables and the dispatch (declared here with its prototype; spark_defined
 * calls it). */
static void spark_define_model(void);

/* The definition `def`, filled by spark_define_model() on the first call; a
 * caller racing the first one waits until it is filled. */
static int32_t spark_definition_state; /* 0 empty, 1 filling, 2 filled */
static inline const spark_model_def *spark_defined(spark_model_def *def) {
  if (__atomic_load_n(&spark_definition_state, __ATOMIC_ACQUIRE) == 2)
    return def;
  int32_t empty = 0;
  if (__atomic_compare_exchange_n(&spark_definition_state, &empty, 1, 0,
                                  __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
    spark_define_model();
    __atomic_store_n(&spark_definition_state, 2, __ATOMIC_RELEASE);
  }
  while (__atomic_load_n(&spark_definition_state, __ATOMIC_ACQUIRE) != 2) {
  }
  return def;
}

/* spark_model_def::dispatch_reason of a target whose best variant needs no
 * permission beyond CPUID (all but the AMX builds). */
static inline const char *spark_no_dispatch_reason(void) { return NULL; }

/* spark_model_def::set_num_threads of targets without the library's own
 * pool (thread_pool.c): Halide's. */
static inline void spark_halide_set_threads(int threads) {
  halide_set_num_threads(threads);
}

/* One kernel argument: a Halide buffer and its dimensions. */
typedef struct spark_view_t {
  halide_buffer_t buffer;
  halide_dimension_t dim[4];
} spark_view_t;

/* Describes host memory as a Halide buffer of `rank` dimensions (extent and
 * stride of each, inner first; those past the rank are ignored), min 0. Not
 * inlined: a step calls it a few hundred times (tens of nanoseconds in all),
 * and inlined into every call it doubled the time clang takes over a
 * driver. */
__attribute__((noinline)) static halide_buffer_t *
spark_view(spark_view_t *view, const void *host, int32_t code, int32_t bits,
           int32_t rank, int32_t e0, int32_t s0, int32_t e1, int32_t s1,
           int32_t e2, int32_t s2, int32_t e3, int32_t s3) {
  const int32_t extent[4] = {e0, e1, e2, e3}, stride[4] = {s0, s1, s2, s3};
  halide_buffer_t *b = &view->buffer;
  memset(b, 0, sizeof(*b));
  b->host = (uint8_t *)host;
  b->type.code = (uint8_t)code;
  b->type.bits = (uint8_t)bits;
  b->type.lanes = 1;
  b->dimensions = rank;
  b->dim = view->dim;
  for (int i = 0; i < rank; ++i) {
    view->dim[i].min = 0;
    view->dim[i].extent = extent[i];
    view->dim[i].stride = stride[i];
    view->dim[i].flags = 0;
  }
  return b;
}

/* Cache rows of 16-bit elements: each f32 key or value rounded to nearest
   even (NaN stays NaN, f16 overflow goes to infinity, f16 subnormals kept). */
static inline uint16_t spark_bf16_bits(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline uint16_t spark_f16_bits(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u)
    return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) /* 65520 and above (and infinity) */
    return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) /* a normal f16 */
    return (uint16_t)(sign |
                      ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
  if (a <= 0x33000000u) /* at most half the least subnormal */
    return (uint16_t)sign;
  const int shift = 126 - (int)(a >> 23); /* 14 .. 24 */
  const uint32_t m = (a & 0x7fffffu) | 0x800000u, half = 1u << (shift - 1);
  const uint32_t rest = m & ((half << 1) - 1u);
  uint32_t k = m >> shift;
  if (rest > half || (rest == half && (k & 1u)))
    ++k;
  return (uint16_t)(sign | k);
}

/* Copies the step's n rows of keys or values (`width` floats each, row t at
 * src + t * src_stride) into their slots of a cache of `dtype` elements
 * (SPARK_DTYPE_F32, _BF16 or _F16): slot pos0 + t, modulo ring_slots for a
 * ring (0 for a linear cache). */
static inline void spark_cache_write(void *cache, int32_t dtype,
                                     int32_t ring_slots, int32_t width,
                                     const float *src, int32_t src_stride,
                                     int32_t pos0, int32_t n) {
  for (int32_t t = 0; t < n; ++t) {
    const int32_t slot = ring_slots ? (pos0 + t) % ring_slots : pos0 + t;
    const float *row = src + (size_t)t * src_stride;
    if (dtype == SPARK_DTYPE_F32) {
      memcpy((float *)cache + (size_t)slot * width, row,
             (size_t)width * sizeof(float));
      continue;
    }
    uint16_t *out = (uint16_t *)cache + (size_t)slot * width;
    for (int32_t i = 0; i < width; ++i)
      out[i] = dtype == SPARK_DTYPE_BF16 ? spark_bf16_bits(row[i])
                                         : spark_f16_bits(row[i]);
  }
}

/* Whether a step can run: a variant was chosen (variant >= 0) and its
 * arguments are in range. 0, or -1 (and no call runs). */
static inline int32_t spark_check_step(int32_t variant, int32_t pos0, int32_t n,
                                       int32_t n_logits, int32_t max_chunk,
                                       int32_t max_context) {
  if (variant < 0 || n < 1 || n > max_chunk || n_logits < 0 || n_logits > n ||
      pos0 < 0 || pos0 > max_context - n)
    return -1;
  return 0;
}

/* The profile and the layer probe are process-wide: a step() reads them
 * once, at its start, as one coherent set (spark_load_hooks). Their writers
 * and readers go through a sequence lock: a writer takes the generation
 * from even to odd, stores, and makes it even again; a reader retries while
 * the generation is odd or has moved. Checking that the probe had not
 * changed was not enough: a reader that loaded one installation's probe,
 * then the NULL user of a removal, then saw the next installation's probe
 * again called the probe with a NULL user (seen under load in
 * e2e/test_two_models_in_one_process, about once in 300 runs). */
static unsigned spark_hooks_generation;
static uint64_t *spark_installed_profile;
static uint64_t (*spark_installed_clock)(void);
static spark_layer_probe spark_installed_probe;
static void *spark_installed_probe_user;

/* Takes the generation from even to odd (writers one at a time); returns
 * the even value it had. */
static inline unsigned spark_hooks_write_begin(void) {
  unsigned g = __atomic_load_n(&spark_hooks_generation, __ATOMIC_RELAXED);
  for (;;) {
    if (g & 1u) {
      g = __atomic_load_n(&spark_hooks_generation, __ATOMIC_RELAXED);
      continue;
    }
    if (__atomic_compare_exchange_n(&spark_hooks_generation, &g, g + 1u, 0,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      break;
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  return g;
}

static inline void spark_hooks_write_end(unsigned g) {
  __atomic_store_n(&spark_hooks_generation, g + 2u, __ATOMIC_RELEASE);
}

static void set_profile(uint64_t *ns, uint64_t (*clock)(void)) {
  const unsigned g = spark_hooks_write_begin();
  __atomic_store_n(&spark_installed_profile, ns, __ATOMIC_RELAXED);
  __atomic_store_n(&spark_installed_clock, clock, __ATOMIC_RELAXED);
  spark_hooks_write_end(g);
}

static void set_layer_probe(spark_layer_probe probe, void *user) {
  const unsigned g = spark_hooks_write_begin();
  __atomic_store_n(&spark_installed_probe, probe, __ATOMIC_RELAXED);
  __atomic_store_n(&spark_installed_probe_user, user, __ATOMIC_RELAXED);
  spark_hooks_write_end(g);
}

/* What one step reads of the hooks. */
typedef struct spark_hooks {
  uint64_t *profile;
  uint64_t (*clock)(void);
  spark_layer_probe probe;
  void *probe_user;
} spark_hooks;

static inline spark_hooks spark_load_hooks(void) {
  spark_hooks h;
  unsigned before, after;
  do { /* a set no writer changed meanwhile */
    before = __atomic_load_n(&spark_hooks_generation, __ATOMIC_ACQUIRE);
    h.profile = __atomic_load_n(&spark_installed_profile, __ATOMIC_RELAXED);
    h.clock = __atomic_load_n(&spark_installed_clock, __ATOMIC_RELAXED);
    h.probe = __atomic_load_n(&spark_installed_probe, __ATOMIC_RELAXED);
    h.probe_user =
        __atomic_load_n(&spark_installed_probe_user, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    after = __atomic_load_n(&spark_hooks_generation, __ATOMIC_RELAXED);
  } while ((before & 1u) || before != after);
  return h;
}

/* The clock before call `index` of the profile, and its time added after. */
static inline uint64_t spark_profile_begin(const spark_hooks *h) {
  return h->profile ? h->clock() : 0;
}

static inline void spark_profile_end(const spark_hooks *h, int32_t index,
                                     uint64_t started) {
  if (h->profile)
    h->profile[index] += h->clock() - started;
}

/* Hands rows [rows][width] (row r at x + r * stride) to the layer probe,
 * if one is installed, as `id` (a layer, or a matrix input's probe id). */
static inline void spark_probe(const spark_hooks *h, int32_t id, int32_t rows,
                               int32_t width, const float *x, int32_t stride) {
  if (h->probe)
    h->probe(h->probe_user, id, rows, width, x, stride);
}

#endif /* SPARK_DRIVER_SUPPORT_H */
