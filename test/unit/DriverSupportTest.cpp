//===- DriverSupportTest.cpp - the fixed C of every step driver -----------===//
//
// targets/common/lib/driver_support.h, compiled as C (DriverSupportCheck.c):
// the choice of ISA variant, the step's argument check, cache-row writes (ring
// slots, bf16 / f16 rounding), Halide views and the profile and layer-probe
// hooks. Expected values are worked out by hand.
//
//===----------------------------------------------------------------------===//
#include "spark/model_abi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

extern "C" {
int32_t check_step_of(int32_t variant, int32_t pos0, int32_t n,
                      int32_t n_logits, int32_t max_chunk, int32_t max_context);
void cache_write_of(void *cache, int32_t dtype, int32_t ring_slots,
                    int32_t width, const float *src, int32_t src_stride,
                    int32_t pos0, int32_t n);
int32_t dtype_code(char which);
int view_of(void *storage, const void *host, int32_t code, int32_t bits,
            int32_t rank, const int32_t *extent_stride, int64_t *out);
size_t view_size(void);
typedef void (*probe_fn)(void *user, int32_t layer, int32_t rows, int32_t width,
                         const float *hidden, int32_t row_stride);
void step_with_hooks(uint64_t *ns, uint64_t (*clock)(void), probe_fn probe,
                     void *user, int32_t index, int32_t layer,
                     const float *rows);
void dispatch_of(const int *has, int *calls, int32_t *index, const char **name,
                 const char **reason);
const spark_model_def *defined_of(void);
int definition_fill_count(void);
const char *no_dispatch_reason(void);
int torn_hooks_of(int loads);
}

namespace {

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// One dispatch's answers (DriverSupportCheck.c's dispatch_of).
struct Dispatch {
  int calls[3] = {};
  int32_t index[2] = {-2, -2};
  const char *name[2] = {}, *reason[2] = {};
};

Dispatch dispatchWith(int best, int middle, int base, const char *only) {
  if (only)
    setenv("SPARK_TEST_VARIANT", only, 1);
  else
    unsetenv("SPARK_TEST_VARIANT");
  const int has[3] = {best, middle, base};
  Dispatch d;
  dispatch_of(has, d.calls, d.index, d.name, d.reason);
  unsetenv("SPARK_TEST_VARIANT");
  return d;
}

TEST(DriverSupport, DispatchTakesTheBestVariantOnce) {
  // The CPU runs the middle and base variants: the middle one is taken,
  // after asking best and middle once; later questions ask no CPU check.
  Dispatch d = dispatchWith(0, 1, 1, nullptr);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(d.index[i], 1);
    EXPECT_STREQ(d.name[i], "test-middle");
    EXPECT_EQ(d.reason[i], nullptr);
  }
  EXPECT_EQ(d.calls[0], 1);
  EXPECT_EQ(d.calls[1], 1);
  EXPECT_EQ(d.calls[2], 0);
  // Every variant runs: the first.
  d = dispatchWith(1, 1, 1, nullptr);
  EXPECT_EQ(d.index[0], 0);
  EXPECT_STREQ(d.name[0], "test-best");
  EXPECT_EQ(no_dispatch_reason(), nullptr);
}

TEST(DriverSupport, DispatchRestrictedByTheEnvironment) {
  // The variable picks base over best, still only if the CPU runs it.
  Dispatch d = dispatchWith(1, 1, 1, "base");
  EXPECT_EQ(d.index[1], 2);
  EXPECT_STREQ(d.name[1], "test-base");
  EXPECT_EQ(d.calls[0], 0); // best's check is not asked
  // It names a variant the CPU does not run, or none: no variant (-1), and the
  // restricted message rather than the unsupported one.
  for (const char *only : {"base", "nonesuch"}) {
    d = dispatchWith(1, 1, 0, only);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(d.index[i], -1) << only;
      EXPECT_STREQ(d.name[i], "none") << only;
      EXPECT_STREQ(d.reason[i], "restricted") << only;
    }
  }
}

