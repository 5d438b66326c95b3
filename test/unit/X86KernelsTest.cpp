//===- X86KernelsTest.cpp - the x86 variants' matrix microkernels ---------===//
//
// Runs the hand-written matrix kernels of the x86 variants (compiled into
// this test with the flags spark-compile gives them) against a
// double-precision product of the same quantized values, written here from
// the kernel interface's definition: every scheme each kernel set has, one
// token (decode) and several (prefill tiles of 3, 4 and 6 tokens and the
// rest), two row tasks with a partial one, strided inputs and outputs. The
// sets:
//   avx2:       targets/x86/lib/avx2_linear.c (every scheme)
//   avx2_other_rows: its copy in X86Avx2Other.c, whose one-token rows are
//               the ones avx2 does not take on this CPU (128-bit rows on
//               CPUs with 256-bit vector units, 256-bit ones on AMD Zen 1)
//   avx512vnni: int8_linear.c (w8a8, w4a8), w4_linear.c (w4a16, f32 inputs)
//   avx512vnni_int16: int8_linear.c (w4a16 with bf16/f16 inputs as int16;
//               also rows that are not a multiple of its 4-row tiles)
//   avx512vnni_nogfni: int8_linear.c's copy in X86NoGfni.c, whose w4a8
//               decode rows unpack without GFNI (avx512vnni takes the GFNI
//               path on CPUs that have it)
//   avx512vnni_int16_other: the same copy's w4a16 with 16-bit inputs, whose
//               decode takes the path avx512vnni_int16's does not on this
//               CPU (tiles of 4 rows on Intel cores, single rows on AMD's)
//   avx512bf16: bf16_linear.c (w8a16 with bf16 inputs, bf16; also rows that
//               are not a multiple of the 4-row tiles)
//   avx512bf16_fma, avx512bf16_dot: its bf16 prefill tiles on f32 FMAs and
//               on vdpbf16ps, both on every CPU with AVX512_BF16 (the
//               kernel takes the one its CPU runs faster)
// and the 6-bit kernels of int8_linear.c (w6a8, w6a16 with bf16 and f16
// inputs), from the file and from its copy without GFNI.
// A CPU without a set's features prints [SKIP] and its cases are reported
// as skipped.
//
//===----------------------------------------------------------------------===//
#include "spark/Import/FloatFormats.h"

#include "HalideRuntime.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

extern "C" {
#define SPARK_INT8_KERNEL(name)                                                \
  int name(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *, float,     \
           halide_buffer_t *);
#define SPARK_W4_KERNEL(name)                                                  \
  int name(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,            \
           halide_buffer_t *, halide_buffer_t *);
#define SPARK_W8_KERNEL(name)                                                  \
  int name(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,            \
           halide_buffer_t *);
SPARK_INT8_KERNEL(spark_avx2_linear_w8a8)
SPARK_INT8_KERNEL(spark_avx2_linear_w4a8)
SPARK_W4_KERNEL(spark_avx2_linear_w4a16)
SPARK_W4_KERNEL(spark_avx2_linear_w4a16_xbf16)
SPARK_W4_KERNEL(spark_avx2_linear_w4a16_xf16)
SPARK_W8_KERNEL(spark_avx2_linear_w8a16)
SPARK_W8_KERNEL(spark_avx2_linear_w8a16_xbf16)
int spark_avx2_linear_bf16(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *);
// avx2_linear.c with the other one-token rows (X86Avx2Other.c)
SPARK_INT8_KERNEL(spark_avx2other_linear_w8a8)
SPARK_INT8_KERNEL(spark_avx2other_linear_w4a8)
SPARK_W4_KERNEL(spark_avx2other_linear_w4a16)
SPARK_W4_KERNEL(spark_avx2other_linear_w4a16_xbf16)
SPARK_W4_KERNEL(spark_avx2other_linear_w4a16_xf16)
SPARK_W8_KERNEL(spark_avx2other_linear_w8a16)
SPARK_W8_KERNEL(spark_avx2other_linear_w8a16_xbf16)
int spark_avx2other_linear_bf16(halide_buffer_t *, halide_buffer_t *,
                                halide_buffer_t *);
SPARK_INT8_KERNEL(spark_vnni_linear_w8a8)
SPARK_INT8_KERNEL(spark_vnni_linear_w4a8)
SPARK_W4_KERNEL(spark_avx512_linear_w4a16)
SPARK_W4_KERNEL(spark_vnni_linear_w4a16_xbf16)
SPARK_W4_KERNEL(spark_vnni_linear_w4a16_xf16)
SPARK_W8_KERNEL(spark_bf16_linear_w8a16)
// int8_linear.c without its GFNI path (X86NoGfni.c)
SPARK_INT8_KERNEL(spark_nogfni_linear_w8a8)
SPARK_INT8_KERNEL(spark_nogfni_linear_w4a8)
SPARK_W4_KERNEL(spark_nogfni_linear_w4a16_xbf16)
SPARK_W4_KERNEL(spark_nogfni_linear_w4a16_xf16)
// 6-bit codes (int8_linear.c, and its copy in X86NoGfni.c)
#define SPARK_W6A8_KERNEL(name)                                                \
  int name(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *,            \
           halide_buffer_t *, float, halide_buffer_t *);
SPARK_W6A8_KERNEL(spark_vnni_linear_w6a8)
SPARK_W6A8_KERNEL(spark_nogfni_linear_w6a8)
SPARK_W4_KERNEL(spark_vnni_linear_w6a16_xbf16)
SPARK_W4_KERNEL(spark_vnni_linear_w6a16_xf16)
SPARK_W4_KERNEL(spark_nogfni_linear_w6a16_xbf16)
SPARK_W4_KERNEL(spark_nogfni_linear_w6a16_xf16)
int spark_bf16_linear(halide_buffer_t *, halide_buffer_t *, halide_buffer_t *);
int spark_bf16_linear_tiles(halide_buffer_t *, halide_buffer_t *,
                            halide_buffer_t *, int dot_products);
int spark_test_avx512_inputs_mismatches(unsigned seed, int trials);
int spark_test_avx2_inputs_mismatches(unsigned seed, int trials);

// The generated libraries take this from the Halide runtime; here the tasks
// run one after another, in reverse order (no task may rely on another).
int halide_do_par_for(void *user_context, halide_task_t task, int min, int size,
                      uint8_t *closure) {
  for (int i = min + size - 1; i >= min; --i)
    if (int rc = task(user_context, i, closure))
      return rc;
  return 0;
}
}

