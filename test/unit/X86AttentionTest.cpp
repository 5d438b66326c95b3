//===- X86AttentionTest.cpp - the x86 variants' attention kernels ---------===//
//
// Runs spark_avx2_attention (avx2_attention.c) and spark_avx512_attention
// (avx512_attention.c: the per-token task for short chunks, the tiled one
// with its online softmax for longer ones) against a double-precision
// attention written here from the kernel interface's definition
// (x86_attention.h): linear and ring caches, a sliding window, keys from the
// cache and from the chunk itself, query heads sharing a key / value head,
// the head-wise gate, chunks shorter and longer than a tile and not a
// multiple of it. A CPU without a kernel's features prints [SKIP].
//
//===----------------------------------------------------------------------===//
#include "HalideRuntime.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

extern "C" {
#define SPARK_ATTENTION_KERNEL(name)                                           \
  int name(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,            \
           halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, int32_t,   \
           int32_t, halide_buffer_t *, float, int32_t, int32_t);
SPARK_ATTENTION_KERNEL(spark_avx2_attention)
SPARK_ATTENTION_KERNEL(spark_avx512_attention)
}

namespace {

using Kernel = int (*)(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                       halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,
                       int32_t, int32_t, halide_buffer_t *, float, int32_t,
                       int32_t);

constexpr int HD = 128, Heads = 8;

/// An f32 buffer [d0, d1, d2] (d2 == 0: two dimensions), dense.
struct Buffer {
  std::vector<float> data;
  halide_buffer_t b{};
  halide_dimension_t d[3]{};
  Buffer(int d0, int d1, int d2 = 0)
      : data(size_t(d0) * d1 * (d2 ? d2 : 1), 0.0f) {
    b.host = reinterpret_cast<uint8_t *>(data.data());
    b.type.code = halide_type_float;
    b.type.bits = 32;
    b.type.lanes = 1;
    b.dimensions = d2 ? 3 : 2;
    b.dim = d;
    d[0] = {0, d0, 1, 0};
    d[1] = {0, d1, d0, 0};
    d[2] = {0, d2, d0 * d1, 0};
  }
  float &at(int a, int c, int e = 0) {
    return data[size_t(e) * d[2].stride + size_t(c) * d[1].stride + a];
  }
};

/// A cache of 16-bit elements (bf16 or f16) holding the values of an f32
/// buffer, each rounded toward zero to the type (which rewrites them in the
/// f32 buffer, so that the reference reads what the kernel reads).
struct Buffer16 {
  std::vector<uint16_t> data;
  halide_buffer_t b{};
  halide_dimension_t d[3]{};
  Buffer16(Buffer &from, bool bf16) : data(from.data.size()) {
    b = from.b;
    for (int i = 0; i < 3; ++i)
      d[i] = from.d[i];
    b.dim = d;
    b.host = reinterpret_cast<uint8_t *>(data.data());
    b.type.code = bf16 ? halide_type_bfloat : halide_type_float;
    b.type.bits = 16;
    for (size_t i = 0; i < data.size(); ++i) {
      uint32_t x;
      std::memcpy(&x, &from.data[i], 4);
      uint32_t back; // the bits of the 16-bit value as an f32
      if (bf16) {
        data[i] = uint16_t(x >> 16);
        back = x & 0xffff0000u;
      } else {
        const uint32_t sign = x & 0x80000000u;
        const int e = int((x >> 23) & 0xff) - 127 + 15;
        if (e <= 0) { // below the normal f16 range: zero
          data[i] = uint16_t(sign >> 16);
          back = sign;
        } else {
          data[i] =
              uint16_t(sign >> 16 | uint32_t(e) << 10 | (x & 0x7fffffu) >> 13);
          back = x & 0xffffe000u;
        }
      }
      std::memcpy(&from.data[i], &back, 4);
    }
  }
};

/// (kernel, tokens in the chunk, cached positions, ring cache, key / value
/// heads, the window of a sliding layer with a linear cache, the caches'
/// elements: "f32", "bf16" or "f16")
struct Case {
  const char *kernel;
  int n, pos0, ring, kv = 2, window = 0;
  const char *cache = "f32";
};

bool cpuHas(const char *kernel) {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (std::string(kernel) == "avx2")
    return avx2;
  return avx2 && __builtin_cpu_supports("avx512f");
}

class X86Attention : public ::testing::TestWithParam<Case> {};

TEST_P(X86Attention, IsTheDefinition) {
  const Case c = GetParam();
  const int KV = c.kv, Group = Heads / KV;
  if (!cpuHas(c.kernel)) {
    std::printf("[SKIP] this CPU has no %s\n",
                std::string(c.kernel) == "avx2" ? "AVX2 and FMA" : "AVX-512F");
    GTEST_SKIP();
  }
  const Kernel kernel = std::string(c.kernel) == "avx2"
                            ? spark_avx2_attention
                            : spark_avx512_attention;
  // A ring of 37 slots with a window of 38 (every slot and the chunk's own
  // keys), or a linear cache of 200 positions (more for a deeper chunk).
  const int slots = c.ring ? 37 : std::max(200, c.pos0),
            window = c.ring ? 38 : c.window;
  const int cached = c.ring ? std::min(c.pos0, slots) : c.pos0;
  const float scale = 1.0f / std::sqrt(float(HD));
  std::mt19937 rng(7 + c.n + 1000 * c.pos0 + c.ring);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Buffer q(HD, Heads, c.n), k(HD, KV, c.n), v(HD, KV, c.n);
  Buffer kc(HD, KV, slots), vc(HD, KV, slots), gate(Heads, c.n);
  Buffer out(HD, Heads, c.n);
  for (Buffer *b : {&q, &k, &v, &kc, &vc, &gate})
    for (float &x : b->data)
      x = normal(rng) * (b == &q ? 2.0f : 1.0f);
  // 16-bit caches: the kernel reads these, the reference the rounded f32s.
  const std::string cacheType = c.cache;
  std::unique_ptr<Buffer16> kc16, vc16;
  if (cacheType != "f32") {
    kc16 = std::make_unique<Buffer16>(kc, cacheType == "bf16");
    vc16 = std::make_unique<Buffer16>(vc, cacheType == "bf16");
  }
  halide_buffer_t *kcb = kc16 ? &kc16->b : &kc.b,
                  *vcb = vc16 ? &vc16->b : &vc.b;
  // Key m as the chunk sees it, and its position (x86_attention.h).
  auto key = [&](Buffer &cache, Buffer &own, int g, int m, int &position) {
    if (m < cached) {
      int back = c.ring ? ((c.pos0 - 1 - m) % slots + slots) % slots : 0;
      position = c.ring ? c.pos0 - 1 - back : m;
      return &cache.at(0, g, m);
    }
    position = c.pos0 + m - cached;
    return &own.at(0, g, m - cached);
  };
  for (int gated = 0; gated < 2; ++gated) {
    SCOPED_TRACE(gated ? "gated" : "not gated");
    std::fill(out.data.begin(), out.data.end(), -7.0f);
    ASSERT_EQ(kernel(&q.b, &k.b, &v.b, kcb, vcb, gated ? &gate.b : nullptr,
                     c.pos0, cached, &out.b, scale, window, c.ring),
              0);
    double worst = 0;
    for (int t = 0; t < c.n; ++t)
      for (int h = 0; h < Heads; ++h) {
        const int g = h / Group, query = c.pos0 + t;
        std::vector<double> score(size_t(cached + c.n), -INFINITY);
        double top = -INFINITY;
        for (int m = 0; m < cached + c.n; ++m) {
          int position;
          const float *kr = key(kc, k, g, m, position);
          if (position > query || (window > 0 && position <= query - window))
            continue;
          double s = 0;
          for (int d = 0; d < HD; ++d)
            s += double(q.at(d, h, t)) * kr[d];
          score[size_t(m)] = s * scale;
          top = std::max(top, score[size_t(m)]);
        }
        std::vector<double> o(HD, 0.0);
        double total = 0;
        for (int m = 0; m < cached + c.n; ++m) {
          if (score[size_t(m)] == -INFINITY)
            continue;
          int position;
          const float *vr = key(vc, v, g, m, position);
          double w = std::exp(score[size_t(m)] - top);
          total += w;
          for (int d = 0; d < HD; ++d)
            o[size_t(d)] += w * vr[d];
        }
        double factor = 1.0 / total;
        if (gated)
          factor /= 1.0 + std::exp(-double(gate.at(h, t)));
        for (int d = 0; d < HD; ++d) {
          double want = o[size_t(d)] * factor;
          double error = std::fabs(out.at(d, h, t) - want);
          worst = std::max(worst, error);
          ASSERT_LE(error, 2e-5 * (1.0 + std::fabs(want)))
              << "token " << t << " head " << h << " d " << d;
        }
      }
    EXPECT_LT(worst, 1e-4);
  }
}

std::string caseName(const ::testing::TestParamInfo<Case> &info) {
  return std::string(info.param.kernel) + "_" + std::to_string(info.param.n) +
         "tokens_at" + std::to_string(info.param.pos0) +
         (info.param.ring ? "_ring" : "_linear") + "_" +
         std::to_string(Heads / info.param.kv) + "heads" +
         (info.param.window ? "_window" + std::to_string(info.param.window)
                            : "") +
         (std::string(info.param.cache) != "f32"
              ? std::string("_") + info.param.cache + "cache"
              : "");
}

// Chunks of 1 and 5 tokens take the per-token task, 8, 17 (a tile of 16
// tokens and one more) and 70 the tiled one; positions 0 (no cache), 30 (a
// ring not yet full) and 130 (a ring that has wrapped; 130 linear slots);
// 4 query heads per key / value head (Spark's), 2 and 8. At 3000 positions
// the per-token task splits a token's keys into 24 ranges (128 keys, the
// last shorter); with a window of 100 on a linear cache, all but the last of
// them see no key. At 9000, into its most ranges (32 of 288 keys). bf16 and f16
// caches: decode, a short chunk (the cache's rows and the chunk's f32 rows in
// one key range) and prefill tiles; on the AVX2 kernel (rows widened per
// task) decode, chunks on a ring and a windowed linear cache. A short chunk on
// a wrapped ring (3 tokens at 130, f32): the ring's oldest slots lie outside
// the last token's window, the runs of slots it sees end at the ring's newest
// slot.
INSTANTIATE_TEST_SUITE_P(
    X86, X86Attention,
    ::testing::Values(Case{"avx2", 1, 30, 0}, Case{"avx2", 17, 130, 1},
                      Case{"avx512", 1, 130, 1}, Case{"avx512", 5, 30, 0},
                      Case{"avx512", 8, 0, 0}, Case{"avx512", 17, 30, 1},
                      Case{"avx512", 17, 130, 1}, Case{"avx512", 3, 130, 1},
                      Case{"avx512", 70, 130, 0}, Case{"avx512", 70, 0, 1},
                      Case{"avx512", 1, 130, 0, 4},
                      Case{"avx512", 20, 130, 1, 4},
                      Case{"avx512", 1, 30, 1, 1}, Case{"avx512", 9, 30, 0, 1},
                      Case{"avx512", 1, 3000, 0}, Case{"avx512", 1, 9000, 0},
                      Case{"avx512", 5, 3000, 0, 2, 100},
                      Case{"avx2", 3, 3000, 0, 2, 100},
                      Case{"avx512", 1, 3000, 0, 2, 0, "bf16"},
                      Case{"avx512", 5, 130, 1, 2, 0, "f16"},
                      Case{"avx512", 17, 130, 1, 2, 0, "bf16"},
                      Case{"avx512", 70, 130, 0, 2, 0, "f16"},
                      Case{"avx2", 1, 3000, 0, 2, 0, "bf16"},
                      Case{"avx2", 5, 130, 1, 2, 0, "f16"},
                      Case{"avx2", 17, 130, 1, 2, 0, "bf16"},
                      Case{"avx2", 3, 3000, 0, 2, 100, "f16"}),
    caseName);

} // namespace
