//===- Quantize.cpp - weight quantization: int8 rows, 4-bit group search --===//
#include "spark/Codegen/Quantize.h"
#include "spark/Import/FloatFormats.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>

#if defined(__SSE__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define SPARK_SEARCH_AVX2 1
#else
#define SPARK_SEARCH_AVX2 0
#endif

namespace spark {

float symmetricInt8Scale(llvm::function_ref<float(int64_t)> value, int64_t n) {
  float largest = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    largest = std::max(largest, std::fabs(value(i)));
  return largest > 0.0f ? largest / 127.0f : 1.0f;
}

bool &int4SearchUsesAvx2() {
#if SPARK_SEARCH_AVX2
  static bool on = __builtin_cpu_supports("avx2");
#else
  static bool on = false;
#endif
  return on;
}

int quantizeInt4(float value, const Int4Group &g) {
  return int(int4Code(value, 1.0f / g.scale, g.zero));
}

namespace {

/// Weighted squared-error search over 4-bit grids for one group. Each
/// candidate grid assigns codes; a least-squares refit of the scale (and,
/// asymmetric, the offset) to those codes under the weights follows, the
/// fit is rounded to f16 (what the pack stores), the codes are re-chosen
/// against the rounded grid, and the grid with the least weighted error
/// wins.
/// Four floats (GCC / Clang vector extension): the searches run on every
/// weight of a 4-bit model about 40 times.
typedef float Float4 __attribute__((vector_size(16)));

inline Float4 splat(float v) { return Float4{v, v, v, v}; }

inline Float4 load4(const float *p) {
  Float4 v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}

inline double sum4(Float4 v) {
  return (double(v[0]) + double(v[1])) + (double(v[2]) + double(v[3]));
}

/// max(v, bound) and min(v, bound) as int4Code's std::max / std::min take
/// them (v is finite, never -0 where bound is 0): one instruction each on
/// x86 (the select form compiles to four).
inline Float4 atLeast(Float4 v, float bound) {
#if defined(__SSE__)
  return Float4(_mm_max_ps(__m128(v), _mm_set1_ps(bound)));
#else
  return v < splat(bound) ? splat(bound) : v;
#endif
}

inline Float4 atMost(Float4 v, float bound) {
#if defined(__SSE__)
  return Float4(_mm_min_ps(__m128(v), _mm_set1_ps(bound)));
#else
  return v > splat(bound) ? splat(bound) : v;
#endif
}

/// int4Code on four values (the same operations, so the same codes).
inline Float4 int4Codes(Float4 value, Float4 inverse, Float4 zero, float top) {
  Float4 x = atMost(atLeast(value * inverse + zero, -1.0f), top + 1.0f);
  const Float4 magic = splat(12582912.0f);
  Float4 code = (x + magic) - magic;
  return atMost(atLeast(code, 0.0f), top);
}

/// The weighted squared error of the grid (1 / scale `inverse`, zero point
/// `zero`) over n values (n a multiple of 4): two chains of four lanes, for
/// the values at 8k..8k+3 and 8k+4..8k+7.
/// `i`, e0 and e1: where the AVX2 loop left off.
double gridErrorSse(const float *x, const float *w, size_t n, float inverse,
                    float zero, float scale, float top, size_t i = 0,
                    Float4 e0 = Float4{}, Float4 e1 = Float4{}) {
  const Float4 inv = splat(inverse), z = splat(zero), s = splat(scale);
  for (; i + 8 <= n; i += 8) {
    Float4 x0 = load4(&x[i]), x1 = load4(&x[i + 4]);
    Float4 d0 = (int4Codes(x0, inv, z, top) - z) * s - x0;
    Float4 d1 = (int4Codes(x1, inv, z, top) - z) * s - x1;
    e0 += load4(&w[i]) * d0 * d0;
    e1 += load4(&w[i + 4]) * d1 * d1;
  }
  for (; i < n; i += 4) {
    Float4 x0 = load4(&x[i]);
    Float4 d0 = (int4Codes(x0, inv, z, top) - z) * s - x0;
    e0 += load4(&w[i]) * d0 * d0;
  }
  return sum4(e0) + sum4(e1);
}

/// Sums of w * l, w * l^2 and w * x * l over the codes l (less `shift`) of
/// a grid: one chain of four lanes each, in the order of the values.
struct GridSums {
  double sl, sll, sxl;
};

/// `i` and the three sums: where the AVX2 loop left off.
GridSums gridSumsSse(const float *x, const float *w, size_t n, float inverse,
                     float zero, float shift, float top, size_t i = 0,
                     Float4 sl4 = Float4{}, Float4 sll4 = Float4{},
                     Float4 sxl4 = Float4{}) {
  const Float4 inv = splat(inverse), z = splat(zero), sh = splat(shift);
  for (; i < n; i += 4) {
    Float4 xv = load4(&x[i]), wv = load4(&w[i]);
    Float4 l = int4Codes(xv, inv, z, top) - sh;
    Float4 wl = wv * l;
    sl4 += wl;
    sll4 += wl * l;
    sxl4 += wl * xv;
  }
  return {sum4(sl4), sum4(sll4), sum4(sxl4)};
}

#if SPARK_SEARCH_AVX2
// The same operations on eight lanes (AVX2 without FMA, so that nothing is
// contracted): the same codes and, added in the same order, the same sums,
// bit for bit. The searches are most of a 4-bit build's compile time.
__attribute__((target("avx2"))) inline __m256
int4Codes8(__m256 v, __m256 inverse, __m256 zero, float top) {
  __m256 x = _mm256_add_ps(_mm256_mul_ps(v, inverse), zero);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-1.0f)),
                    _mm256_set1_ps(top + 1.0f));
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  __m256 code = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
  return _mm256_min_ps(_mm256_max_ps(code, _mm256_setzero_ps()),
                       _mm256_set1_ps(top));
}

