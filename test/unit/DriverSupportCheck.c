/* DriverSupportCheck.c - targets/common/lib/driver_support.h compiled as C,
 * as generated drivers compile it, with its helpers exported for
 * DriverSupportTest.cpp (which sees Halide's buffer type as C++ does). */
#include "driver_support.h"

#include <pthread.h>

int32_t check_step_of(int32_t variant, int32_t pos0, int32_t n,
                      int32_t n_logits, int32_t max_chunk,
                      int32_t max_context) {
  return spark_check_step(variant, pos0, n, n_logits, max_chunk, max_context);
}

void cache_write_of(void *cache, int32_t dtype, int32_t ring_slots,
                    int32_t width, const float *src, int32_t src_stride,
                    int32_t pos0, int32_t n) {
  spark_cache_write(cache, dtype, ring_slots, width, src, src_stride, pos0, n);
}

int32_t dtype_code(char which) {
  return which == 'f'   ? SPARK_DTYPE_F32
         : which == 'b' ? SPARK_DTYPE_BF16
                        : SPARK_DTYPE_F16;
}

/* A view of `rank` dimensions of `host` in `storage` (a spark_view_t);
 * writes its type, dimensions and each dimension's min, extent, stride and
 * flags to `out` (3 + 4 x rank values), and whether buffer.dim points into
 * the storage. */
int view_of(void *storage, const void *host, int32_t code, int32_t bits,
            int32_t rank, const int32_t *extent_stride, int64_t *out) {
  spark_view_t *view = (spark_view_t *)storage;
  const int32_t *e = extent_stride;
  halide_buffer_t *b = spark_view(view, host, code, bits, rank, e[0], e[1],
                                  e[2], e[3], e[4], e[5], e[6], e[7]);
  out[0] = b->type.code;
  out[1] = b->type.bits;
  out[2] = b->type.lanes;
  for (int i = 0; i < rank; ++i) {
    out[3 + 4 * i] = b->dim[i].min;
    out[4 + 4 * i] = b->dim[i].extent;
    out[5 + 4 * i] = b->dim[i].stride;
    out[6 + 4 * i] = (int64_t)b->dim[i].flags;
  }
  return b == &view->buffer && b->dim == view->dim &&
         b->host == (uint8_t *)host && b->dimensions == rank &&
         b->device == 0 && b->flags == 0;
}

size_t view_size(void) { return sizeof(spark_view_t); }

/* The hooks as a step sees them: installs them, loads them as a step does,
 * then times one call (begin at the clock's first reading, end at its
 * second) as call `index`, and hands `rows` to the probe as `layer`. */
void step_with_hooks(uint64_t *ns, uint64_t (*clock)(void),
                     spark_layer_probe probe, void *user, int32_t index,
                     int32_t layer, const float *rows) {
  set_profile(ns, clock);
  set_layer_probe(probe, user);
  spark_hooks h = spark_load_hooks();
  const uint64_t started = spark_profile_begin(&h);
  spark_profile_end(&h, index, started);
  spark_probe(&h, layer, 2, 2, rows, 3);
}

/* Loads the hooks `loads` times while another thread installs a probe with
 * its user and a profile with its clock and removes them again, as fast as
 * it can; returns how many loads saw a probe without its user or a profile
 * without its clock (a torn set), or -1 if the thread did not start. */
static int hooks_stop;
static uint64_t hooks_ns[1];
static int hooks_user;
static void hooks_probe(void *user, int32_t layer, int32_t rows, int32_t width,
                        const float *x, int32_t stride) {
  (void)user, (void)layer, (void)rows, (void)width, (void)x, (void)stride;
}
static uint64_t hooks_clock(void) { return 0; }
static void *toggle_hooks(void *unused) {
  (void)unused;
  while (!__atomic_load_n(&hooks_stop, __ATOMIC_ACQUIRE)) {
    set_layer_probe(hooks_probe, &hooks_user);
    set_profile(hooks_ns, hooks_clock);
    set_layer_probe(NULL, NULL);
    set_profile(NULL, NULL);
  }
  return NULL;
}

int torn_hooks_of(int loads) {
  pthread_t writer;
  __atomic_store_n(&hooks_stop, 0, __ATOMIC_RELEASE);
  if (pthread_create(&writer, NULL, toggle_hooks, NULL) != 0)
    return -1;
  /* the writer under way first */
  while (__atomic_load_n(&spark_hooks_generation, __ATOMIC_RELAXED) < 1000u)
    ;
  int torn = 0;
  for (int i = 0; i < loads; ++i) {
    const spark_hooks h = spark_load_hooks();
    torn += (h.probe != NULL) != (h.probe_user != NULL) ||
            (h.profile != NULL) != (h.clock != NULL);
  }
  __atomic_store_n(&hooks_stop, 1, __ATOMIC_RELEASE);
  pthread_join(writer, NULL);
  set_layer_probe(NULL, NULL);
  set_profile(NULL, NULL);
  return torn;
}

/* A dispatch of three variants, "best", "middle" and "base", whose CPU
 * checks answer has[0..2] and count their calls in calls[0..2]; the
 * environment variable SPARK_TEST_VARIANT restricts it. Each call of
 * dispatch_of sets a dispatch anew (undecided) and asks it, in order, for
 * its variant's position, its name and why it cannot run, twice each (the
 * second answers come from the first decision), into index[2], name[2] and
 * reason[2]. */
static int dispatch_has[3], dispatch_calls[3];
static int has_best(void) { return ++dispatch_calls[0], dispatch_has[0]; }
static int has_middle(void) { return ++dispatch_calls[1], dispatch_has[1]; }
static int has_base(void) { return ++dispatch_calls[2], dispatch_has[2]; }

void dispatch_of(const int *has, int *calls, int32_t *index, const char **name,
                 const char **reason) {
  static const spark_variant_def variants[] = {
      {"best", "test-best", has_best},
      {"middle", "test-middle", has_middle},
      {"base", "test-base", has_base}};
  static spark_dispatch d;
  d.chosen = &variants[0]; /* a stale decision spark_set_dispatch clears */
  d.decided = 1;
  spark_set_dispatch(&d, "SPARK_TEST_VARIANT", "restricted", "unsupported", 3,
                     variants);
  memcpy(dispatch_has, has, sizeof(dispatch_has));
  memset(dispatch_calls, 0, sizeof(dispatch_calls));
  for (int i = 0; i < 2; ++i) {
    index[i] = spark_select_index(&d);
    name[i] = spark_dispatch_name(&d);
    reason[i] = spark_unsupported_reason(&d);
  }
  memcpy(calls, dispatch_calls, sizeof(dispatch_calls));
}

/* The definition as a generated driver's entry point returns it: filled by
 * spark_define_model() (the driver's function, here this test's) on the
 * first call only; it counts its calls and takes a while, so that racing
 * callers overlap it. */
static spark_model_def test_definition;
static int definition_fills;
static void spark_define_model(void) {
  ++definition_fills;
  for (volatile int i = 0; i < 1000000; ++i) {
  }
  test_definition.vocab_size = 64;
  test_definition.num_layers = 4;
}

const spark_model_def *defined_of(void) {
  return spark_defined(&test_definition);
}

int definition_fill_count(void) { return definition_fills; }

const char *no_dispatch_reason(void) { return spark_no_dispatch_reason(); }