using namespace spark;

namespace {

// K: 17 groups of 128 (34 of 64), so the one-token rows run both their
// blocks of groups (eight on AVX2, sixteen in the AVX-512 w4a8 rows) and a
// tail.
constexpr int K = 2176, N = 68, XStride = K + 16, OutStride = N + 4;

bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

#define SKIP_WITHOUT_AVX2()                                                    \
  if (!cpuHasAvx2()) {                                                         \
    std::printf("[SKIP] this CPU has no AVX2, FMA and F16C\n");                \
    GTEST_SKIP();                                                              \
  }

bool cpuHasAvx512Vnni() {
  __builtin_cpu_init();
  return cpuHasAvx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

bool cpuHasAvx512BF16() {
  __builtin_cpu_init();
  return cpuHasAvx512Vnni() && __builtin_cpu_supports("avx512bf16");
}

using Int8Kernel = int (*)(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, float, halide_buffer_t *);
using W4Kernel = int (*)(halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *);
using W8Kernel = int (*)(halide_buffer_t *, halide_buffer_t *,
                         halide_buffer_t *, halide_buffer_t *);
using BF16Kernel = int (*)(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *);

/// One variant's kernels (nullptr: not in this set).
struct KernelSet {
  const char *name;
  bool (*cpu)();
  const char *needs; // what a CPU without them lacks
  Int8Kernel w8a8, w4a8;
  std::vector<int> groups; // 4-bit group sizes the set takes
  W4Kernel w4a16[3];       // f32, bf16, f16 inputs
  W8Kernel w8a16[2];       // f32, bf16 inputs
  BF16Kernel bf16;
  int bf16Inputs;       // how the bf16-weight kernel rounds its inputs
  bool anyRows = false; // w4a16 / w8a16 / bf16 take any number of rows
};

const KernelSet kAvx2 = {
    "avx2",
    cpuHasAvx2,
    "AVX2, FMA and F16C",
    spark_avx2_linear_w8a8,
    spark_avx2_linear_w4a8,
    {64, 128},
    {spark_avx2_linear_w4a16, spark_avx2_linear_w4a16_xbf16,
     spark_avx2_linear_w4a16_xf16},
    {spark_avx2_linear_w8a16, spark_avx2_linear_w8a16_xbf16},
    spark_avx2_linear_bf16,
    0};
const KernelSet kAvx2OtherRows = {
    "avx2_other_rows",
    cpuHasAvx2,
    "AVX2, FMA and F16C",
    spark_avx2other_linear_w8a8,
    spark_avx2other_linear_w4a8,
    {64, 128},
    {spark_avx2other_linear_w4a16, spark_avx2other_linear_w4a16_xbf16,
     spark_avx2other_linear_w4a16_xf16},
    {spark_avx2other_linear_w8a16, spark_avx2other_linear_w8a16_xbf16},
    spark_avx2other_linear_bf16,
    0};
const KernelSet kAvx512Vnni = {"avx512vnni",
                               cpuHasAvx512Vnni,
                               "AVX-512 F/BW and AVX512_VNNI",
                               spark_vnni_linear_w8a8,
                               spark_vnni_linear_w4a8,
                               {128},
                               {spark_avx512_linear_w4a16, nullptr, nullptr},
                               {nullptr, nullptr},
                               nullptr,
                               0};
// The same without GFNI: the decode rows' high nibbles by a shift and a mask,
// as on CPUs with AVX512_VNNI and no GFNI.
const KernelSet kAvx512VnniNoGfni = {"avx512vnni_nogfni",
                                     cpuHasAvx512Vnni,
                                     "AVX-512 F/BW and AVX512_VNNI",
                                     spark_nogfni_linear_w8a8,
                                     spark_nogfni_linear_w4a8,
                                     {128},
                                     {nullptr, nullptr, nullptr},
                                     {nullptr, nullptr},
                                     nullptr,
                                     0};
// w4a16 with 16-bit inputs as int16 on vpdpbusd (int8_linear.c).
const KernelSet kAvx512VnniInt16 = {
    "avx512vnni_int16",
    cpuHasAvx512Vnni,
    "AVX-512 F/BW and AVX512_VNNI",
    nullptr,
    nullptr,
    {128},
    {nullptr, spark_vnni_linear_w4a16_xbf16, spark_vnni_linear_w4a16_xf16},
    {nullptr, nullptr},
    nullptr,
    0,
    true};
// The same from X86NoGfni.c: w4a16 decode on the other path.
const KernelSet kAvx512VnniInt16Other = {
    "avx512vnni_int16_other",
    cpuHasAvx512Vnni,
    "AVX-512 F/BW and AVX512_VNNI",
    nullptr,
    nullptr,
    {128},
    {nullptr, spark_nogfni_linear_w4a16_xbf16, spark_nogfni_linear_w4a16_xf16},
    {nullptr, nullptr},
    nullptr,
    0,
    true};
const KernelSet kAvx512BF16 = {"avx512bf16",
                               cpuHasAvx512BF16,
                               "AVX512_BF16",
                               nullptr,
                               nullptr,
                               {128},
                               {nullptr, nullptr, nullptr},
                               {nullptr, spark_bf16_linear_w8a16},
                               spark_bf16_linear,
                               1,
                               true};

int bf16OnFmas(halide_buffer_t *x, halide_buffer_t *w, halide_buffer_t *out) {
  return spark_bf16_linear_tiles(x, w, out, 0);
}
int bf16OnDotProducts(halide_buffer_t *x, halide_buffer_t *w,
                      halide_buffer_t *out) {
  return spark_bf16_linear_tiles(x, w, out, 1);
}
const KernelSet kAvx512BF16Fma = {"avx512bf16_fma",
                                  cpuHasAvx512BF16,
                                  "AVX512_BF16",
                                  nullptr,
                                  nullptr,
                                  {128},
                                  {nullptr, nullptr, nullptr},
                                  {nullptr, nullptr},
                                  bf16OnFmas,
                                  1,
                                  true};
const KernelSet kAvx512BF16Dot = {"avx512bf16_dot",
                                  cpuHasAvx512BF16,
                                  "AVX512_BF16",
                                  nullptr,
                                  nullptr,
                                  {128},
                                  {nullptr, nullptr, nullptr},
                                  {nullptr, nullptr},
                                  bf16OnDotProducts,
                                  1,
                                  true};

#define SKIP_WITHOUT(set)                                                      \
  if (!(set).cpu()) {                                                          \
    std::printf("[SKIP] this CPU has no %s\n", (set).needs);                   \
    GTEST_SKIP();                                                              \
  }

/// A halide_buffer_t over host memory: extent0 dense, then (extent1 > 0)
/// a second dim of extent1 with stride1.
struct Buffer {
  halide_buffer_t b{};
  halide_dimension_t d[2]{};
  Buffer(void *host, halide_type_code_t code, int bits, int extent0,
         int extent1 = 0, int stride1 = 0) {
    b.host = static_cast<uint8_t *>(host);
    b.type.code = code;
    b.type.bits = uint8_t(bits);
    b.type.lanes = 1;
    b.dimensions = extent1 > 0 ? 2 : 1;
    b.dim = d;
    d[0] = {0, extent0, 1, 0};
    d[1] = {0, extent1, stride1, 0};
  }
};

struct Case {
  int T;
  std::vector<float> x; // [T][XStride], the first K of each row used
  std::mt19937 rng{1234};
  explicit Case(int tokens) : T(tokens), x(size_t(tokens) * XStride, 1e30f) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int t = 0; t < T; ++t)
      for (int k = 0; k < K; ++k) // one outlier column, as real inputs have
        x[size_t(t) * XStride + k] = k == 17 ? 9.0f : normal(rng);
  }
  float in(int t, int k) const { return x[size_t(t) * XStride + k]; }
  std::vector<float> out() const {
    return std::vector<float>(size_t(T) * OutStride, -7.0f);
  }
};