__attribute__((target("avx2"))) double gridErrorAvx2(const float *x,
                                                     const float *w, size_t n,
                                                     float inverse, float zero,
                                                     float scale, float top) {
  const __m256 inv = _mm256_set1_ps(inverse), z = _mm256_set1_ps(zero),
               s = _mm256_set1_ps(scale);
  __m256 e = _mm256_setzero_ps(); // lanes 0-3: e0, 4-7: e1 of gridErrorSse
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv = _mm256_loadu_ps(&x[i]);
    __m256 d = _mm256_sub_ps(
        _mm256_mul_ps(_mm256_sub_ps(int4Codes8(xv, inv, z, top), z), s), xv);
    e = _mm256_add_ps(
        e, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(&w[i]), d), d));
  }
  return gridErrorSse(x, w, n, inverse, zero, scale, top, i,
                      Float4(_mm256_castps256_ps128(e)),
                      Float4(_mm256_extractf128_ps(e, 1)));
}

__attribute__((target("avx2"))) GridSums gridSumsAvx2(const float *x,
                                                      const float *w, size_t n,
                                                      float inverse, float zero,
                                                      float shift, float top) {
  const __m256 inv = _mm256_set1_ps(inverse), z = _mm256_set1_ps(zero),
               sh = _mm256_set1_ps(shift);
  __m128 sl4 = _mm_setzero_ps(), sll4 = _mm_setzero_ps(),
         sxl4 = _mm_setzero_ps();
  // Each sum adds the low four lanes, then the high four: the order of
  // gridSumsSse's one chain.
  auto add = [](__m128 sum, __m256 v) __attribute__((target("avx2"))) {
    sum = _mm_add_ps(sum, _mm256_castps256_ps128(v));
    return _mm_add_ps(sum, _mm256_extractf128_ps(v, 1));
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv = _mm256_loadu_ps(&x[i]), wv = _mm256_loadu_ps(&w[i]);
    __m256 l = _mm256_sub_ps(int4Codes8(xv, inv, z, top), sh);
    __m256 wl = _mm256_mul_ps(wv, l);
    sl4 = add(sl4, wl);
    sll4 = add(sll4, _mm256_mul_ps(wl, l));
    sxl4 = add(sxl4, _mm256_mul_ps(wl, xv));
  }
  return gridSumsSse(x, w, n, inverse, zero, shift, top, i, Float4(sl4),
                     Float4(sll4), Float4(sxl4));
}
#endif

double gridError(const float *x, const float *w, size_t n, float inverse,
                 float zero, float scale, float top) {
#if SPARK_SEARCH_AVX2
  if (int4SearchUsesAvx2())
    return gridErrorAvx2(x, w, n, inverse, zero, scale, top);
#endif
  return gridErrorSse(x, w, n, inverse, zero, scale, top);
}

GridSums gridSums(const float *x, const float *w, size_t n, float inverse,
                  float zero, float shift, float top) {
#if SPARK_SEARCH_AVX2
  if (int4SearchUsesAvx2())
    return gridSumsAvx2(x, w, n, inverse, zero, shift, top);
#endif
  return gridSumsSse(x, w, n, inverse, zero, shift, top);
}

