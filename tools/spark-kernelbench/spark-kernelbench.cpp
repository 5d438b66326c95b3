//===- spark-kernelbench.cpp - decode kernels against memory --------------===//
//
// Runs the x86 decode (one-token) matrix kernels the model libraries use on
// this CPU over the 1.7b's decode shapes, each from memory (distinct copies
// of the matrix with its scales, laid out as the weight pack lays them out,
// filling a pool far larger than the caches) in rounds that
// alternate with a stream over a buffer of the same size and thread count,
// and reports the kernel's GB/s, the stream's and the median of the
// per-round ratios with its quartiles; then the same kernel over one matrix
// small enough for L2, read again and again (what its instructions allow).
// Then the decode attention kernel the same way, over copies of a layer's
// key and value caches: a sliding layer's ring and full layers at depths.
// On a VM whose bandwidth moves from second to second, the ratio of rounds
// a few milliseconds apart is the figure to compare before and after a
// kernel change; spark-bench's roofline column is the whole model's.
//
// A developer's benchmark of the kernels in targets/x86/lib, compiled
// into it as spark-compile compiles them (clang-22, -O2, the same flags);
// not installed.
//
//===----------------------------------------------------------------------===//
#include "ModelLoader.h"
#include "StreamRead.h"

#include "HalideRuntime.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <vector>

extern "C" {
int spark_avx2_linear_w8a8(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, float, halide_buffer_t *);
int spark_avx2_linear_w4a8(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, float, halide_buffer_t *);
int spark_avx2_linear_w4a16_xbf16(halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *);
int spark_avx2_linear_w8a16_xbf16(halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *, halide_buffer_t *);
int spark_vnni_linear_w8a8(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, float, halide_buffer_t *);
int spark_vnni_linear_w4a8(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, float, halide_buffer_t *);
int spark_vnni_linear_w4a16_xbf16(halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *);
int spark_bf16_linear_w8a16(halide_buffer_t *, halide_buffer_t *,
                            halide_buffer_t *, halide_buffer_t *);
int spark_vnni_linear_w6a8(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, halide_buffer_t *, float,
                           halide_buffer_t *);
int spark_vnni_linear_w6a16_xbf16(halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *, halide_buffer_t *,
                                  halide_buffer_t *);
int spark_avx2_attention(halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *, int32_t, int32_t,
                         halide_buffer_t *, float, int32_t, int32_t);
int spark_avx512_attention(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, halide_buffer_t *, int32_t,
                           int32_t, halide_buffer_t *, float, int32_t, int32_t);
void spark_pool_set_threads(int threads);

// What the model libraries take from the Halide runtime: the kernels' parallel
// loops go to thread_pool.c's pool, as they do in a model library.
static halide_do_par_for_t customParFor = nullptr;
int halide_do_par_for(void *userContext, halide_task_t task, int min, int size,
                      uint8_t *closure) {
  if (customParFor)
    return customParFor(userContext, task, min, size, closure);
  for (int i = min; i < min + size; ++i)
    if (int rc = task(userContext, i, closure))
      return rc;
  return 0;
}
int halide_set_num_threads(int threads) { return threads; }
halide_do_par_for_t halide_set_custom_do_par_for(halide_do_par_for_t f) {
  halide_do_par_for_t old = customParFor;
  customParFor = f;
  return old;
}
}