TEST(DriverSupport, DispatchWithoutAVariant) {
  Dispatch d = dispatchWith(0, 0, 0, nullptr);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(d.index[i], -1);
    EXPECT_STREQ(d.name[i], "none");
    EXPECT_STREQ(d.reason[i], "unsupported");
  }
  EXPECT_EQ(d.calls[0] + d.calls[1] + d.calls[2], 3); // decided once
}

TEST(DriverSupport, CheckStepRanges) {
  const int32_t k = 2; // the third variant
  // Chunks of at most 8 tokens in 32 positions.
  EXPECT_EQ(check_step_of(k, 0, 1, 1, 8, 32), 0);
  EXPECT_EQ(check_step_of(k, 24, 8, 0, 8, 32), 0); // the last 8 positions
  EXPECT_EQ(check_step_of(k, 25, 8, 0, 8, 32), -1);
  EXPECT_EQ(check_step_of(k, 0, 9, 1, 8, 32), -1);
  EXPECT_EQ(check_step_of(k, 0, 0, 0, 8, 32), -1);
  EXPECT_EQ(check_step_of(k, -1, 1, 1, 8, 32), -1);
  EXPECT_EQ(check_step_of(k, 0, 2, 3, 8, 32), -1);  // more logits than rows
  EXPECT_EQ(check_step_of(k, 0, 2, -1, 8, 32), -1); // negative logits
  EXPECT_EQ(check_step_of(0, 0, 1, 1, 8, 32), 0);
  EXPECT_EQ(check_step_of(-1, 0, 1, 1, 8, 32), -1); // no variant runs here
  // pos0 + n would overflow int32_t.
  EXPECT_EQ(check_step_of(k, std::numeric_limits<int32_t>::max(), 8, 0, 8, 32),
            -1);
}

TEST(DriverSupport, DefinitionFilledOnceUnderRacingCallers) {
  // Eight threads ask for the definition at once: all get the same filled
  // struct, and it was filled once (the fill takes a while, so the others
  // arrive while it runs and wait).
  std::vector<std::thread> threads;
  std::vector<const spark_model_def *> got(8, nullptr);
  std::vector<int> vocab(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      got[size_t(t)] = defined_of();
      vocab[size_t(t)] = got[size_t(t)]->vocab_size;
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(definition_fill_count(), 1);
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(got[size_t(t)], got[0]);
    EXPECT_EQ(vocab[size_t(t)], 64); // filled before it was returned
  }
  EXPECT_EQ(got[0]->num_layers, 4);
  EXPECT_EQ(defined_of(), got[0]);
  EXPECT_EQ(definition_fill_count(), 1);
}

TEST(DriverSupport, CacheWriteRingSlots) {
  // A ring of 4 slots of 3 floats; rows of the source 5 floats apart. Rows
  // for positions 3, 4, 5 land in slots 3, 0, 1; slot 2 keeps its value.
  std::vector<float> cache(4 * 3, -1.0f), src(3 * 5);
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = float(i);
  cache_write_of(cache.data(), dtype_code('f'), 4, 3, src.data(), 5, 3, 3);
  const std::vector<float> expected = {5,  6,  7,  10, 11, 12,
                                       -1, -1, -1, 0,  1,  2};
  EXPECT_EQ(cache, expected);
}

TEST(DriverSupport, CacheWriteLinearBF16RoundsToNearestEven) {
  // Slots 2 and 3 of a linear cache of 2-element rows.
  const float halfway = bitsToFloat(0x3f808000u); // 1 + 2^-8: a tie
  const float above = bitsToFloat(0x3f808001u);   // just above the tie
  const float src[4] = {halfway, above, bitsToFloat(0x7fc00001u), -2.5f};
  std::vector<uint16_t> cache(4 * 2, 0xdeadu);
  cache_write_of(cache.data(), dtype_code('b'), 0, 2, src, 2, 2, 2);
  EXPECT_EQ(cache[0], 0xdeadu); // slots 0 and 1 untouched
  EXPECT_EQ(cache[3], 0xdeadu);
  EXPECT_EQ(cache[4], 0x3f80u); // the tie goes to the even 1.0
  EXPECT_EQ(cache[5], 0x3f81u);
  EXPECT_EQ(cache[6] & 0x7fc0u, 0x7fc0u); // a NaN stays a NaN
  EXPECT_EQ(cache[7], 0xc020u);           // -2.5
}