struct GroupSearch {
  llvm::SmallVector<float, 256> x, w;
  bool symmetric = false;
  float top = 15.0f;     // the largest code: 15, or 63 for 6-bit groups
  double sw = 0, sx = 0; // sums of w and of w * x
  Int4Group best;
  double bestError = -1.0;

  static float toHalf(float v) { return halfToFloat(floatToHalf(v)); }

  void load(const float *values, int64_t n, const float *importance) {
    x.assign(values, values + n);
    if (importance)
      w.assign(importance, importance + n);
    else
      w.assign(size_t(n), 1.0f);
  }

  void prepare() {
    // Pad to whole vectors with zero weights (their error counts nothing).
    while (x.size() % 4) {
      x.push_back(0.0f);
      w.push_back(0.0f);
    }
    sw = sx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      sw += w[i];
      sx += double(w[i]) * x[i];
    }
  }

  /// The weighted error of grid g after rounding it to f16; keeps the best.
  void consider(Int4Group g) {
    if (!(g.scale > 0.0f) || !std::isfinite(g.scale) || !std::isfinite(g.zero))
      return;
    g.scale = toHalf(g.scale);
    g.zero = symmetric ? 8.0f : toHalf(g.zero);
    if (!(g.scale > 0.0f) || !std::isfinite(g.scale))
      return;
    double error = gridError(x.data(), w.data(), x.size(), 1.0f / g.scale,
                             g.zero, g.scale, top);
    if (bestError < 0.0 || error < bestError) {
      bestError = error;
      best = g;
    }
  }

  /// Codes of the grid g, then the weighted least-squares grid for them.
  void refit(Int4Group g) {
    if (!(g.scale > 0.0f))
      return;
    const GridSums sums = gridSums(x.data(), w.data(), x.size(), 1.0f / g.scale,
                                   g.zero, symmetric ? 8.0f : 0.0f, top);
    const double sl = sums.sl, sll = sums.sll, sxl = sums.sxl;
    if (symmetric) { // x ~ s * l
      if (sll > 0)
        consider({float(sxl / sll), 8.0f});
      return;
    }
    // x ~ s * l + m, zero = -m / s.
    double d = sw * sll - sl * sl;
    if (d <= 0)
      return;
    double scale = (sw * sxl - sx * sl) / d, offset = (sll * sx - sl * sxl) / d;
    if (scale > 0)
      consider({float(scale), float(-offset / scale)});
  }
};

/// min(0, values), max(0, values) and max |values|, as std::min and std::max
/// choose them.
struct ValueRange {
  float bottom = 0.0f, top = 0.0f, largest = 0.0f;
};

// Not inlined: inside the searches GCC keeps these three on the stack, and
// the chain of stores and loads cost more than the rest of the search.
__attribute__((noinline)) ValueRange valueRange(const float *values,
                                                int64_t n) {
  float bottom = 0.0f, top = 0.0f, largest = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = values[i], magnitude = std::fabs(v);
    bottom = v < bottom ? v : bottom;
    top = top < v ? v : top;
    largest = largest < magnitude ? magnitude : largest;
  }
  return {bottom, top, largest};
}

/// The asymmetric search with codes 0..top.
Int4Group searchAsymmetric(const float *values, int64_t n,
                           const float *importance, float top) {
  GroupSearch search;
  search.top = top;
  search.load(values, n, importance);
  const ValueRange range = valueRange(values, n);
  const float lo = range.bottom, hi = range.top;
  search.prepare();
  if (hi <= lo) { // all zeros
    search.consider({1.0f, 0.0f});
    return search.best;
  }
  // Shrunk [min, max] ranges with integer zero points, then grids of top - 1
  // to top + 1 steps over [min, max], each refitted.
  for (float shrink : {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f}) {
    Int4Group g;
    float a = lo * shrink, b = hi * shrink;
    g.scale = (b - a) / top;
    g.zero = std::min(top, std::max(0.0f, std::nearbyint(-a / g.scale)));
    search.consider(g);
    search.refit(g);
  }
  for (int step = 0; step <= 10; ++step) {
    Int4Group g;
    g.scale = (hi - lo) / (top - 1.0f + 0.2f * float(step));
    g.zero = -lo / g.scale;
    search.refit(g);
  }
  return search.best;
}

} // namespace