/// Int8 codes of token t with the Halide kernels' rule: scale max|x| / 127
/// (or `fixed` when positive), round to nearest even, clamp to +-127.
std::vector<int> codes(const Case &c, int t, float fixed, float &scale) {
  double largest = 0;
  for (int k = 0; k < K; ++k)
    largest = std::max(largest, double(std::fabs(c.in(t, k))));
  scale = fixed > 0 ? fixed : float(largest / 127.0);
  std::vector<int> q(K);
  for (int k = 0; k < K; ++k)
    q[k] = int(std::max(
        -127.0f,
        std::min(127.0f, std::nearbyint(c.in(t, k) * (1.0f / scale)))));
  return q;
}

/// Compares out [T][OutStride] with want [T][N]: each value within 1e-5 of
/// the sum of the magnitudes of its products; the padding untouched.
void expectClose(const Case &c, const std::vector<float> &out,
                 const std::vector<double> &want,
                 const std::vector<double> &magnitude, int rows = N) {
  for (int t = 0; t < c.T; ++t) {
    for (int n = 0; n < rows; ++n) {
      size_t i = size_t(t) * N + n;
      EXPECT_NEAR(out[size_t(t) * OutStride + n], want[i],
                  1e-5 * magnitude[i] + 1e-6)
          << "token " << t << " row " << n;
    }
    for (int n = rows; n < OutStride; ++n)
      EXPECT_EQ(out[size_t(t) * OutStride + n], -7.0f) << "padding written";
  }
}

/// (kernel set, tokens)
class MatrixKernels
    : public ::testing::TestWithParam<std::tuple<const KernelSet *, int>> {
protected:
  const KernelSet &set() const { return *std::get<0>(GetParam()); }
  int tokens() const { return std::get<1>(GetParam()); }
};
/// One suite per scheme family, instantiated with the sets that have it.
class Int8Kernels : public MatrixKernels {};

/// Random 4-bit codes [N][K] in groups of `group` along K, packed two a byte
/// (low nibble first), and an f16 scale per group.
struct FourBit {
  std::vector<int> code;
  std::vector<uint8_t> bytes;
  std::vector<uint16_t> scales;
  FourBit(std::mt19937 &rng, int group)
      : code(size_t(N) * K), bytes(size_t(N) * K / 2),
        scales(size_t(N) * (K / group)) {
    std::uniform_int_distribution<int> nibble(0, 15);
    for (int &v : code)
      v = nibble(rng);
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = uint8_t(code[2 * i] | code[2 * i + 1] << 4);
    for (size_t i = 0; i < scales.size(); ++i)
      scales[i] = floatToHalf(0.01f + 0.001f * float(i % 37));
  }
};