namespace {

const char *const kUsage =
    "usage: spark-kernelbench [-t|--threads 1,2] [--scheme "
    "w4a16,w4a8,w8a16,w8a8]\n"
    "                         [--attention-depths 4096,32704] "
    "[--attention-cache f32]\n"
    "                         [--rounds 20] [--variant avx2]\n"
    "                         [--pool-mib 1024]\n"
    "  Each decode matrix kernel this CPU's model libraries run, at the "
    "1.7b's\n"
    "  shapes, then its decode attention, against a stream of the same "
    "thread\n"
    "  count in alternating rounds.\n"
    "  --rounds: measured rounds per row (4 more are run first and "
    "dropped)\n"
    "  --pool-mib: MiB of distinct matrix copies read from memory (and of "
    "the\n"
    "              stream's buffer); at least 64\n"
    "  --scheme: also w6a16, w6a8 (6-bit rows, the int6 recipe's, with the\n"
    "              inputs of w4a16 and w4a8 builds); none: no matrix rows\n"
    "  --attention-depths: cached positions of the full layers' decode "
    "attention\n"
    "              rows (after one row for the sliding layers' full ring); "
    "none:\n"
    "              no attention rows\n"
    "  --attention-cache f32|bf16|f16: the caches' elements (--kv-cache)\n"
    "  --variant avx2|avx512vnni|avx512bf16: the kernels of that x86 variant\n"
    "              (as SPARK_X86_VARIANT restricts a model library to it),\n"
    "              if this CPU runs it; default: the one its libraries take\n";

int fail(const std::string &message) {
  std::fprintf(stderr, "spark-kernelbench: %s\n", message.c_str());
  return 1;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A dense buffer of 1, 2 or 3 dimensions (extent1 == 0: one; extent2 == 0:
/// at most two).
struct Buffer {
  halide_buffer_t b{};
  halide_dimension_t d[3]{};
  Buffer(void *host, halide_type_code_t code, int bits, int extent0,
         int extent1 = 0, int extent2 = 0) {
    b.host = static_cast<uint8_t *>(host);
    b.type.code = code;
    b.type.bits = uint8_t(bits);
    b.type.lanes = 1;
    b.dimensions = extent1 > 0 ? (extent2 > 0 ? 3 : 2) : 1;
    b.dim = d;
    d[0] = {0, extent0, 1, 0};
    d[1] = {0, extent1, extent0, 0};
    d[2] = {0, extent2, extent0 * extent1, 0};
  }
};

/// Memory from mmap, in 2 MiB pages where the kernel gives them (as the
/// weight pack is mapped).
struct Region {
  uint8_t *data = nullptr;
  size_t bytes = 0;
  explicit Region(size_t size) : bytes(size) {
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return;
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);
#endif
    data = static_cast<uint8_t *>(p);
  }
  ~Region() {
    if (data)
      munmap(data, bytes);
  }
};

struct StreamJob {
  const uint8_t *base;
  size_t bytes;
  int parts;
  spark::LineSum sum;
  uint64_t sink;
};

/// One part of a stream: its lines summed with the widest loads this CPU
/// has, each requested into L2 6 KiB ahead, as the decode rows read (a loop
/// of narrower loads without prefetch read 6-8 GB/s on one thread of an
/// Intel Xeon where the decode rows read 10-15).
int streamTask(void *, int task, uint8_t *closure) {
  auto *job = reinterpret_cast<StreamJob *>(closure);
  const size_t part = job->bytes / size_t(job->parts) / 256 * 256;
  const float sum =
      job->sum(reinterpret_cast<const float *>(job->base + part * size_t(task)),
               part / 64, 6144);
  __atomic_fetch_add(&job->sink, uint64_t(sum != 0), __ATOMIC_RELAXED);
  return 0;
}

/// GB/s of one pass over `bytes` at `base`, split over the pool's threads.
double streamOnce(const uint8_t *base, size_t bytes, int threads) {
  StreamJob job{base, bytes, threads * 8, spark::widestLineSum(), 0};
  double start = now();
  halide_do_par_for(nullptr, streamTask, 0, job.parts,
                    reinterpret_cast<uint8_t *>(&job));
  double seconds = now() - start;
  return double(bytes / size_t(job.parts) / 256 * 256 * size_t(job.parts)) /
         seconds / 1e9;
}

enum class Scheme { W4A16, W4A8, W8A16, W8A8, W6A16, W6A8 };

struct SchemeInfo {
  const char *name;
  Scheme scheme;
};
const SchemeInfo kSchemes[] = {{"w4a16", Scheme::W4A16},
                               {"w4a8", Scheme::W4A8},
                               {"w8a16", Scheme::W8A16},
                               {"w8a8", Scheme::W8A8},
                               {"w6a16", Scheme::W6A16},
                               {"w6a8", Scheme::W6A8}};

bool fourBit(Scheme s) { return s == Scheme::W4A16 || s == Scheme::W4A8; }
bool sixBit(Scheme s) { return s == Scheme::W6A16 || s == Scheme::W6A8; }

/// Bytes of a row's codes (4-bit: of a grouped row, with its scales).
size_t codeRowBytes(Scheme s, int K) {
  return fourBit(s) ? size_t(spark_grouped_row_bytes(K, 128, s == Scheme::W4A8))
         : sixBit(s) ? size_t(spark_six_bit_row_bytes(K))
                     : size_t(K);
}

/// The variant a model library takes on this CPU (X86Schedules.cpp) for
/// decode products.
enum class Variant { None, Avx2, Avx512Vnni, Avx512 };

Variant cpuVariant() {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("f16c");
  bool vnni = avx2 && __builtin_cpu_supports("avx512f") &&
              __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512cd") &&
              __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vl") &&
              __builtin_cpu_supports("avx512vnni");
  if (vnni)
    return __builtin_cpu_supports("avx512bf16") ? Variant::Avx512
                                                : Variant::Avx512Vnni;
  return avx2 ? Variant::Avx2 : Variant::None;
}

const char *variantName(Variant v) {
  switch (v) {
  case Variant::Avx512:
    return "x86-avx512bf16";
  case Variant::Avx512Vnni:
    return "x86-avx512vnni";
  case Variant::Avx2:
    return "x86-avx2";
  case Variant::None:
    break;
  }
  return "none";
}

/// Whether the variant has a hand-written decode kernel for the scheme (the
/// avx512vnni variant runs w8a16 on Halide's, the avx2 one 6-bit rows).
bool hasKernel(Variant v, Scheme s) {
  return !(v == Variant::Avx512Vnni && s == Scheme::W8A16) &&
         !(v == Variant::Avx2 && sixBit(s));
}

/// One matrix of the 1.7b's decode step, in the order a layer calls them
/// (the fused query, key and value projection, the output projection, the
/// fused gate and up projection, the down projection), then the head.
struct Shape {
  const char *what;
  int K, N;
};
const Shape kShapes[] = {{"qkv", 2048, 3072},
                         {"o", 2048, 2048},
                         {"gate/up", 2048, 13312},
                         {"down", 6656, 2048},
                         {"head", 2048, 131072}};

/// One kernel at one shape: the matrix copies and a call. Copies of one
/// matrix of the 1.7b, each laid out as an x86 weight pack lays out a matrix
/// (4-bit: grouped rows, each row's codes, then its f16 group scales and
/// zero points; 8-bit: the f32 row scales, then the codes; 6-bit: the f16
/// group scales, the zero points, then the rows of codes; each 4 KiB
/// aligned), one after the other, so that the calls read every byte from
/// memory and what a kernel prefetches past its rows is the next matrix's,
/// as in a model's step.
class KernelCase {
public:
  KernelCase(Scheme scheme, Variant variant, const Shape &shape,
             size_t poolBytes)
      : scheme(scheme), variant(variant), K(shape.K), N(shape.N),
        rowBytes(codeRowBytes(scheme, K)), codeBytes(size_t(N) * rowBytes),
        sideBytes(fourBit(scheme)  ? 0
                  : sixBit(scheme) ? size_t(N) * (K / 128) * 2
                                   : size_t(N) * 4),
        sides(fourBit(scheme) ? 0 : sixBit(scheme) ? 2 : 1),
        slotBytes(aligned(sideBytes) * size_t(sides) + aligned(codeBytes)),
        copies(int(std::max<size_t>(1, poolBytes / slotBytes))),
        pool(slotBytes * size_t(copies)), x(size_t(K)), out(size_t(N)) {
    if (!pool.data)
      return;
    // Codes in range for every scheme (int8 within +-127, any nibble).
    uint32_t state = 12345;
    for (int c = 0; c < copies; ++c) {
      uint8_t *w = codes(c);
      for (size_t i = 0; i < codeBytes; ++i) {
        state = state * 1664525u + 1013904223u;
        w[i] = uint8_t(state >> 24) &
               (fourBit(scheme) || sixBit(scheme) ? 0xff : 0x7f);
      }
      // Scales and zero points: small positive f16 after each row's codes.
      for (size_t row = 0; fourBit(scheme) && row < size_t(N); ++row) {
        uint16_t *h = reinterpret_cast<uint16_t *>(w + row * rowBytes + K / 2);
        for (size_t i = 0; i < (rowBytes - K / 2) / 2; ++i)
          h[i] = uint16_t(0x2000 + (row + i) % 97);
      }
      // 6-bit: small positive f16 scales and zero points.
      for (int side = 0; sixBit(scheme) && side < 2; ++side) {
        uint16_t *h =
            reinterpret_cast<uint16_t *>(slot(c) + aligned(sideBytes) * side);
        for (size_t i = 0; i < sideBytes / 2; ++i)
          h[i] = uint16_t(0x2000 + i % 97);
      }
      if (!fourBit(scheme) && !sixBit(scheme)) {
        float *f = reinterpret_cast<float *>(slot(c));
        for (size_t i = 0; i < sideBytes / 4; ++i)
          f[i] = 0.001f;
      }
    }
    for (int k = 0; k < K; ++k)
      x[size_t(k)] = float((k * 37) % 101 - 50) * 0.013f;
  }
  bool ok() const { return pool.data != nullptr; }
  const char *kernelName() const {
    bool v = variant != Variant::Avx2;
    switch (scheme) {
    case Scheme::W4A16:
      return v ? "spark_vnni_linear_w4a16_xbf16"
               : "spark_avx2_linear_w4a16_xbf16";
    case Scheme::W4A8:
      return v ? "spark_vnni_linear_w4a8" : "spark_avx2_linear_w4a8";
    case Scheme::W8A16:
      return v ? "spark_bf16_linear_w8a16" : "spark_avx2_linear_w8a16_xbf16";
    case Scheme::W8A8:
      return v ? "spark_vnni_linear_w8a8" : "spark_avx2_linear_w8a8";
    case Scheme::W6A16:
      return "spark_vnni_linear_w6a16_xbf16";
    case Scheme::W6A8:
      return "spark_vnni_linear_w6a8";
    }
    return "";
  }
  /// Bytes one call reads from memory: the rows (and the row scales).
  size_t bytesPerCall() const { return codeBytes + sideBytes * size_t(sides); }
  /// Runs copy `c` of the matrix against the token; 0 on success.
  int call(int c) {
    c %= copies;
    Buffer xb(x.data(), halide_type_float, 32, K, 1);
    Buffer ob(out.data(), halide_type_float, 32, N, 1);
    Buffer wb(codes(c), fourBit(scheme) ? halide_type_uint : halide_type_int, 8,
              fourBit(scheme) ? K / 2 : K, N);
    // 4-bit: the scales and zero points are f16 views of the grouped rows.
    Buffer gb(codes(c) + K / 2, halide_type_float, 16, K / 128, N);
    Buffer zb(codes(c) + K / 2 + 2 * (K / 128), halide_type_float, 16, K / 128,
              N);
    if (fourBit(scheme)) {
      wb.d[1].stride = int(rowBytes);
      gb.d[1].stride = zb.d[1].stride = int(rowBytes / 2);
    }
    Buffer rb(slot(c), halide_type_float, 32, N);
    // 6-bit: dense rows, the scales and zero points tensors of their own.
    Buffer sixRows(codes(c), halide_type_uint, 8, int(rowBytes), N);
    Buffer sixScales(slot(c), halide_type_float, 16, K / 128, N);
    Buffer sixZeros(slot(c) + aligned(sideBytes), halide_type_float, 16,
                    K / 128, N);
    bool v = variant != Variant::Avx2;
    switch (scheme) {
    case Scheme::W4A16:
      return v ? spark_vnni_linear_w4a16_xbf16(&xb.b, &wb.b, &gb.b, &zb.b,
                                               &ob.b)
               : spark_avx2_linear_w4a16_xbf16(&xb.b, &wb.b, &gb.b, &zb.b,
                                               &ob.b);
    case Scheme::W4A8:
      return v ? spark_vnni_linear_w4a8(&xb.b, &wb.b, &gb.b, 0.0f, &ob.b)
               : spark_avx2_linear_w4a8(&xb.b, &wb.b, &gb.b, 0.0f, &ob.b);
    case Scheme::W8A16:
      return v ? spark_bf16_linear_w8a16(&xb.b, &wb.b, &rb.b, &ob.b)
               : spark_avx2_linear_w8a16_xbf16(&xb.b, &wb.b, &rb.b, &ob.b);
    case Scheme::W8A8:
      return v ? spark_vnni_linear_w8a8(&xb.b, &wb.b, &rb.b, 0.0f, &ob.b)
               : spark_avx2_linear_w8a8(&xb.b, &wb.b, &rb.b, 0.0f, &ob.b);
    case Scheme::W6A16:
      return spark_vnni_linear_w6a16_xbf16(&xb.b, &sixRows.b, &sixScales.b,
                                           &sixZeros.b, &ob.b);
    case Scheme::W6A8:
      return spark_vnni_linear_w6a8(&xb.b, &sixRows.b, &sixScales.b,
                                    &sixZeros.b, 0.0f, &ob.b);
    }
    return -1;
  }

private:
  static size_t aligned(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  uint8_t *slot(int c) const { return pool.data + slotBytes * size_t(c); }
  uint8_t *codes(int c) const {
    return slot(c) + aligned(sideBytes) * size_t(sides);
  }

  Scheme scheme;
  Variant variant;
  int K, N;
  size_t rowBytes;             // a row of codes (4-bit: a grouped row)
  size_t codeBytes, sideBytes; // one copy's rows, one side tensor's bytes
  int sides; // side tensors: 1 for 8-bit (row scales), 2 for 6-bit, else 0
  size_t slotBytes;            // one copy, aligned
  int copies;
  Region pool;
  std::vector<float> x, out;
};

/// One decode attention call of the 1.7b (one token, 8 query heads sharing
/// 2 key / value heads, head_dim 256, gated) over a cache of `slots`
/// positions: a full layer's linear cache read to `slots` keys, or a
/// sliding layer's ring of window - 1 = 511 slots, full. Copies of the
/// layer's key and value caches fill the pool, one after the other, as the
/// caches of successive layers lie in a session.
class AttentionCase {
public:
  static constexpr int kHeadDim = 256, kHeads = 8, kKvHeads = 2;
  static constexpr int kWindow = 512;
  /// `cache`: the caches' elements, "f32", "bf16" or "f16".
  AttentionCase(Variant variant, bool sliding, int depth,
                const std::string &cache, size_t poolBytes)
      : variant(variant), sliding(sliding),
        slots(sliding ? kWindow - 1 : depth),
        depth(sliding ? std::max(depth, kWindow - 1) : depth), cache(cache),
        cacheBytes(size_t(slots) * kKvHeads * kHeadDim *
                   (cache == "f32" ? 4 : 2)),
        copies(int(std::max<size_t>(1, poolBytes / (2 * cacheBytes)))),
        pool(2 * cacheBytes * size_t(copies)), q(size_t(kHeadDim) * kHeads),
        k(size_t(kHeadDim) * kKvHeads), v(k.size()), gate(kHeads, 0.5f),
        out(q.size()) {
    if (!pool.data)
      return;
    // Values in -1..1; 16-bit elements: the top half of the f32 (bf16), or
    // sign, exponent 15 + e and 10 bits of mantissa (f16).
    for (size_t i = 0; i < pool.bytes / (cache == "f32" ? 4 : 2); ++i) {
      float x = float(int(i * 2654435761u >> 20) % 201 - 100) * 0.01f;
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      if (cache == "f32") {
        std::memcpy(pool.data + 4 * i, &x, 4);
        continue;
      }
      const int e = int((bits >> 23) & 0xff) - 127 + 15;
      uint16_t h = cache == "bf16" ? uint16_t(bits >> 16)
                   : e <= 0
                       ? uint16_t(0)
                       : uint16_t((bits >> 16 & 0x8000u) | uint32_t(e) << 10 |
                                  (bits & 0x7fffffu) >> 13);
      std::memcpy(pool.data + 2 * i, &h, 2);
    }
    for (size_t i = 0; i < q.size(); ++i)
      q[i] = float(int(i * 37) % 101 - 50) * 0.02f;
    for (size_t i = 0; i < k.size(); ++i)
      k[i] = v[i] = float(int(i * 13) % 41 - 20) * 0.05f;
  }
  bool ok() const { return pool.data != nullptr; }
  const char *kernelName() const {
    return variant == Variant::Avx2 ? "spark_avx2_attention"
                                    : "spark_avx512_attention";
  }
  /// Keys one call reads from the cache.
  int cachedKeys() const { return sliding ? slots : depth; }
  size_t bytesPerCall() const { return 2 * cacheBytes; }
  int call(int c) {
    c %= copies;
    uint8_t *keys = pool.data + 2 * cacheBytes * size_t(c);
    Buffer qb(q.data(), halide_type_float, 32, kHeadDim, kHeads, 1);
    Buffer kb(k.data(), halide_type_float, 32, kHeadDim, kKvHeads, 1);
    Buffer vb(v.data(), halide_type_float, 32, kHeadDim, kKvHeads, 1);
    const halide_type_code_t code =
        cache == "bf16" ? halide_type_bfloat : halide_type_float;
    const int bits = cache == "f32" ? 32 : 16;
    Buffer kcb(keys, code, bits, kHeadDim, kKvHeads, slots);
    Buffer vcb(keys + cacheBytes, code, bits, kHeadDim, kKvHeads, slots);
    Buffer gb(gate.data(), halide_type_float, 32, kHeads, 1);
    Buffer ob(out.data(), halide_type_float, 32, kHeadDim, kHeads, 1);
    auto kernel = variant == Variant::Avx2 ? spark_avx2_attention
                                           : spark_avx512_attention;
    return kernel(&qb.b, &kb.b, &vb.b, &kcb.b, &vcb.b, &gb.b, depth,
                  cachedKeys(), &ob.b, 0.0625f, sliding ? kWindow : 0,
                  sliding ? 1 : 0);
  }

private:
  Variant variant;
  bool sliding;
  int slots, depth;
  std::string cache;
  size_t cacheBytes; // one of the layer's two caches
  int copies;
  Region pool;
  std::vector<float> q, k, v, gate, out;
};

/// The quantile `at` (0.5: the median) of v, interpolated between the two
/// nearest values.
double quantile(std::vector<double> v, double at) {
  std::sort(v.begin(), v.end());
  double pos = at * double(v.size() - 1);
  size_t lo = size_t(pos);
  size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

/// What alternating rounds of a case's calls and a stream measured.
struct Rates {
  double kernel, stream, ratio, ratioQ1, ratioQ3; // medians; GB/s
};

/// Runs `rounds` (after 4 dropped) of the case's calls from memory on
/// `threads` threads, each round after a stream of `roundBytes` of `stream`
/// at the same thread count; "" or why a call failed (`what`: the shape).
template <typename Case>
std::string measure(Case &memory, const Region &stream, size_t roundBytes,
                    int threads, long long rounds, const std::string &what,
                    Rates &rates) {
  spark_pool_set_threads(threads);
  const int calls =
      int(std::max<size_t>(1, roundBytes / memory.bytesPerCall()));
  std::vector<double> kernelRates, streamRates, ratios;
  size_t streamAt = 0;
  int next = 0;
  for (long long round = 0; round < rounds + 4; ++round) {
    if (streamAt + roundBytes > stream.bytes)
      streamAt = 0;
    double s1 = streamOnce(stream.data + streamAt, roundBytes, threads);
    streamAt += roundBytes;
    double start = now();
    for (int c = 0; c < calls; ++c)
      if (memory.call(next++) != 0)
        return std::string(memory.kernelName()) + " refused the shape (" +
               what + ")";
    double k = double(memory.bytesPerCall()) * calls / (now() - start) / 1e9;
    if (round >= 4) {
      kernelRates.push_back(k);
      streamRates.push_back(s1);
      ratios.push_back(k / s1);
    }
  }
  rates = {quantile(kernelRates, 0.5), quantile(streamRates, 0.5),
           quantile(ratios, 0.5), quantile(ratios, 0.25),
           quantile(ratios, 0.75)};
  return "";
}

/// A comma-separated list of integers from `lo` to `hi` given to `option`;
/// "" on success, else why not (`what`: what each integer is).
std::string parseIntegers(const std::string &text, const char *option, long lo,
                          long hi, const char *what, std::vector<int> &out) {
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    char *end = nullptr;
    long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value < lo || value > hi)
      return std::string(option) + ": '" + item + "' is not " + what +
             " from " + std::to_string(lo) + " to " + std::to_string(hi);
    out.push_back(int(value));
  }
  return out.empty() ? std::string(option) + ": expected a comma-separated list"
                     : "";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> storage;
  for (int i = 0; i < argc; ++i)
    storage.push_back(std::string(argv[i]) == "-t" ? "--threads" : argv[i]);
  std::vector<char *> normalized;
  for (std::string &s : storage)
    normalized.push_back(s.data());
  spark::Arguments args(int(normalized.size()), normalized.data(),
                        {{"threads", true},
                         {"scheme", true},
                         {"rounds", true},
                         {"pool-mib", true},
                         {"attention-depths", true},
                         {"attention-cache", true},
                         {"variant", true},
                         {"help", false}});
  if (args.has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  long long rounds = args.getInt("rounds", 20);
  long long poolMiB = args.getInt("pool-mib", 1024);
  if (!args.error().empty())
    return fail(args.error() + "\n" + kUsage);
  if (!args.positional().empty())
    return fail("takes no positional argument ('" + args.positional()[0] +
                "')\n" + kUsage);
  if (rounds < 1 || rounds > 1000)
    return fail("--rounds: expected 1 to 1000, got " + std::to_string(rounds));
  if (poolMiB < 64 || poolMiB > (1 << 20))
    return fail("--pool-mib: expected at least 64 (the pool must be larger "
                "than the caches), got " +
                std::to_string(poolMiB));
  std::vector<int> threadCounts;
  if (std::string e = parseIntegers(args.get("threads", "1,2"), "--threads", 1,
                                    64, "a thread count", threadCounts);
      !e.empty())
    return fail(e);
  std::vector<SchemeInfo> schemes;
  if (std::string list = args.get("scheme", "w4a16,w4a8,w8a16,w8a8");
      list != "none") {
    std::stringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
      auto it =
          std::find_if(std::begin(kSchemes), std::end(kSchemes),
                       [&](const SchemeInfo &s) { return item == s.name; });
      if (it == std::end(kSchemes))
        return fail("--scheme: '" + item +
                    "' is not one of w4a16, w4a8, w8a16, w8a8, w6a16, w6a8 "
                    "(or none)");
      schemes.push_back(*it);
    }
  }
  std::vector<int> depths;
  if (std::string list = args.get("attention-depths", "4096,32704");
      list != "none")
    if (std::string e = parseIntegers(list, "--attention-depths", 1, 1 << 20,
                                      "a number of cached positions", depths);
        !e.empty())
      return fail(e);
  const std::string attentionCache = args.get("attention-cache", "f32");
  if (attentionCache != "f32" && attentionCache != "bf16" &&
      attentionCache != "f16")
    return fail("--attention-cache: '" + attentionCache +
                "' is not one of f32, bf16, f16");
  const Variant cpu = cpuVariant();
  Variant variant = cpu;
  if (std::string name = args.get("variant", ""); !name.empty()) {
    const Variant named[] = {Variant::Avx2, Variant::Avx512Vnni,
                             Variant::Avx512};
    auto it = std::find_if(std::begin(named), std::end(named), [&](Variant v) {
      return "x86-" + name == variantName(v);
    });
    if (it == std::end(named))
      return fail("--variant: '" + name +
                  "' is not one of avx2, avx512vnni, avx512bf16");
    // The variants in order of what they need: this CPU runs those up to
    // its own.
    if (int(*it) > int(cpu))
      return fail("--variant=" + name + ": this CPU does not run it (its " +
                  "model libraries take " + variantName(cpu) + ")");
    variant = *it;
  }
  if (variant == Variant::None)
    return fail("this CPU has no AVX2, FMA and F16C: there are no x86 matrix "
                "kernels to measure");
  if (variant == cpu)
    std::printf("variant: %s (the decode kernels a model library runs on "
                "this CPU)\n\n",
                variantName(variant));
  else
    std::printf("variant: %s (--variant; this CPU's model libraries take "
                "%s)\n\n",
                variantName(variant), variantName(cpu));
  const size_t poolBytes = size_t(poolMiB) << 20;
  Region stream(poolBytes);
  if (!stream.data)
    return fail("cannot map " + std::to_string(poolMiB) +
                " MiB for the stream; use a smaller --pool-mib");
  std::memset(stream.data, 1, stream.bytes);
  const size_t roundBytes = std::min<size_t>(poolBytes / 4, size_t(256) << 20);

  // Each thread count's rates of `memory` (a KernelCase or AttentionCase)
  // to row(threads, rates), the table's row printed and flushed; 0, or
  // fail()'s code.
  auto measureRows = [&](auto &memory, const std::string &what, auto row) {
    for (int threads : threadCounts) {
      Rates r{};
      if (std::string e =
              measure(memory, stream, roundBytes, threads, rounds, what, r);
          !e.empty())
        return fail(e);
      row(threads, r);
      std::fflush(stdout);
    }
    return 0;
  };
  if (!schemes.empty())
    std::printf("| scheme | kernel | matrix | K | N | threads | from memory "
                "GB/s | stream GB/s | median %% of stream (q1-q3) | from L2 "
                "GB/s |\n");
  if (!schemes.empty())
    std::printf("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: "
                "| ---: |\n");
  std::string notes;
  for (const SchemeInfo &s : schemes)
    for (const Shape &shape : kShapes) {
      if (!hasKernel(variant, s.scheme)) {
        if (&shape == kShapes)
          notes += std::string(s.name) + ": the " + variantName(variant) +
                   " variant runs Halide's kernel (not measured here)\n";
        continue;
      }
      KernelCase memory(s.scheme, variant, shape, poolBytes);
      // One matrix of at most 512 KiB of codes, read again and again.
      Shape small{shape.what, shape.K,
                  std::max(4, int((512 << 10) /
                                  codeRowBytes(s.scheme, shape.K)) /
                                  4 * 4)};
      KernelCase cached(s.scheme, variant, small, 1);
      if (!memory.ok() || !cached.ok())
        return fail("cannot map " + std::to_string(poolMiB) +
                    " MiB of matrix copies; use a smaller --pool-mib");
      const std::string what =
          "K = " + std::to_string(shape.K) + ", N = " + std::to_string(shape.N);
      int rc = measureRows(memory, what, [&](int threads, const Rates &r) {
        // From L2: as many calls as read the same number of bytes.
        const int cachedCalls =
            int(std::max<size_t>(1, roundBytes / cached.bytesPerCall()));
        double bestCached = 0;
        for (int rep = 0; rep < 3; ++rep) {
          double start = now();
          for (int c = 0; c < cachedCalls; ++c)
            cached.call(0);
          bestCached =
              std::max(bestCached, double(cached.bytesPerCall()) * cachedCalls /
                                       (now() - start) / 1e9);
        }
        std::printf("| %s | %s | %s | %d | %d | %d | %.1f | %.1f | %.0f%% "
                    "(%.0f-%.0f%%) | %.1f |\n",
                    s.name, memory.kernelName(), shape.what, shape.K, shape.N,
                    threads, r.kernel, r.stream, 100 * r.ratio, 100 * r.ratioQ1,
                    100 * r.ratioQ3, bestCached);
      });
      if (rc != 0)
        return rc;
    }
  if (!notes.empty())
    std::printf("\n%s", notes.c_str());

  // Decode attention: the sliding layers' full ring once, then a full layer
  // at each depth.
  if (depths.empty())
    return 0;
  std::printf("%s| layer | kernel | cache | cached keys | threads | from "
              "memory GB/s | stream GB/s | median %% of stream (q1-q3) |\n"
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
              schemes.empty() ? "" : "\n");
  std::vector<std::pair<bool, int>> layers{{true, depths.front()}};
  for (int depth : depths)
    layers.push_back({false, depth});
  for (auto [sliding, depth] : layers) {
    AttentionCase memory(variant, sliding, depth, attentionCache, poolBytes);
    if (!memory.ok())
      return fail("cannot map the caches of " + std::to_string(depth) +
                  " positions; use a smaller --pool-mib or depth");
    const std::string what =
        std::to_string(memory.cachedKeys()) + " cached keys";
    int rc = measureRows(memory, what, [&](int threads, const Rates &r) {
      std::printf("| %s | %s | %s | %d | %d | %.1f | %.1f | %.0f%% "
                  "(%.0f-%.0f%%) |\n",
                  sliding ? "sliding (ring of 511)" : "full",
                  memory.kernelName(), attentionCache.c_str(),
                  memory.cachedKeys(), threads, r.kernel, r.stream,
                  100 * r.ratio, 100 * r.ratioQ1, 100 * r.ratioQ3);
    });
    if (rc != 0)
      return rc;
  }
  return 0;
}
