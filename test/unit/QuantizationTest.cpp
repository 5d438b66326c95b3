//===- QuantizationTest.cpp - the int8 weight packer ----------------------===//
#include "spark/Codegen/ModelPlan.h"
#include "spark/Import/FloatFormats.h"
#include "spark/model_abi.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include <sys/mman.h>
#include <unistd.h>

using namespace spark;

namespace {

float decodeI8(uint8_t byte) { return float(int8_t(byte)); }

// Codes stored and read back are exact, and saturate at +-127.
TEST(Int8Packer, CodesRoundTripExactly) {
  for (int code = -127; code <= 127; ++code) {
    uint8_t byte;
    encodeElement(float(code), DType::I8, &byte);
    EXPECT_EQ(decodeI8(byte), float(code));
  }
  uint8_t byte;
  encodeElement(300.0f, DType::I8, &byte);
  EXPECT_EQ(decodeI8(byte), 127.0f);
  encodeElement(-300.0f, DType::I8, &byte);
  EXPECT_EQ(decodeI8(byte), -127.0f);
  encodeElement(2.5f, DType::I8, &byte); // ties to even
  EXPECT_EQ(decodeI8(byte), 2.0f);
}

// Quantize / dequantize error stays within half a grid step of the row.
TEST(Int8Packer, ErrorWithinHalfAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(257);
    for (float &v : row)
      v = normal(rng) * float(trial + 1);
    float scale = symmetricInt8Scale([&](int64_t i) { return row[i]; },
                                     int64_t(row.size()));
    float largest = 0;
    for (float v : row)
      largest = std::max(largest, std::fabs(v));
    EXPECT_FLOAT_EQ(scale, largest / 127.0f);
    for (float v : row) {
      uint8_t byte;
      encodeElement(v / scale, DType::I8, &byte);
      float back = decodeI8(byte) * scale;
      ASSERT_LE(std::fabs(back - v), 0.5f * scale * (1.0f + 1e-5f)) << v;
    }
  }
  EXPECT_EQ(symmetricInt8Scale([](int64_t) { return 0.0f; }, 8), 1.0f);
}

} // namespace

/// A group of 128 values drawn uniformly from [-0.7, 1.3).
static std::vector<float> uniformGroup(unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-0.7f, 1.3f);
  std::vector<float> group(128);
  for (float &v : group)
    v = uniform(rng);
  return group;
}

namespace {

// 4-bit groups: every code is in 0..15 and the reconstruction error of each
// value stays within half a grid step (values inside the searched range).
TEST(Int4Packer, GroupCodesAndError) {
  const std::vector<float> group = uniformGroup(9);
  Int4Group g = searchInt4Group([&](int64_t i) { return group[i]; },
                                int64_t(group.size()));
  EXPECT_GE(g.zero, 0.0f);
  EXPECT_LE(g.zero, 15.0f);
  // Scale and zero point are what the pack stores: f16 values.
  EXPECT_EQ(g.zero, halfToFloat(floatToHalf(g.zero)));
  EXPECT_EQ(g.scale, halfToFloat(floatToHalf(g.scale)));
  double error = 0.0, signal = 0.0;
  for (float v : group) {
    int code = quantizeInt4(v, g);
    ASSERT_GE(code, 0);
    ASSERT_LE(code, 15);
    float back = (float(code) - g.zero) * g.scale;
    if (v >= -g.zero * g.scale && v <= (15.0f - g.zero) * g.scale) {
      ASSERT_LE(std::fabs(back - v), 0.5f * g.scale * (1.0f + 1e-5f));
    }
    error += (back - v) * (back - v);
    signal += v * v;
  }
  // A 4-bit grid over this range: about 20 dB or better.
  EXPECT_GT(10.0 * std::log10(signal / error), 18.0);
  // Codes round-trip exactly: the grid points quantize to themselves.
  for (int code = 0; code <= 15; ++code)
    EXPECT_EQ(quantizeInt4((float(code) - g.zero) * g.scale, g), code);
}

// The least-squares refit beats the plain [min, max] grid (16 levels over
// the range, integer zero) on a bell-shaped group, and calibrated importance
// moves the error off the channel that matters.
TEST(Int4Packer, RefitAndImportance) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> group(128);
  for (float &v : group)
    v = normal(rng);
  auto value = [&](int64_t i) { return group[i]; };
  auto error = [&](const Int4Group &g, const std::vector<float> &w) {
    double e = 0.0;
    for (size_t i = 0; i < group.size(); ++i) {
      double d = (quantizeInt4(group[i], g) - g.zero) * g.scale - group[i];
      e += w[i] * d * d;
    }
    return e;
  };
  std::vector<float> uniform(group.size(), 1.0f);
  float lo = *std::min_element(group.begin(), group.end());
  float hi = *std::max_element(group.begin(), group.end());
  Int4Group plain{(hi - lo) / 15.0f, std::nearbyint(-lo / ((hi - lo) / 15.0f))};
  Int4Group searched = searchInt4Group(value, int64_t(group.size()));
  EXPECT_LT(error(searched, uniform), 0.8 * error(plain, uniform));