/// A 4-bit matrix's buffers as a kernel is handed them: dense (codes
/// [N][K/2], scales and zero points [N][K/group] each), or grouped rows
/// (SPARK_LAYOUT_GROUPED_ROWS: each row's K/2 code bytes, its f16 scales,
/// then its f16 zero points if any, padded to a multiple of 64 bytes), where
/// the scales and zeros are views of the same rows.
struct FourBitBuffers {
  std::vector<uint8_t> rows; // grouped
  Buffer w, scales, zeros;
  FourBitBuffers(bool grouped, int rows_, int groups,
                 std::vector<uint8_t> &codes, std::vector<uint16_t> &dense,
                 std::vector<uint16_t> *denseZeros)
      : w(codes.data(), halide_type_uint, 8, K / 2, rows_, K / 2),
        scales(dense.data(), halide_type_float, 16, groups, rows_, groups),
        zeros(denseZeros ? denseZeros->data() : nullptr, halide_type_float, 16,
              groups, rows_, groups) {
    if (!grouped)
      return;
    const int sides = groups * 2 * (denseZeros ? 2 : 1);
    const int stride = (K / 2 + sides + 63) / 64 * 64;
    rows.assign(size_t(rows_) * stride, 0xA5); // padding is never read as data
    for (int n = 0; n < rows_; ++n) {
      uint8_t *row = rows.data() + size_t(n) * stride;
      std::memcpy(row, codes.data() + size_t(n) * (K / 2), K / 2);
      std::memcpy(row + K / 2, dense.data() + size_t(n) * groups, 2 * groups);
      if (denseZeros)
        std::memcpy(row + K / 2 + 2 * groups,
                    denseZeros->data() + size_t(n) * groups, 2 * groups);
    }
    w = Buffer(rows.data(), halide_type_uint, 8, K / 2, rows_, stride);
    scales = Buffer(rows.data() + K / 2, halide_type_float, 16, groups, rows_,
                    stride / 2);
    zeros = Buffer(rows.data() + K / 2 + 2 * groups, halide_type_float, 16,
                   groups, rows_, stride / 2);
    for (Buffer *b : {&w, &scales, &zeros}) // their own dims, not the copies'
      b->b.dim = b->d;
  }
  FourBitBuffers(const FourBitBuffers &) = delete;
};

class W4A16Kernels : public MatrixKernels {};
class WideKernels : public MatrixKernels {};

TEST_P(Int8Kernels, W8A8) {
  SKIP_WITHOUT(set());
  Case c(tokens());
  std::uniform_int_distribution<int> code(-127, 127);
  std::vector<int8_t> w(size_t(N) * K);
  std::vector<float> scales(N);
  for (int8_t &v : w)
    v = int8_t(code(c.rng));
  for (int n = 0; n < N; ++n)
    scales[n] = 0.001f * float(n + 1);
  for (float fixed : {0.0f, 0.05f}) {
    std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
    for (int t = 0; t < c.T; ++t) {
      float xs;
      std::vector<int> q = codes(c, t, fixed, xs);
      for (int n = 0; n < N; ++n) {
        double sum = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          sum += double(w[size_t(n) * K + k]) * q[k];
          mag += std::fabs(double(w[size_t(n) * K + k]) * q[k]);
        }
        want[size_t(t) * N + n] = sum * scales[n] * xs;
        magnitude[size_t(t) * N + n] = mag * scales[n] * xs;
      }
    }
    std::vector<float> out = c.out();
    Buffer x(c.x.data(), halide_type_float, 32, K, c.T, XStride);
    Buffer wb(w.data(), halide_type_int, 8, K, N, K);
    Buffer sb(scales.data(), halide_type_float, 32, N);
    Buffer ob(out.data(), halide_type_float, 32, N, c.T, OutStride);
    ASSERT_EQ(set().w8a8(&x.b, &wb.b, &sb.b, fixed, &ob.b), 0);
    expectClose(c, out, want, magnitude);
  }
}

TEST_P(Int8Kernels, W4A8) {
  SKIP_WITHOUT(set());
  Case c(tokens());
  // Groups of 64 and 128 (the kernel reads the size off the scales).
  for (const int Group : set().groups) {
    SCOPED_TRACE("group " + std::to_string(Group));
    const FourBit weights(c.rng, Group);
    const std::vector<int> &code = weights.code;
    std::vector<uint8_t> w = weights.bytes;
    std::vector<uint16_t> scales = weights.scales;
    std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
    for (int t = 0; t < c.T; ++t) {
      float xs;
      std::vector<int> q = codes(c, t, 0.0f, xs);
      for (int n = 0; n < N; ++n) {
        double sum = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          double s = halfToFloat(scales[size_t(n) * (K / Group) + k / Group]);
          double p = (code[size_t(n) * K + k] - 8) * s * q[k];
          sum += p;
          mag += std::fabs(p) + 8 * s * std::fabs(q[k]);
        }
        want[size_t(t) * N + n] = sum * xs;
        magnitude[size_t(t) * N + n] = mag * xs;
      }
    }
    for (const bool grouped : {false, true}) {
      SCOPED_TRACE(grouped ? "grouped rows" : "dense rows");
      std::vector<float> out = c.out();
      Buffer x(c.x.data(), halide_type_float, 32, K, c.T, XStride);
      FourBitBuffers wb(grouped, N, K / Group, w, scales, nullptr);
      Buffer ob(out.data(), halide_type_float, 32, N, c.T, OutStride);
      ASSERT_EQ(set().w4a8(&x.b, &wb.w.b, &wb.scales.b, 0.0f, &ob.b), 0);
      expectClose(c, out, want, magnitude);
    }
  }
}