Int4Group searchInt4Group(const float *values, int64_t n,
                          const float *importance) {
  return searchAsymmetric(values, n, importance, 15.0f);
}

Int4Group searchInt6Group(const float *values, int64_t n,
                          const float *importance) {
  return searchAsymmetric(values, n, importance, 63.0f);
}

Int4Group searchSymmetricInt4Group(const float *values, int64_t n,
                                   const float *importance) {
  GroupSearch search;
  search.symmetric = true;
  search.load(values, n, importance);
  const ValueRange range = valueRange(values, n);
  const float largest = range.largest, top = range.top, bottom = range.bottom;
  search.prepare();
  if (largest == 0.0f) {
    search.consider({1.0f, 8.0f});
    return search.best;
  }
  // max |x| on 7 steps (shrunk), the positive side on 7 or the negative
  // side on 8 steps, each refitted.
  for (float shrink : {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f}) {
    Int4Group g{largest * shrink / 7.0f, 8.0f};
    search.consider(g);
    search.refit(g);
  }
  for (int step = 0; step <= 6; ++step) {
    float f = 1.0f - 0.05f * float(step);
    if (top > 0.0f)
      search.refit({top * f / 7.0f, 8.0f});
    if (bottom < 0.0f)
      search.refit({-bottom * f / 8.0f, 8.0f});
  }
  return search.best;
}

/// The searches over values given one at a time.
Int4Group searchInt4Group(llvm::function_ref<float(int64_t)> value, int64_t n,
                          const float *importance) {
  llvm::SmallVector<float, 256> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[i] = value(i);
  return searchInt4Group(values.data(), n, importance);
}

Int4Group searchSymmetricInt4Group(llvm::function_ref<float(int64_t)> value,
                                   int64_t n, const float *importance) {
  llvm::SmallVector<float, 256> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[i] = value(i);
  return searchSymmetricInt4Group(values.data(), n, importance);
}

bool choleskyInPlace(double *a, int64_t n) {
  // Right-looking and blocked: a block of columns is factored, then the
  // rows below it are updated with it in one pass over the trailing
  // triangle (chunks of columns in parallel, the block's panel held
  // transposed so that the innermost loop runs along a row).
  constexpr int64_t kBlock = 96, kChunk = 256;
  auto solveRow = [&](int64_t i, int64_t first, int64_t last) {
    double *ri = a + i * n;
    for (int64_t j = first; j < std::min(last, i); ++j) {
      const double *rj = a + j * n;
      double v = ri[j];
      for (int64_t k = first; k < j; ++k)
        v -= ri[k] * rj[k];
      ri[j] = v / rj[j];
    }
  };
  std::vector<double> panel;
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t last = std::min(first + kBlock, n), width = last - first;
    for (int64_t j = first; j < last; ++j) {
      solveRow(j, first, j);
      double *rj = a + j * n;
      double d = rj[j];
      for (int64_t k = first; k < j; ++k)
        d -= rj[k] * rj[k];
      if (!(d > 0.0))
        return false;
      rj[j] = std::sqrt(d);
    }
    if (last == n)
      break;
    llvm::parallelFor(size_t(last), size_t(n),
                      [&](size_t i) { solveRow(int64_t(i), first, last); });
    panel.assign(size_t(width * n), 0.0);
    for (int64_t k = last; k < n; ++k)
      for (int64_t j = 0; j < width; ++j)
        panel[size_t(j * n + k)] = a[k * n + first + j];
    const int64_t chunks = (n - last + kChunk - 1) / kChunk;
    llvm::parallelFor(0, size_t(chunks), [&](size_t c) {
      const int64_t begin = last + int64_t(c) * kChunk,
                    end = std::min(begin + kChunk, n);
      for (int64_t i = begin; i < n; ++i) {
        double *ri = a + i * n;
        const int64_t stop = std::min(end, i + 1);
        for (int64_t j = 0; j < width; ++j) {
          const double coefficient = ri[first + j];
          const double *pj = &panel[size_t(j * n)];
          for (int64_t k = begin; k < stop; ++k)
            ri[k] -= coefficient * pj[k];
        }
      }
    });
  }
  return true;
}