TEST(DriverSupport, CacheWriteF16Ranges) {
  const float src[8] = {1.0f,
                        65504.0f,              // the largest f16
                        65520.0f,              // rounds up to infinity
                        std::ldexp(1.0f, -24), // the least subnormal
                        std::ldexp(1.0f, -25), // half of it: a tie, to 0
                        std::ldexp(1.5f, -25), // above the tie
                        -0.0f,
                        std::ldexp(1.0f, -14)}; // the least normal
  std::vector<uint16_t> cache(8);
  cache_write_of(cache.data(), dtype_code('h'), 0, 8, src, 8, 0, 1);
  const std::vector<uint16_t> expected = {0x3c00u, 0x7bffu, 0x7c00u, 0x0001u,
                                          0x0000u, 0x0001u, 0x8000u, 0x0400u};
  EXPECT_EQ(cache, expected);
}

TEST(DriverSupport, ViewDescribesRowsInnerFirst) {
  std::vector<unsigned char> storage(view_size(), 0x5a);
  float data[64];
  // A [rows = 5] x [16 of a 64-float row] f32 view.
  const int32_t extentStride[8] = {16, 1, 5, 64, 0, 0, 0, 0};
  int64_t out[3 + 4 * 2];
  ASSERT_TRUE(view_of(storage.data(), data + 8, 2, 32, 2, extentStride, out));
  const int64_t expected[] = {2, 32, 1, 0, 16, 1, 0, 0, 5, 64, 0};
  EXPECT_EQ(std::vector<int64_t>(out, out + 11),
            std::vector<int64_t>(expected, expected + 11));
}

struct Probed {
  int calls = 0;
  int32_t layer = 0, rows = 0, width = 0, stride = 0;
  const float *hidden = nullptr;
};

void probe(void *user, int32_t layer, int32_t rows, int32_t width,
           const float *hidden, int32_t stride) {
  Probed *p = static_cast<Probed *>(user);
  ++p->calls;
  *p = {p->calls, layer, rows, width, stride, hidden};
}

uint64_t ticks;
uint64_t tickingClock() { return ticks += 40; } // 40 ns a reading

TEST(DriverSupport, HooksTimeAndProbe) {
  uint64_t ns[3] = {0, 0, 0};
  Probed probed;
  const float rows[6] = {};
  // Call 1 takes 40 ns, twice; layer 3's rows reach the probe.
  step_with_hooks(ns, tickingClock, probe, &probed, 1, 3, rows);
  step_with_hooks(ns, tickingClock, probe, &probed, 1, 3, rows);
  EXPECT_EQ(ns[0], 0u);
  EXPECT_EQ(ns[1], 80u);
  EXPECT_EQ(ns[2], 0u);
  EXPECT_EQ(probed.calls, 2);
  EXPECT_EQ(probed.layer, 3);
  EXPECT_EQ(probed.rows, 2);
  EXPECT_EQ(probed.width, 2);
  EXPECT_EQ(probed.stride, 3);
  EXPECT_EQ(probed.hidden, rows);
  // Hooks removed: nothing is timed or probed.
  step_with_hooks(nullptr, nullptr, nullptr, nullptr, 1, 3, rows);
  EXPECT_EQ(ns[1], 80u);
  EXPECT_EQ(probed.calls, 2);
}

// A step loads the probe with its own user and the profile with its own
// clock while another thread installs and removes them (a probe checked
// twice around its user was called with a NULL user, once in ~300 runs of
// e2e/test_two_models_in_one_process).
TEST(DriverSupport, HooksAreNeverTorn) { EXPECT_EQ(torn_hooks_of(2000000), 0); }

} // namespace