/// x rounded as the build's activations: 0 f32 (as it is), 1 bf16, 2 f16.
double rounded(float v, int type) {
  return type == 1   ? bf16ToFloat(floatToBF16(v))
         : type == 2 ? halfToFloat(floatToHalf(v))
                     : double(v);
}

TEST_P(W4A16Kernels, W4A16) {
  SKIP_WITHOUT(set());
  Case c(tokens());
  // All N rows, and N - 1 where the set takes rows one at a time.
  for (const int Rows : {N, set().anyRows ? N - 1 : N})
    for (const int Group : set().groups) {
      SCOPED_TRACE("group " + std::to_string(Group) + ", rows " +
                   std::to_string(Rows));
      const FourBit weights(c.rng, Group);
      const std::vector<int> &code = weights.code;
      std::vector<uint8_t> w = weights.bytes;
      std::vector<uint16_t> scales = weights.scales, zeros(scales.size());
      for (size_t i = 0; i < zeros.size(); ++i)
        zeros[i] = floatToHalf(float(i % 16) * 0.75f);
      // f32, bf16 and f16 inputs, those the set takes.
      for (int type : {0, 1, 2}) {
        const W4Kernel kernel = set().w4a16[type];
        if (!kernel)
          continue;
        std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
        for (int t = 0; t < c.T; ++t)
          for (int n = 0; n < Rows; ++n) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
              size_t g = size_t(n) * (K / Group) + k / Group;
              double p =
                  (code[size_t(n) * K + k] - double(halfToFloat(zeros[g]))) *
                  halfToFloat(scales[g]) * rounded(c.in(t, k), type);
              sum += p;
              mag += std::fabs(p) +
                     15 * halfToFloat(scales[g]) * std::fabs(c.in(t, k));
            }
            want[size_t(t) * N + n] = sum;
            magnitude[size_t(t) * N + n] = mag;
          }
        for (const bool grouped : {false, true}) {
          SCOPED_TRACE(grouped ? "grouped rows" : "dense rows");
          std::vector<float> out = c.out();
          Buffer x(c.x.data(), halide_type_float, 32, K, c.T, XStride);
          FourBitBuffers wb(grouped, Rows, K / Group, w, scales, &zeros);
          Buffer ob(out.data(), halide_type_float, 32, Rows, c.T, OutStride);
          ASSERT_EQ(kernel(&x.b, &wb.w.b, &wb.scales.b, &wb.zeros.b, &ob.b), 0)
              << "inputs " << type;
          expectClose(c, out, want, magnitude, Rows);
        }
      }
    }
}

TEST_P(WideKernels, W8A16AndBF16) {
  SKIP_WITHOUT(set());
  Case c(tokens());
  std::uniform_int_distribution<int> code(-127, 127);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<int8_t> w(size_t(N) * K);
  std::vector<uint16_t> wbf(size_t(N) * K);
  std::vector<float> scales(N);
  for (int8_t &v : w)
    v = int8_t(code(c.rng));
  for (uint16_t &v : wbf)
    v = floatToBF16(normal(c.rng));
  for (int n = 0; n < N; ++n)
    scales[n] = 0.002f * float(n + 1);
  // kind 0: w8a16 with f32 inputs, 1: with bf16 inputs, 2: bf16 weights;
  // all N rows, and N - 1 where the set takes any number of rows.
  for (const int Rows : {N, set().anyRows ? N - 1 : N})
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE("rows " + std::to_string(Rows));
      if (kind < 2 ? !set().w8a16[kind] : !set().bf16)
        continue;
      const bool bf16Inputs = kind == 1 || (kind == 2 && set().bf16Inputs);
      std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
      for (int t = 0; t < c.T; ++t)
        for (int n = 0; n < Rows; ++n) {
          double sum = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            double xv = rounded(c.in(t, k), bf16Inputs ? 1 : 0);
            double wv = kind == 2 ? double(bf16ToFloat(wbf[size_t(n) * K + k]))
                                  : w[size_t(n) * K + k] * double(scales[n]);
            sum += wv * xv;
            mag += std::fabs(wv * xv);
          }
          want[size_t(t) * N + n] = sum;
          magnitude[size_t(t) * N + n] = mag;
        }
      std::vector<float> out = c.out();
      Buffer x(c.x.data(), halide_type_float, 32, K, c.T, XStride);
      Buffer ob(out.data(), halide_type_float, 32, Rows, c.T, OutStride);
      Buffer sb(scales.data(), halide_type_float, 32, Rows);
      int rc;
      if (kind == 2) {
        Buffer wb(wbf.data(), halide_type_bfloat, 16, K, Rows, K);
        rc = set().bf16(&x.b, &wb.b, &ob.b);
      } else {
        Buffer wb(w.data(), halide_type_int, 8, K, Rows, K);
        rc = set().w8a16[kind](&x.b, &wb.b, &sb.b, &ob.b);
      }
      ASSERT_EQ(rc, 0) << "kind " << kind;
      expectClose(c, out, want, magnitude, Rows);
    }
}