  // Channel 3 carries almost all the importance: its error shrinks to a
  // small fraction of a grid step.
  std::vector<float> importance(group.size(), 1e-3f);
  importance[3] = 1e3f;
  Int4Group weighted =
      searchInt4Group(value, int64_t(group.size()), importance.data());
  auto channelError = [&](const Int4Group &g, int i) {
    return std::fabs((quantizeInt4(group[i], g) - g.zero) * g.scale - group[i]);
  };
  EXPECT_LT(channelError(weighted, 3), 0.1f * weighted.scale);
  EXPECT_LE(error(weighted, importance), error(searched, importance));
  Int4Group symmetric =
      searchSymmetricInt4Group(value, int64_t(group.size()), importance.data());
  EXPECT_LT(channelError(symmetric, 3), 0.1f * symmetric.scale);
}

} // namespace

namespace {

// Symmetric 4-bit groups (w4a8): the zero point is always 8, so (code - 8)
// covers -8..7; values within the grid reconstruct within half a step, the
// sign of the reconstruction never flips, and grid points round-trip.
TEST(Int4Packer, SymmetricGroupCodesAndError) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.1f, 0.9f);
  std::vector<float> group(128);
  for (float &v : group)
    v = uniform(rng);
  Int4Group g = searchSymmetricInt4Group([&](int64_t i) { return group[i]; },
                                         int64_t(group.size()));
  EXPECT_EQ(g.zero, 8.0f);
  EXPECT_GT(g.scale, 0.0f);
  double error = 0.0, signal = 0.0;
  for (float v : group) {
    int code = quantizeInt4(v, g);
    ASSERT_GE(code, 0);
    ASSERT_LE(code, 15);
    float back = (float(code) - 8.0f) * g.scale;
    if (v >= -8.0f * g.scale && v <= 7.0f * g.scale) {
      ASSERT_LE(std::fabs(back - v), 0.5f * g.scale * (1.0f + 1e-5f));
    }
    ASSERT_FALSE(back * v < 0.0f) << v;
    error += (back - v) * (back - v);
    signal += v * v;
  }
  EXPECT_GT(10.0 * std::log10(signal / error), 16.0);
  for (int code = 0; code <= 15; ++code)
    EXPECT_EQ(quantizeInt4((float(code) - 8.0f) * g.scale, g), code);
  // An all-zero group: scale 1, every code 8.
  Int4Group zero = searchSymmetricInt4Group([](int64_t) { return 0.0f; }, 16);
  EXPECT_EQ(zero.scale, 1.0f);
  EXPECT_EQ(quantizeInt4(0.0f, zero), 8);
}

} // namespace