bool gptqInt4(const float *w, int64_t rows, int64_t cols, int64_t group,
              bool symmetric, const float *moment, Int4Group *grids,
              uint8_t *codes, double damp, int bits) {
  const float top = bits == 6 ? 63.0f : 15.0f;
  // The damped moment, its columns in reverse order; a column no input
  // reached gets a diagonal of 1 and its weights are taken as 0 (no input
  // ever multiplies them).
  std::vector<double> h(size_t(cols * cols));
  std::vector<bool> dead(size_t(cols), false);
  double meanDiagonal = 0.0;
  for (int64_t i = 0; i < cols; ++i) {
    const float d = moment[i * cols + i];
    dead[size_t(i)] = !(d > 0.0f);
    meanDiagonal += (dead[size_t(i)] ? 1.0 : double(d)) / double(cols);
  }
  for (int64_t i = 0; i < cols; ++i) // the lower triangle of the reversal
    for (int64_t j = i; j < cols; ++j)
      h[size_t((cols - 1 - i) * cols + cols - 1 - j)] =
          i == j ? (dead[size_t(i)] ? 1.0 : double(moment[i * cols + i])) +
                       damp * meanDiagonal
                 : double(moment[std::min(i, j) * cols + std::max(i, j)]);
  if (!choleskyInPlace(h.data(), cols))
    return false;
  // The reversed factor is upper triangular: moment = R R^T, R[i][j] =
  // L[cols-1-i][cols-1-j], so that (w - q)^T H (w - q) = |R^T (w - q)|^2
  // and component j of R^T (w - q) involves columns 0..j only.
  std::vector<float> r(size_t(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = i; j < cols; ++j)
      r[size_t(i * cols + j)] =
          float(h[size_t((cols - 1 - i) * cols + cols - 1 - j)]);
  h.clear();
  h.shrink_to_fit();
  const int64_t groups = cols / group;
  // GPTQ as the sequence of least-squares choices it is: once columns
  // 0..j-1 are rounded (deviations d = w - q), the continuous best for the
  // columns after them makes components j.. of R^T d zero, that is column
  // j's value w[j] + acc[j] / R[j][j] with acc[j] = sum over k < j of
  // R[k][j] d[k]; that value is rounded. Tiles of rows share each row of R.
  constexpr int64_t kTile = 8;
  llvm::parallelFor(0, size_t((rows + kTile - 1) / kTile), [&](size_t t) {
    const int64_t first = int64_t(t) * kTile,
                  count = std::min(kTile, rows - first);
    std::vector<float> tile(w + first * cols, w + (first + count) * cols);
    std::vector<float> acc(size_t(count * cols), 0.0f);
    std::vector<float> values(static_cast<size_t>(group));
    std::vector<float> groupAcc(static_cast<size_t>(group));
    for (int64_t r0 = 0; r0 < count; ++r0)
      for (int64_t c = 0; c < cols; ++c)
        if (dead[size_t(c)])
          tile[size_t(r0 * cols + c)] = 0.0f;
    Int4Group current[kTile];
    for (int64_t j = 0; j < cols; ++j) {
      if (j % group == 0)
        for (int64_t r0 = 0; r0 < count; ++r0) {
          // The group's values as the columns before it leave them.
          const float *row = &tile[size_t(r0 * cols + j)];
          std::copy_n(&acc[size_t(r0 * cols + j)], group, groupAcc.begin());
          for (int64_t m = 0; m < group; ++m) {
            const float *rm = &r[size_t((j + m) * cols + j)];
            values[size_t(m)] = row[m] + groupAcc[size_t(m)] / rm[m];
            const float deviation = row[m] - values[size_t(m)];
            for (int64_t k = m + 1; k < group; ++k)
              groupAcc[size_t(k)] += deviation * rm[k];
          }
          Int4Group g =
              symmetric ? searchSymmetricInt4Group(values.data(), group)
                        : searchAsymmetric(values.data(), group, nullptr, top);
          g.scale = halfToFloat(floatToHalf(g.scale)); // as stored
          current[r0] = g;
          grids[(first + r0) * groups + j / group] = g;
        }
      const float *rj = &r[size_t(j * cols)];
      for (int64_t r0 = 0; r0 < count; ++r0) {
        const float value = tile[size_t(r0 * cols + j)];
        float *rowAcc = &acc[size_t(r0 * cols)];
        const Int4Group &g = current[r0];
        const float code =
            int4Code(value + rowAcc[j] / rj[j], 1.0f / g.scale, g.zero, top);
        codes[(first + r0) * cols + j] = uint8_t(code);
        const float deviation = value - (code - g.zero) * g.scale;
        for (int64_t k = j + 1; k < cols; ++k)
          rowAcc[k] += deviation * rj[k];
      }
    }
  });
  return true;
}

} // namespace spark