// w8a16 on the avx512bf16 set with K not a multiple of 128: the int16 inputs
// need whole groups, so the codes are widened to bf16 for vdpbf16ps instead.
TEST(Avx512BF16Shapes, W8A16WithKNotAMultipleOf128) {
  if (!cpuHasAvx512BF16()) {
    std::printf("[SKIP] this CPU has no AVX512_BF16\n");
    GTEST_SKIP();
  }
  constexpr int K2 = 352, N2 = 22, T2 = 5;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> code(-127, 127);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(T2) * K2), scales(N2), out(size_t(T2) * N2);
  std::vector<int8_t> w(size_t(N2) * K2);
  for (float &v : x)
    v = normal(rng);
  for (int8_t &v : w)
    v = int8_t(code(rng));
  for (int n = 0; n < N2; ++n)
    scales[n] = 0.003f * float(n + 1);
  Buffer xb(x.data(), halide_type_float, 32, K2, T2, K2);
  Buffer wb(w.data(), halide_type_int, 8, K2, N2, K2);
  Buffer sb(scales.data(), halide_type_float, 32, N2);
  Buffer ob(out.data(), halide_type_float, 32, N2, T2, N2);
  ASSERT_EQ(spark_bf16_linear_w8a16(&xb.b, &wb.b, &sb.b, &ob.b), 0);
  for (int t = 0; t < T2; ++t)
    for (int n = 0; n < N2; ++n) {
      double sum = 0, mag = 0;
      for (int k = 0; k < K2; ++k) {
        double p = w[size_t(n) * K2 + k] * double(scales[n]) *
                   bf16ToFloat(floatToBF16(x[size_t(t) * K2 + k]));
        sum += p;
        mag += std::fabs(p);
      }
      EXPECT_NEAR(out[size_t(t) * N2 + n], sum, 1e-5 * mag + 1e-6)
          << "token " << t << " row " << n;
    }
}

// A shape the kernels cannot take is refused, not computed wrongly.
TEST(Avx2KernelsShapes, RefusesRowsNotAMultipleOfTheGroup) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> x(100, 1.0f), out(8, 0.0f);
  std::vector<uint8_t> w(8 * 50);
  std::vector<uint16_t> scales(8);
  Buffer xb(x.data(), halide_type_float, 32, 100, 1, 100);
  Buffer wb(w.data(), halide_type_uint, 8, 50, 8, 50);
  Buffer sb(scales.data(), halide_type_float, 16, 1, 8, 1);
  Buffer ob(out.data(), halide_type_float, 32, 8, 1, 8);
  EXPECT_NE(spark_avx2_linear_w4a8(&xb.b, &wb.b, &sb.b, 0.0f, &ob.b), 0);
}

// Groups of 32 (K / 32 scales per row) are left to the Halide kernels.
TEST(Avx2KernelsShapes, RefusesGroupsOf32) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> x(128, 1.0f), out(8, 0.0f);
  std::vector<uint8_t> w(8 * 64);
  std::vector<uint16_t> scales(8 * 4), zeros(8 * 4);
  Buffer xb(x.data(), halide_type_float, 32, 128, 1, 128);
  Buffer wb(w.data(), halide_type_uint, 8, 64, 8, 64);
  Buffer sb(scales.data(), halide_type_float, 16, 4, 8, 4);
  Buffer zb(zeros.data(), halide_type_float, 16, 4, 8, 4);
  Buffer ob(out.data(), halide_type_float, 32, 8, 1, 8);
  EXPECT_NE(spark_avx2_linear_w4a8(&xb.b, &wb.b, &sb.b, 0.0f, &ob.b), 0);
  EXPECT_NE(spark_avx2_linear_w4a16_xbf16(&xb.b, &wb.b, &sb.b, &zb.b, &ob.b),
            0);
}

// K a multiple of 16 but not of 32 (the test models' hidden size 16): one
// token once read 32 values a row, past its row and its input (found by
// two models' parallel sessions disagreeing; ASan builds see the read).
TEST(Avx2KernelsShapes, OneTokenReadsOnlyKWhenKIsNotAMultipleOf32) {
  SKIP_WITHOUT_AVX2();
  constexpr int k = 16, n = 4;
  std::vector<float> x(k), out(n, -7.0f), scales(n, 0.5f);
  std::vector<int8_t> w(size_t(n) * k);
  for (int i = 0; i < k; ++i)
    x[i] = float(i % 5) - 2.0f;
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = int8_t(int(i * 37 % 255) - 127);
  Buffer xb(x.data(), halide_type_float, 32, k, 1, k);
  Buffer wb(w.data(), halide_type_int, 8, k, n, k);
  Buffer sb(scales.data(), halide_type_float, 32, n);
  Buffer ob(out.data(), halide_type_float, 32, n, 1, n);
  for (auto kernel : {spark_avx2_linear_w8a16, spark_avx2_linear_w8a16_xbf16}) {
    ASSERT_EQ(kernel(&xb.b, &wb.b, &sb.b, &ob.b), 0);
    for (int row = 0; row < n; ++row) {
      double want = 0; // the inputs are exact in bf16
      for (int i = 0; i < k; ++i)
        want += double(w[size_t(row) * k + i]) * 0.5 * x[i];
      EXPECT_FLOAT_EQ(out[row], float(want)) << "row " << row;
    }
  }
}

// 1 token (decode), 3 (the one-token remainder only), 4 (one block of 4),
// 9 (two blocks and a remainder).
const auto kTokens = ::testing::Values(1, 3, 4, 9, 13);
std::string caseName(
    const ::testing::TestParamInfo<std::tuple<const KernelSet *, int>> &info) {
  return std::string(std::get<0>(info.param)->name) + "_" +
         std::to_string(std::get<1>(info.param)) + "tokens";
}
// The VNNI kernels prepare their inputs 16 at a time (x86_inputs_avx512.h);
// the result must be the scalar preparation's, byte for byte
// (X86InputsCheck.c): int16 planes, scales and sums for w4a16 (bf16 and f16
// rounding), int8 codes, scales and group sums for w8a8 and w4a8.
TEST(X86Inputs, Avx512PreparationIsTheScalarOne) {
  if (!cpuHasAvx512Vnni()) {
    std::printf("[SKIP] this CPU has no AVX512F, AVX512BW and AVX512_VNNI\n");
    GTEST_SKIP();
  }
  EXPECT_EQ(spark_test_avx512_inputs_mismatches(20261201u, 120), 0);
}