// readElements over stacked parts of different dtypes, from the middle of a
// row across the parts' boundary: 4-bit bytes are low + 16 * high codes of
// each group's grid, int8 elements each value over its row's scale.
TEST(PackTensorElements, RangesAcrossStackedParts) {
  const int64_t cols = 64, group = 16, groups = cols / group;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> first(3 * cols), all;
  std::vector<uint16_t> second(2 * cols); // bf16
  for (float &v : first)
    v = normal(rng);
  for (uint16_t &v : second)
    v = floatToBF16(normal(rng));
  TensorView a, b;
  a.dtype = DType::F32;
  a.shape = {3, cols};
  a.data = reinterpret_cast<const uint8_t *>(first.data());
  b.dtype = DType::BF16;
  b.shape = {2, cols};
  b.data = reinterpret_cast<const uint8_t *>(second.data());
  all = first;
  for (uint16_t v : second)
    all.push_back(bf16ToFloat(v));
  const int64_t rows = 5;

  PackTensor codes;
  codes.parts = {&a, &b};
  codes.dtype = DType::U8;
  codes.shape = {rows, cols / 2};
  codes.codeCols = cols;
  codes.group = group;
  for (int64_t g = 0; g < rows * groups; ++g) {
    codes.groupScales.push_back(0.1f + 0.01f * float(g));
    codes.groupZeros.push_back(float(g % 16));
  }
  // Bytes 37 to 132 of 5 rows of 32: from the middle of row 1 across the
  // parts' boundary (byte 96, row 3) to the middle of row 4.
  const int64_t start = cols / 2 + 5, count = 3 * cols / 2; // bytes
  ASSERT_LE(start + count, rows * cols / 2);
  std::vector<float> bytes(count);
  codes.readElements(start, count, bytes.data());
  for (int64_t i = 0; i < count; ++i) {
    int64_t at = 2 * (start + i), g = (at / cols) * groups + at % cols / group;
    Int4Group grid{codes.groupScales[g], codes.groupZeros[g]};
    EXPECT_EQ(bytes[i], float(quantizeInt4(all[at], grid) +
                              16 * quantizeInt4(all[at + 1], grid)))
        << "byte " << start + i;
  }

  PackTensor int8;
  int8.parts = {&a, &b};
  int8.dtype = DType::I8;
  int8.shape = {rows, cols};
  for (int64_t r = 0; r < rows; ++r)
    int8.rowScales.push_back(0.02f * float(r + 1));
  std::vector<float> scaled(3 * cols);
  int8.readElements(cols - 7, 3 * cols, scaled.data());
  for (int64_t i = 0; i < 3 * cols; ++i) {
    int64_t at = cols - 7 + i;
    EXPECT_EQ(scaled[i], all[at] / int8.rowScales[at / cols])
        << "element " << at;
  }
}

// Grouped rows (SPARK_LAYOUT_GROUPED_ROWS): each row's code bytes, then its
// scales' and zero points' f16 bytes (little endian), then zeros to the row's
// end, across row boundaries.
TEST(PackTensorElements, GroupedRows) {
  const int64_t cols = 256, group = 128, groups = cols / group, rows = 3;
  for (const bool symmetric : {false, true}) {
    SCOPED_TRACE(symmetric ? "symmetric" : "asymmetric");
    PackTensor dense;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < rows * cols; ++i)
      dense.values.push_back(normal(rng));
    dense.dtype = DType::U8;
    dense.shape = {rows, cols / 2};
    dense.codeCols = cols;
    dense.group = group;
    dense.symmetricGroups = symmetric;
    for (int64_t g = 0; g < rows * groups; ++g) {
      dense.groupScales.push_back(0.25f + 0.125f * float(g));
      dense.groupZeros.push_back(symmetric ? 8.0f : float(g % 16));
    }
    PackTensor grouped = dense;
    grouped.rowBytes = spark_grouped_row_bytes(cols, group, symmetric);
    ASSERT_EQ(grouped.rowBytes, 192); // 128 codes + 4 or 8: one more line
    grouped.shape = {rows, grouped.rowBytes};
    std::vector<float> codes(rows * cols / 2), bytes(grouped.elements());
    dense.readElements(0, int64_t(codes.size()), codes.data());
    // In two pieces that split row 1's scales.
    const int64_t split = grouped.rowBytes + cols / 2 + 1;
    grouped.readElements(0, split, bytes.data());
    grouped.readElements(split, grouped.elements() - split,
                         bytes.data() + split);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < grouped.rowBytes; ++c) {
        const int64_t side = c - cols / 2;
        float want = 0.0f;
        if (side < 0) {
          want = codes[r * cols / 2 + c];
        } else if (side < 2 * groups || (!symmetric && side < 4 * groups)) {
          const std::vector<float> &from =
              side < 2 * groups ? dense.groupScales : dense.groupZeros;
          const uint16_t half =
              floatToHalf(from[r * groups + (side / 2) % groups]);
          want = float(side % 2 ? half >> 8 : half & 0xff);
        }
        EXPECT_EQ(bytes[r * grouped.rowBytes + c], want)
            << "row " << r << ", byte " << c;
      }
  }
}