// The AVX2 kernels prepare 16-bit inputs as int16 eight at a time
// (x86_inputs_avx2.h): byte for byte the scalar preparation, for 4-bit
// groups of 16 to 128 and for w8a16's values (X86InputsAvx2Check.c).
TEST(X86Inputs, Avx2PreparationIsTheScalarOne) {
  if (!cpuHasAvx2()) {
    std::printf("[SKIP] this CPU has no AVX2, FMA and F16C\n");
    GTEST_SKIP();
  }
  EXPECT_EQ(spark_test_avx2_inputs_mismatches(20261202u, 150), 0);
}

/// The 6-bit kernels of one copy of int8_linear.c.
using W6A8Kernel = int (*)(halide_buffer_t *, halide_buffer_t *,
                           halide_buffer_t *, halide_buffer_t *, float,
                           halide_buffer_t *);
struct SixBitSet {
  const char *name;
  W6A8Kernel w6a8;
  W4Kernel w6a16[2]; // bf16, f16 inputs
};
const SixBitSet kSixBitVnni = {
    "avx512vnni",
    spark_vnni_linear_w6a8,
    {spark_vnni_linear_w6a16_xbf16, spark_vnni_linear_w6a16_xf16}};
const SixBitSet kSixBitNoGfni = {
    "avx512vnni_nogfni",
    spark_nogfni_linear_w6a8,
    {spark_nogfni_linear_w6a16_xbf16, spark_nogfni_linear_w6a16_xf16}};

/// (set, tokens)
class SixBitKernels
    : public ::testing::TestWithParam<std::tuple<const SixBitSet *, int>> {};

/// Random 6-bit codes [N][K] in rows as docs/pack-format.md lays them out:
/// K/2 bytes of low nibbles (two a byte, low nibble first), then per block of
/// 128 codes 32 bytes of top bits, byte i holding those of the block's codes
/// 2i, 2i+1, 64+2i and 65+2i in bits 0-1, 2-3, 4-5 and 6-7; rows `Stride`
/// bytes apart. f16 scales and zero points per group of 128.
struct SixBit {
  static constexpr int Stride = K / 2 + K / 4 + 64, Groups = K / 128;
  std::vector<int> code;
  std::vector<uint8_t> rows;
  std::vector<uint16_t> scales, zeros;
  explicit SixBit(std::mt19937 &rng)
      : code(size_t(N) * K), rows(size_t(N) * Stride, 0xA5),
        scales(size_t(N) * Groups), zeros(scales.size()) {
    std::uniform_int_distribution<int> six(0, 63);
    for (int &v : code)
      v = six(rng);
    for (int n = 0; n < N; ++n) {
      const int *c = &code[size_t(n) * K];
      uint8_t *row = &rows[size_t(n) * Stride];
      for (int j = 0; j < K / 2; ++j)
        row[j] = uint8_t((c[2 * j] & 15) | (c[2 * j + 1] & 15) << 4);
      for (int b = 0; b < K / 128; ++b)
        for (int i = 0; i < 32; ++i) {
          const int *block = c + 128 * b;
          row[K / 2 + 32 * b + i] = uint8_t(
              (block[2 * i] >> 4) | (block[2 * i + 1] >> 4) << 2 |
              (block[64 + 2 * i] >> 4) << 4 | (block[65 + 2 * i] >> 4) << 6);
        }
    }
    for (size_t i = 0; i < scales.size(); ++i) {
      scales[i] = floatToHalf(0.002f + 0.0003f * float(i % 41));
      zeros[i] = floatToHalf(float(i % 64) - 0.25f);
    }
  }
};

TEST_P(SixBitKernels, W6A8AndW6A16) {
  if (!cpuHasAvx512Vnni()) {
    std::printf("[SKIP] this CPU has no AVX512F, AVX512BW and AVX512_VNNI\n");
    GTEST_SKIP();
  }
  const SixBitSet &set = *std::get<0>(GetParam());
  Case c(std::get<1>(GetParam()));
  const SixBit weights(c.rng);
  const int Groups = SixBit::Groups;
  auto scaleOf = [&](int n, int k) {
    return double(halfToFloat(weights.scales[size_t(n) * Groups + k / 128]));
  };
  auto zeroOf = [&](int n, int k) {
    return double(halfToFloat(weights.zeros[size_t(n) * Groups + k / 128]));
  };
  // All N rows (a task of 64 and a partial one), and N - 1.
  for (const int Rows : {N, N - 1}) {
    SCOPED_TRACE("rows " + std::to_string(Rows));
    Buffer x(c.x.data(), halide_type_float, 32, K, c.T, XStride);
    Buffer wb(const_cast<uint8_t *>(weights.rows.data()), halide_type_uint, 8,
              K / 2 + K / 4, Rows, SixBit::Stride);
    Buffer sb(const_cast<uint16_t *>(weights.scales.data()), halide_type_float,
              16, Groups, Rows, Groups);
    Buffer zb(const_cast<uint16_t *>(weights.zeros.data()), halide_type_float,
              16, Groups, Rows, Groups);
    // w6a8: int8 codes of each token (its own scale, and a static one).
    for (float fixed : {0.0f, 0.05f}) {
      SCOPED_TRACE("w6a8, input scale " + std::to_string(fixed));
      std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
      for (int t = 0; t < c.T; ++t) {
        float xs;
        std::vector<int> q = codes(c, t, fixed, xs);
        for (int n = 0; n < Rows; ++n) {
          double sum = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            const double s = scaleOf(n, k), z = zeroOf(n, k);
            sum += (weights.code[size_t(n) * K + k] - z) * s * q[k];
            mag += (weights.code[size_t(n) * K + k] + std::fabs(z)) * s *
                   std::fabs(q[k]);
          }
          want[size_t(t) * N + n] = sum * xs;
          magnitude[size_t(t) * N + n] = mag * xs;
        }
      }
      std::vector<float> out = c.out();
      Buffer ob(out.data(), halide_type_float, 32, Rows, c.T, OutStride);
      ASSERT_EQ(set.w6a8(&x.b, &wb.b, &sb.b, &zb.b, fixed, &ob.b), 0);
      expectClose(c, out, want, magnitude, Rows);
    }
    // w6a16: the inputs rounded to bf16, then to f16.
    for (int type : {1, 2}) {
      SCOPED_TRACE(type == 1 ? "w6a16, bf16 inputs" : "w6a16, f16 inputs");
      std::vector<double> want(size_t(c.T) * N), magnitude(want.size());
      for (int t = 0; t < c.T; ++t)
        for (int n = 0; n < Rows; ++n) {
          double sum = 0, mag = 0;
          for (int k = 0; k < K; ++k) {
            const double s = scaleOf(n, k), z = zeroOf(n, k);
            const double in = rounded(c.in(t, k), type);
            sum += (weights.code[size_t(n) * K + k] - z) * s * in;
            mag += (weights.code[size_t(n) * K + k] + std::fabs(z)) * s *
                   std::fabs(in);
          }
          want[size_t(t) * N + n] = sum;
          magnitude[size_t(t) * N + n] = mag;
        }
      std::vector<float> out = c.out();
      Buffer ob(out.data(), halide_type_float, 32, Rows, c.T, OutStride);
      ASSERT_EQ(set.w6a16[type - 1](&x.b, &wb.b, &sb.b, &zb.b, &ob.b), 0);
      expectClose(c, out, want, magnitude, Rows);
    }
  }
}

// A 6-bit kernel refuses what it cannot read: K not a multiple of 128, rows
// of another length, zero points of another shape.
TEST(SixBitKernelsShapes, RefusesOtherShapes) {
  if (!cpuHasAvx512Vnni()) {
    std::printf("[SKIP] this CPU has no AVX512F, AVX512BW and AVX512_VNNI\n");
    GTEST_SKIP();
  }
  const int k = 192, groups = 6; // groups of 32: not the kernels' 128
  std::vector<float> x(k, 1.0f), out(4, 0.0f);
  std::vector<uint8_t> w(4 * (k / 2 + k / 4), 0);
  std::vector<uint16_t> sides(4 * groups, 0);
  Buffer xb(x.data(), halide_type_float, 32, k, 1, k);
  Buffer wb(w.data(), halide_type_uint, 8, k / 2 + k / 4, 4, k / 2 + k / 4);
  Buffer sb(sides.data(), halide_type_float, 16, groups, 4, groups);
  Buffer ob(out.data(), halide_type_float, 32, 4, 1, 4);
  EXPECT_NE(spark_vnni_linear_w6a8(&xb.b, &wb.b, &sb.b, &sb.b, 0.0f, &ob.b), 0);
  EXPECT_NE(spark_vnni_linear_w6a16_xbf16(&xb.b, &wb.b, &sb.b, &sb.b, &ob.b),
            0);
  // K = 256 with rows of 4-bit length
  std::vector<float> x2(256, 1.0f);
  std::vector<uint8_t> w2(4 * 128, 0);
  std::vector<uint16_t> s2(4 * 2, 0);
  Buffer x2b(x2.data(), halide_type_float, 32, 256, 1, 256);
  Buffer w2b(w2.data(), halide_type_uint, 8, 128, 4, 128);
  Buffer s2b(s2.data(), halide_type_float, 16, 2, 4, 2);
  EXPECT_NE(spark_vnni_linear_w6a8(&x2b.b, &w2b.b, &s2b.b, &s2b.b, 0.0f, &ob.b),
            0);
  EXPECT_NE(spark_vnni_linear_w6a16_xf16(&x2b.b, &w2b.b, &s2b.b, &s2b.b, &ob.b),
            0);
}

INSTANTIATE_TEST_SUITE_P(
    X86, SixBitKernels,
    ::testing::Combine(::testing::Values(&kSixBitVnni, &kSixBitNoGfni),
                       kTokens),
    [](const ::testing::TestParamInfo<std::tuple<const SixBitSet *, int>>
           &info) {
      return std::string(std::get<0>(info.param)->name) + "_" +
             std::to_string(std::get<1>(info.param)) + "tokens";
    });

INSTANTIATE_TEST_SUITE_P(
    X86, Int8Kernels,
    ::testing::Combine(::testing::Values(&kAvx2, &kAvx2OtherRows, &kAvx512Vnni,
                                         &kAvx512VnniNoGfni),
                       kTokens),
    caseName);
INSTANTIATE_TEST_SUITE_P(
    X86, W4A16Kernels,
    ::testing::Combine(::testing::Values(&kAvx2, &kAvx2OtherRows, &kAvx512Vnni,
                                         &kAvx512VnniInt16,
                                         &kAvx512VnniInt16Other),
                       kTokens),
    caseName);
INSTANTIATE_TEST_SUITE_P(
    X86, WideKernels,
    ::testing::Combine(::testing::Values(&kAvx2, &kAvx2OtherRows, &kAvx512BF16,
                                         &kAvx512BF16Fma, &kAvx512BF16Dot),
                       kTokens),
    caseName);

} // namespace