// Releasing the values behind a grouped tensor's bytes stays inside its
// source: the pages after it keep their contents (a MADV_DONTNEED past the
// end of a checkpoint mapping would zero the memory of whatever lies there).
TEST(PackTensorElements, ReleaseStaysInsideTheSource) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  uint8_t *base =
      static_cast<uint8_t *>(mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(base, MAP_FAILED);
  std::memset(base, 0x5a, 4 * page);
  TensorView source; // pages 0 and 1 as f32
  source.dtype = DType::F32;
  const int64_t cols = 256, rows = int64_t(2 * page / 4) / cols;
  source.shape = {rows, cols};
  source.data = base;
  PackTensor grouped;
  grouped.source = &source;
  grouped.dtype = DType::U8;
  grouped.codeCols = cols;
  grouped.group = 128;
  grouped.rowBytes = spark_grouped_row_bytes(cols, 128, false);
  grouped.shape = {rows, grouped.rowBytes};
  grouped.releaseElements(0, grouped.elements());
  EXPECT_EQ(base[0], 0) << "the source's pages were not released";
  EXPECT_EQ(base[2 * page - 1], 0);
  for (size_t i = 2 * page; i < 4 * page; ++i)
    ASSERT_EQ(base[i], 0x5a) << "byte " << i - 2 * page << " past the source";
  grouped.releaseValues(0, int64_t(4 * page)); // more than the source holds
  for (size_t i = 2 * page; i < 4 * page; ++i)
    ASSERT_EQ(base[i], 0x5a) << "byte " << i - 2 * page << " past the source";
  munmap(base, 4 * page);
}

namespace {

// The searches' eight-lane AVX2 loops give the grids of the four-lane
// loops bit for bit (so a pack does not depend on the CPU that built it):
// groups of 32, 64 and 128, a group of 132 (a four-lane tail), with and
// without importance, asymmetric and symmetric.
TEST(Int4Packer, Avx2SearchMatchesFourLanes) {
  if (!int4SearchUsesAvx2()) {
    std::printf("[SKIP] this CPU (or build) has no AVX2 search loops\n");
    GTEST_SKIP();
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_real_distribution<float> positive(0.01f, 4.0f);
  int compared = 0;
  for (int64_t n : {32, 64, 128, 132}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> group(n), importance(n);
      for (float &v : group)
        v = normal(rng) * (trial % 7 == 0 ? 50.0f : 1.0f);
      for (float &v : importance)
        v = positive(rng);
      auto value = [&](int64_t i) { return group[i]; };
      for (const float *weights :
           {(const float *)nullptr, (const float *)importance.data()}) {
        Int4Group a[2], s[2];
        for (bool avx2 : {false, true}) {
          int4SearchUsesAvx2() = avx2;
          a[avx2] = searchInt4Group(value, n, weights);
          s[avx2] = searchSymmetricInt4Group(value, n, weights);
        }
        ASSERT_EQ(std::memcmp(&a[0], &a[1], sizeof(Int4Group)), 0)
            << "asymmetric, n " << n << ", trial " << trial;
        ASSERT_EQ(std::memcmp(&s[0], &s[1], sizeof(Int4Group)), 0)
            << "symmetric, n " << n << ", trial " << trial;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 1600);
}

} // namespace

namespace {

/// A random symmetric positive definite n x n matrix: A A^T / n + I / 4.
std::vector<double> randomPositiveDefinite(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> a(size_t(n * n)), h(size_t(n * n));
  for (double &v : a)
    v = normal(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = i == j ? 0.25 : 0.0;
      for (int64_t k = 0; k < n; ++k)
        sum += a[size_t(i * n + k)] * a[size_t(j * n + k)] / double(n);
      h[size_t(i * n + j)] = sum;
    }
  return h;
}

/// The dequantized value of weight (r, c) from GPTQ's grids and codes.
float dequantized(const std::vector<Int4Group> &grids,
                  const std::vector<uint8_t> &codes, int64_t r, int64_t c,
                  int64_t cols, int64_t group) {
  const Int4Group &g = grids[size_t(r * (cols / group) + c / group)];
  return (float(codes[size_t(r * cols + c)]) - g.zero) * g.scale;
}

} // namespace

// L L^T is h, L lower triangular with a positive diagonal, across several
// of the factorization's blocks of columns and chunks of the update; a
// matrix that is not positive definite is refused.
TEST(Gptq, CholeskyInPlace) {
  for (int64_t n : {37, 300}) {
    SCOPED_TRACE(n);
    const std::vector<double> h = randomPositiveDefinite(n, 11);
    std::vector<double> l = h;
    ASSERT_TRUE(choleskyInPlace(l.data(), n));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_GT(l[size_t(i * n + i)], 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        double sum = 0.0;
        for (int64_t k = 0; k <= j; ++k)
          sum += l[size_t(i * n + k)] * l[size_t(j * n + k)];
        EXPECT_NEAR(sum, h[size_t(i * n + j)], 1e-9 * double(n))
            << i << ", " << j;
      }
    }
    for (int64_t at : {int64_t(5), n - 3}) {
      std::vector<double> indefinite = h;
      indefinite[size_t(at * n + at)] = -1.0;
      EXPECT_FALSE(choleskyInPlace(indefinite.data(), n)) << at;
    }
  }
}

// With uncorrelated inputs of equal power (the moment a multiple of I) no
// error is spread: GPTQ's grids and codes are the group search's and the
// nearest codes, both schemes.
TEST(Gptq, IdentityMomentIsTheGroupSearch) {
  const int64_t rows = 5, cols = 256, group = 64, groups = cols / group;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(size_t(rows * cols));
  for (float &v : w)
    v = normal(rng);
  std::vector<float> moment(size_t(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    moment[size_t(i * cols + i)] = 2.5f;
  for (const bool symmetric : {false, true}) {
    SCOPED_TRACE(symmetric ? "symmetric" : "asymmetric");
    std::vector<Int4Group> grids(size_t(rows * groups));
    std::vector<uint8_t> codes(size_t(rows * cols));
    ASSERT_TRUE(gptqInt4(w.data(), rows, cols, group, symmetric, moment.data(),
                         grids.data(), codes.data()));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const float *values = &w[size_t(r * cols + g * group)];
        Int4Group want = symmetric ? searchSymmetricInt4Group(values, group)
                                   : searchInt4Group(values, group);
        want.scale = halfToFloat(floatToHalf(want.scale));
        const Int4Group &got = grids[size_t(r * groups + g)];
        EXPECT_EQ(got.scale, want.scale) << r << ", " << g;
        EXPECT_EQ(got.zero, want.zero) << r << ", " << g;
        for (int64_t c = 0; c < group; ++c)
          EXPECT_EQ(codes[size_t(r * cols + g * group + c)],
                    quantizeInt4(values[c], want))
              << r << ", " << g * group + c;
      }
  }
}

// Correlated inputs: GPTQ's rounding leaves a smaller error in the product
// (W - Q) x over the inputs it was calibrated on than each group's best
// grid with the nearest codes; a column no input reaches is rounded as 0.
TEST(Gptq, LowersTheProductErrorOnCorrelatedInputs) {
  const int64_t rows = 16, cols = 128, group = 32, samples = 2048;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Inputs x = M z: each channel a mix of a few shared sources; channel 9
  // is never reached.
  std::vector<float> mix(size_t(cols * 8)), x(size_t(samples * cols));
  for (float &v : mix)
    v = normal(rng);
  for (int64_t s = 0; s < samples; ++s) {
    float z[8];
    for (float &v : z)
      v = normal(rng);
    for (int64_t c = 0; c < cols; ++c) {
      float v = 0.1f * normal(rng);
      for (int k = 0; k < 8; ++k)
        v += mix[size_t(c * 8 + k)] * z[k];
      x[size_t(s * cols + c)] = c == 9 ? 0.0f : v;
    }
  }
  std::vector<float> moment(size_t(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0.0;
      for (int64_t s = 0; s < samples; ++s)
        sum += double(x[size_t(s * cols + i)]) * x[size_t(s * cols + j)];
      moment[size_t(i * cols + j)] = float(sum / double(samples));
    }
  std::vector<float> w(size_t(rows * cols));
  for (float &v : w)
    v = normal(rng);
  for (const bool symmetric : {false, true}) {
    SCOPED_TRACE(symmetric ? "symmetric" : "asymmetric");
    std::vector<Int4Group> grids(size_t(rows * cols / group));
    std::vector<uint8_t> codes(size_t(rows * cols));
    ASSERT_TRUE(gptqInt4(w.data(), rows, cols, group, symmetric, moment.data(),
                         grids.data(), codes.data()));
    std::vector<float> plain(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < cols / group; ++g) {
        const float *values = &w[size_t(r * cols + g * group)];
        Int4Group q = symmetric ? searchSymmetricInt4Group(values, group)
                                : searchInt4Group(values, group);
        q.scale = halfToFloat(floatToHalf(q.scale));
        for (int64_t c = 0; c < group; ++c)
          plain[size_t(r * cols + g * group + c)] =
              (float(quantizeInt4(values[c], q)) - q.zero) * q.scale;
      }
    double gptqError = 0.0, plainError = 0.0;
    for (int64_t s = 0; s < samples; ++s)
      for (int64_t r = 0; r < rows; ++r) {
        double dg = 0.0, dp = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double xc = x[size_t(s * cols + c)],
                       wc = w[size_t(r * cols + c)];
          dg += (wc - dequantized(grids, codes, r, c, cols, group)) * xc;
          dp += (wc - plain[size_t(r * cols + c)]) * xc;
        }
        gptqError += dg * dg;
        plainError += dp * dp;
      }
    std::printf("product error, GPTQ / plain rounding: %.3f\n",
                gptqError / plainError);
    EXPECT_LT(gptqError, 0.5 * plainError);
    for (int64_t r = 0; r < rows; ++r) {
      const Int4Group &g = grids[size_t(r * (cols / group) + 9 / group)];
      EXPECT_LE(std::fabs(dequantized(grids, codes, r, 9, cols, group)),
                0.5f * g.scale)
          << "row " << r;
    }
  }
}

// A 4-bit tensor with codes chosen by GPTQ gives those codes, two a byte,
// in the dense and the grouped-rows layouts alike.
TEST(PackTensorElements, GptqCodes) {
  const int64_t rows = 2, cols = 256, group = 128;
  PackTensor t;
  t.dtype = DType::U8;
  t.shape = {rows, cols / 2};
  t.codeCols = cols;
  t.group = group;
  for (int64_t i = 0; i < rows * cols; ++i) {
    t.values.push_back(100.0f); // would round to 15 everywhere
    t.codes.push_back(uint8_t((i * 7) % 16));
  }
  t.groupScales.assign(size_t(rows * cols / group), 1.0f);
  t.groupZeros.assign(size_t(rows * cols / group), 8.0f);
  std::vector<float> bytes(size_t(rows * cols / 2));
  t.readElements(0, int64_t(bytes.size()), bytes.data());
  for (int64_t b = 0; b < rows * cols / 2; ++b)
    EXPECT_EQ(bytes[size_t(b)],
              float((2 * b * 7) % 16 + 16 * ((2 * b + 1) * 7 % 16)))
        << "byte " << b;
  PackTensor grouped = t;
  grouped.rowBytes = spark_grouped_row_bytes(cols, group, false);
  grouped.shape = {rows, grouped.rowBytes};
  std::vector<float> row(size_t(grouped.rowBytes));
  grouped.readElements(grouped.rowBytes, grouped.rowBytes, row.data());
  for (int64_t c = 0; c < cols / 2; ++c)
    EXPECT_EQ(row[size_t(c)], bytes[size_t(cols / 2 + c)]) << "byte " << c;
}

namespace {

// 6-bit groups: codes 0..63, f16 grid, half-step error inside the range and
// about four times (12 dB) less error than the 4-bit grid of the same group.
TEST(Int6Packer, GroupCodesAndError) {
  const std::vector<float> group = uniformGroup(11);
  const Int4Group g6 = searchInt6Group(group.data(), int64_t(group.size()));
  const Int4Group g4 = searchInt4Group(group.data(), int64_t(group.size()));
  EXPECT_GE(g6.zero, 0.0f);
  EXPECT_LE(g6.zero, 63.0f);
  EXPECT_EQ(g6.zero, halfToFloat(floatToHalf(g6.zero)));
  EXPECT_EQ(g6.scale, halfToFloat(floatToHalf(g6.scale)));
  double error6 = 0.0, error4 = 0.0;
  for (float v : group) {
    const float code = int4Code(v, 1.0f / g6.scale, g6.zero, 63.0f);
    ASSERT_GE(code, 0.0f);
    ASSERT_LE(code, 63.0f);
    const float back = (code - g6.zero) * g6.scale;
    if (v >= -g6.zero * g6.scale && v <= (63.0f - g6.zero) * g6.scale) {
      ASSERT_LE(std::fabs(back - v), 0.5f * g6.scale * (1.0f + 1e-5f));
    }
    error6 += (back - v) * (back - v);
    const float back4 = (float(quantizeInt4(v, g4)) - g4.zero) * g4.scale;
    error4 += (back4 - v) * (back4 - v);
  }
  EXPECT_GT(10.0 * std::log10(error4 / error6), 10.0);
  for (int code = 0; code <= 63; ++code)
    EXPECT_EQ(int4Code((float(code) - g6.zero) * g6.scale, 1.0f / g6.scale,
                       g6.zero, 63.0f),
              float(code));
}

} // namespace

// A 6-bit tensor's bytes: each row's low nibbles, two a byte, then the top
// two bits of four codes a byte (lowest bits first); from codes GPTQ or the
// checkpoint chose, or from the values and the grid.
TEST(PackTensorElements, SixBitCodes) {
  // One whole block of 128 codes and a short one of 64.
  const int64_t rows = 2, cols = 192, group = 32, stride = cols / 2 + cols / 4;
  PackTensor t;
  t.dtype = DType::U8;
  t.shape = {rows, stride};
  t.codeCols = cols;
  t.codeBits = 6;
  t.group = group;
  std::vector<uint8_t> expected;
  for (int64_t i = 0; i < rows * cols; ++i)
    expected.push_back(uint8_t((i * 37 + 5) % 64));
  // Values on the grid (scale 0.5, zero point 20) that round to the codes.
  for (uint8_t c : expected)
    t.values.push_back((float(c) - 20.0f) * 0.5f);
  t.groupScales.assign(size_t(rows * cols / group), 0.5f);
  t.groupZeros.assign(size_t(rows * cols / group), 20.0f);
  auto check = [&](const PackTensor &tensor, const char *origin) {
    std::vector<float> bytes(size_t(rows * stride));
    // Read in two pieces that split a row, as the pack writer may.
    tensor.readElements(0, 121, bytes.data());
    tensor.readElements(121, rows * stride - 121, bytes.data() + 121);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t *c = &expected[size_t(r * cols)];
      for (int64_t b = 0; b < cols / 2; ++b)
        EXPECT_EQ(bytes[size_t(r * stride + b)],
                  float((c[2 * b] & 15) | (c[2 * b + 1] & 15) << 4))
            << origin << " row " << r << " nibble byte " << b;
      // Top bits: block 0 (codes 0-127) in bytes 0-31, byte i holding
      // codes 2i, 2i+1, 64+2i, 65+2i; block 1 (codes 128-191) in bytes
      // 32-47, byte 32+i holding codes 128+2i, 129+2i, 160+2i, 161+2i.
      for (int64_t b = 0; b < cols / 4; ++b) {
        const int64_t base = b < 32 ? 2 * b : 128 + 2 * (b - 32);
        const int64_t half = b < 32 ? 64 : 32;
        const int64_t four[] = {base, base + 1, base + half, base + half + 1};
        int high = 0;
        for (int i = 0; i < 4; ++i)
          high |= (c[four[i]] >> 4) << (2 * i);
        EXPECT_EQ(bytes[size_t(r * stride + cols / 2 + b)], float(high))
            << origin << " row " << r << " top-bits byte " << b;
      }
    }
  };
  check(t, "values");
  PackTensor chosen = t;
  chosen.codes = expected;
  for (float &v : chosen.values)
    v = 1000.0f; // would round to 63 everywhere
  check(chosen, "codes");
}
