//===- ModelPlan.cpp - lower the step function to kernel calls ------------===//
#include "spark/Codegen/ModelPlan.h"
#include "spark/Codegen/PackReader.h"

#include "spark/Dialect/SparkOps.h"
#include "spark/Import/FloatFormats.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Parallel.h"

#include <array>
#include <cmath>
#include <map>

#if defined(__SSE__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#define SPARK_SEARCH_AVX2 1
#else
#define SPARK_SEARCH_AVX2 0
#endif

using namespace mlir;

namespace spark {

uint64_t fnv1a(llvm::StringRef text, uint64_t seed) {
  uint64_t h = seed;
  for (char c : text)
    h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

float symmetricInt8Scale(llvm::function_ref<float(int64_t)> value, int64_t n) {
  float largest = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    largest = std::max(largest, std::fabs(value(i)));
  return largest > 0.0f ? largest / 127.0f : 1.0f;
}

int64_t PackTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The 4-bit code of `value` in a group with 1 / scale `inverse`.
static inline float int4Code(float value, float inverse, float zero) {
  // Codes outside [0, 15] are clamped, so x is first brought into [-1, 16];
  // there, adding and subtracting 1.5 * 2^23 rounds to the nearest integer,
  // ties to even, as std::nearbyint does in the default rounding mode,
  // without its libm call (the group searches round every weight six times).
  float x = std::min(16.0f, std::max(-1.0f, value * inverse + zero));
  const float magic = 12582912.0f;
  float code = (x + magic) - magic;
  return code < 0.0f ? 0.0f : code > 15.0f ? 15.0f : code;
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
inline Float4 int4Codes(Float4 value, Float4 inverse, Float4 zero) {
  Float4 x = atMost(atLeast(value * inverse + zero, -1.0f), 16.0f);
  const Float4 magic = splat(12582912.0f);
  Float4 code = (x + magic) - magic;
  return atMost(atLeast(code, 0.0f), 15.0f);
}

/// The weighted squared error of the grid (1 / scale `inverse`, zero point
/// `zero`) over n values (n a multiple of 4): two chains of four lanes, for
/// the values at 8k..8k+3 and 8k+4..8k+7.
/// `i`, e0 and e1: where the AVX2 loop left off.
double gridErrorSse(const float *x, const float *w, size_t n, float inverse,
                    float zero, float scale, size_t i = 0, Float4 e0 = Float4{},
                    Float4 e1 = Float4{}) {
  const Float4 inv = splat(inverse), z = splat(zero), s = splat(scale);
  for (; i + 8 <= n; i += 8) {
    Float4 x0 = load4(&x[i]), x1 = load4(&x[i + 4]);
    Float4 d0 = (int4Codes(x0, inv, z) - z) * s - x0;
    Float4 d1 = (int4Codes(x1, inv, z) - z) * s - x1;
    e0 += load4(&w[i]) * d0 * d0;
    e1 += load4(&w[i + 4]) * d1 * d1;
  }
  for (; i < n; i += 4) {
    Float4 x0 = load4(&x[i]);
    Float4 d0 = (int4Codes(x0, inv, z) - z) * s - x0;
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
                     float zero, float shift, size_t i = 0,
                     Float4 sl4 = Float4{}, Float4 sll4 = Float4{},
                     Float4 sxl4 = Float4{}) {
  const Float4 inv = splat(inverse), z = splat(zero), sh = splat(shift);
  for (; i < n; i += 4) {
    Float4 xv = load4(&x[i]), wv = load4(&w[i]);
    Float4 l = int4Codes(xv, inv, z) - sh;
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
int4Codes8(__m256 v, __m256 inverse, __m256 zero) {
  __m256 x = _mm256_add_ps(_mm256_mul_ps(v, inverse), zero);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-1.0f)),
                    _mm256_set1_ps(16.0f));
  const __m256 magic = _mm256_set1_ps(12582912.0f);
  __m256 code = _mm256_sub_ps(_mm256_add_ps(x, magic), magic);
  return _mm256_min_ps(_mm256_max_ps(code, _mm256_setzero_ps()),
                       _mm256_set1_ps(15.0f));
}

__attribute__((target("avx2"))) double gridErrorAvx2(const float *x,
                                                     const float *w, size_t n,
                                                     float inverse, float zero,
                                                     float scale) {
  const __m256 inv = _mm256_set1_ps(inverse), z = _mm256_set1_ps(zero),
               s = _mm256_set1_ps(scale);
  __m256 e = _mm256_setzero_ps(); // lanes 0-3: e0, 4-7: e1 of gridErrorSse
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 xv = _mm256_loadu_ps(&x[i]);
    __m256 d = _mm256_sub_ps(
        _mm256_mul_ps(_mm256_sub_ps(int4Codes8(xv, inv, z), z), s), xv);
    e = _mm256_add_ps(
        e, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(&w[i]), d), d));
  }
  return gridErrorSse(x, w, n, inverse, zero, scale, i,
                      Float4(_mm256_castps256_ps128(e)),
                      Float4(_mm256_extractf128_ps(e, 1)));
}

__attribute__((target("avx2"))) GridSums gridSumsAvx2(const float *x,
                                                      const float *w, size_t n,
                                                      float inverse, float zero,
                                                      float shift) {
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
    __m256 l = _mm256_sub_ps(int4Codes8(xv, inv, z), sh);
    __m256 wl = _mm256_mul_ps(wv, l);
    sl4 = add(sl4, wl);
    sll4 = add(sll4, _mm256_mul_ps(wl, l));
    sxl4 = add(sxl4, _mm256_mul_ps(wl, xv));
  }
  return gridSumsSse(x, w, n, inverse, zero, shift, i, Float4(sl4),
                     Float4(sll4), Float4(sxl4));
}
#endif

double gridError(const float *x, const float *w, size_t n, float inverse,
                 float zero, float scale) {
#if SPARK_SEARCH_AVX2
  if (int4SearchUsesAvx2())
    return gridErrorAvx2(x, w, n, inverse, zero, scale);
#endif
  return gridErrorSse(x, w, n, inverse, zero, scale);
}

GridSums gridSums(const float *x, const float *w, size_t n, float inverse,
                  float zero, float shift) {
#if SPARK_SEARCH_AVX2
  if (int4SearchUsesAvx2())
    return gridSumsAvx2(x, w, n, inverse, zero, shift);
#endif
  return gridSumsSse(x, w, n, inverse, zero, shift);
}

struct GroupSearch {
  llvm::SmallVector<float, 256> x, w;
  bool symmetric = false;
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
                             g.zero, g.scale);
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
                                   g.zero, symmetric ? 8.0f : 0.0f);
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

} // namespace

Int4Group searchInt4Group(const float *values, int64_t n,
                          const float *importance) {
  GroupSearch search;
  search.load(values, n, importance);
  const ValueRange range = valueRange(values, n);
  const float lo = range.bottom, hi = range.top;
  search.prepare();
  if (hi <= lo) { // all zeros
    search.consider({1.0f, 0.0f});
    return search.best;
  }
  // Shrunk [min, max] ranges with integer zero points, then grids of 14 to
  // 16 steps over [min, max], each refitted.
  for (float shrink : {1.0f, 0.95f, 0.9f, 0.85f, 0.8f, 0.75f}) {
    Int4Group g;
    float a = lo * shrink, b = hi * shrink;
    g.scale = (b - a) / 15.0f;
    g.zero = std::min(15.0f, std::max(0.0f, std::nearbyint(-a / g.scale)));
    search.consider(g);
    search.refit(g);
  }
  for (int step = 0; step <= 10; ++step) {
    Int4Group g;
    g.scale = (hi - lo) / (14.0f + 0.2f * float(step));
    g.zero = -lo / g.scale;
    search.refit(g);
  }
  return search.best;
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

void PackTensor::releaseValues(int64_t first, int64_t count) const {
  if (source)
    releaseResidentPages(*source, first, count);
  int64_t partStart = 0;
  for (const TensorView *part : parts) {
    int64_t from = std::max(first, partStart),
            to = std::min(first + count, partStart + part->numElements());
    if (to > from)
      releaseResidentPages(*part, from - partStart, to - from);
    partStart += part->numElements();
  }
}

void PackTensor::readValues(int64_t first, int64_t count, float *out) const {
  if (source)
    return source->elements(first, count, out);
  int64_t partStart = 0;
  for (const TensorView *part : parts) {
    int64_t from = std::max(first, partStart),
            to = std::min(first + count, partStart + part->numElements());
    if (to > from)
      part->elements(from - partStart, to - from, out + (from - first));
    partStart += part->numElements();
  }
  if (parts.empty())
    std::copy(values.begin() + first, values.begin() + first + count, out);
}

void PackTensor::readElements(int64_t first, int64_t count, float *out) const {
  if (group == 0) {
    readValues(first, count, out);
    if (!rowScales.empty()) // codes: each value over its row's scale
      for (int64_t i = 0; i < count; ++i)
        out[i] /= rowScales[(first + i) / shape.back()];
    return;
  }
  // Bytes of two 4-bit codes: the values of the 2 * count codes, then each
  // group's 1 / scale once, as quantizeInt4 computes it.
  std::vector<float> codes(2 * count);
  readValues(2 * first, 2 * count, codes.data());
  const int64_t groups = codeCols / group;
  int64_t groupIndex = -1;
  float inverse = 0.0f, zero = 0.0f;
  for (int64_t i = 0; i < 2 * count; ++i) {
    const int64_t at = 2 * first + i;
    const int64_t g = (at / codeCols) * groups + (at % codeCols) / group;
    if (g != groupIndex) {
      groupIndex = g;
      inverse = 1.0f / groupScales[g];
      zero = groupZeros[g];
    }
    codes[i] = int4Code(codes[i], inverse, zero);
  }
  for (int64_t i = 0; i < count; ++i)
    out[i] = codes[2 * i] + 16.0f * codes[2 * i + 1];
}

uint64_t PackTensor::bytes() const {
  return uint64_t(elements()) * dtypeSize(dtype);
}

namespace {

llvm::Error error(Operation *op, const llvm::Twine &message) {
  std::string location;
  llvm::raw_string_ostream os(location);
  op->getLoc().print(os);
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s: %s",
                                 os.str().c_str(), message.str().c_str());
}

/// The decoder layer an op was imported for ("model.layers.N"), or -1.
int layerOf(Location loc) {
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? -1 : layerOf(fused.getLocations()[0]);
  auto name = dyn_cast<NameLoc>(loc);
  if (!name)
    return -1;
  StringRef text = name.getName().getValue();
  int layer = -1;
  if (!text.consume_front("model.layers.") || text.getAsInteger(10, layer))
    return -1;
  return layer;
}

int64_t width(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape().back();
}

/// Where an SSA value of the step function lives.
struct Storage {
  enum class Kind { Arena, Cache, Tokens, Positions, Logits, Weight } kind;
  int64_t index = 0;  // arena value or cache
  int64_t column = 0; // split results: offset into the parent's rows
  int64_t rowStride = 0;
};

class Planner {
public:
  Planner(const Checkpoint &ckpt, const BuildOptions &options)
      : ckpt(ckpt), options(options) {
    plan.config = ckpt.config();
    plan.options = options;
  }

  llvm::Expected<ModelPlan> run(ModuleOp module);

private:
  llvm::Error lower(Operation *op);
  int kernel(const KernelSpec &spec);
  int weightTensor(Operation *op, FlatSymbolRefAttr symbol, DType dtype,
                   llvm::Error &err);
  int addTensor(PackTensor tensor, StringRef symbol);
  /// A tensor stored beside a quantized weight (its scales, zero points).
  struct SideTensor {
    PackTensor::Role role;
    DType dtype;
    std::vector<int64_t> shape;
  };
  /// The pack's name of a quantized tensor's scales or zero points.
  static std::string sideName(const std::string &tensor,
                              PackTensor::Role role) {
    return tensor + (role == PackTensor::Role::Scales ? ".scales" : ".zeros");
  }
  /// Where the scales or zero points of a quantized weight are recorded.
  llvm::StringMap<int> &sideIndex(PackTensor::Role role) {
    return role == PackTensor::Role::Scales ? scalesIndex : zerosIndex;
  }
  /// With BuildOptions::weightsFrom: takes the stored codes of `tensor` and
  /// its `sides` (scales first, then zero points) from that pack if it holds
  /// them all with these dtypes and shapes (adding the sides to the plan, as
  /// the quantization would); false, and nothing changed, if not.
  bool reuseQuantized(PackTensor &tensor, llvm::ArrayRef<int64_t> storedShape,
                      DType storedType, llvm::ArrayRef<SideTensor> sides,
                      StringRef symbol);
  std::array<int, 4> ropeTables(RopeTableOp table);
  int constantTensor(ConstantOp constant);
  int64_t newValue(Value v, int64_t features);
  View activation(Value v, std::vector<int64_t> innerExtents = {});
  View weightView(int tensor);
  llvm::Error cacheOf(Operation *op, Value cache, int &index);

  const Checkpoint &ckpt;
  const BuildOptions &options;
  ModelPlan plan;
  llvm::DenseMap<Value, Storage> storage;
  std::map<std::string, int> kernelIndex;
  llvm::StringMap<int> tensorIndex;
  llvm::StringMap<int> scalesIndex; // quantized weight -> its scales tensor
  llvm::StringMap<int> zerosIndex;  // 4-bit weight -> its zero points
  int currentStep() const { return int(plan.steps.size()); }
  std::map<int, int> layerOutputs; // decoder layer -> step of its output
};

int Planner::kernel(const KernelSpec &spec) {
  auto [it, inserted] = kernelIndex.try_emplace(spec.name(), 0);
  if (inserted) {
    it->second = int(plan.kernels.size());
    plan.kernels.push_back(spec);
  }
  return it->second;
}

int Planner::weightTensor(Operation *op, FlatSymbolRefAttr symbol, DType dtype,
                          llvm::Error &err) {
  auto it = tensorIndex.find(symbol.getValue());
  if (it != tensorIndex.end())
    return it->second;
  auto weight = SymbolTable::lookupNearestSymbolFrom<WeightOp>(op, symbol);
  auto checkpointTensor = [&](StringRef name) -> const TensorView * {
    for (const TensorView *t :
         {&ckpt.embedding(), &ckpt.finalNorm(), &ckpt.outputHead()})
      if (t->name == name)
        return t;
    for (const LayerTensors &layer : ckpt.layers())
      for (const TensorView *t :
           {layer.inputNorm, layer.qkv, layer.q, layer.k, layer.v,
            layer.attnGate, layer.out, layer.postNorm, layer.gateUp, layer.gate,
            layer.up, layer.down})
        if (t && t->name == name)
          return t;
    return nullptr;
  };
  PackTensor tensor;
  tensor.name = symbol.getValue().str();
  tensor.dtype = dtype;
  if (weight && weight.getPartsAttr()) {
    // A stacked weight (spark-fuse-projections): its parts, row after row.
    for (Attribute part : weight.getPartsAttr()) {
      StringRef name = cast<FlatSymbolRefAttr>(part).getValue();
      const TensorView *t = checkpointTensor(name);
      if (!t) {
        err = error(op, "weight part " + name +
                            " is not a tensor of the checkpoint");
        return -1;
      }
      tensor.parts.push_back(t);
    }
    auto shape = weight.getTensorType().getShape();
    tensor.shape.assign(shape.begin(), shape.end());
  } else {
    const TensorView *source = checkpointTensor(symbol.getValue());
    if (!weight || !source) {
      err = error(op, "weight " + symbol.getValue() +
                          " is not a tensor of the checkpoint");
      return -1;
    }
    tensor.shape = source->shape;
    tensor.source = source;
  }
  if (weight && weight.getQuantAttr() && weight.getQuantAttr().getBits() == 4) {
    // 4-bit codes in groups along the input dimension: asymmetric (w4a16)
    // or symmetric (w4a8, zero point 8).
    const int64_t rows = tensor.shape[0], cols = tensor.shape.back();
    const int64_t group = weight.getQuantAttr().getGroupSize();
    const int64_t groups = cols / group;
    const bool symmetric = weight.getQuantAttr().getSymmetric();
    tensor.dtype = DType::U8;
    tensor.codeCols = cols;
    tensor.group = group;
    tensor.symmetricGroups = symmetric;
    std::vector<SideTensor> sides = {
        {PackTensor::Role::Scales, DType::F16, {rows, groups}}};
    if (!symmetric) // zero points 8, not stored
      sides.push_back({PackTensor::Role::Zeros, DType::F16, {rows, groups}});
    if (reuseQuantized(tensor, {rows, cols / 2}, DType::U8, sides,
                       symbol.getValue()))
      return addTensor(std::move(tensor), symbol.getValue());
    tensor.groupScales.resize(rows * groups);
    tensor.groupZeros.resize(rows * groups);
    // Calibrated importance of each input channel (mean x^2), if any.
    const std::vector<float> *importance = nullptr;
    if (auto it = options.importance.find(symbol.getValue().str());
        it != options.importance.end() && int64_t(it->second.size()) == cols)
      importance = &it->second;
    // Blocks of 1024 rows, their rows searched in parallel; each block's
    // checkpoint pages are released after it (bounded RSS while streaming).
    for (int64_t block = 0; block < rows; block += 1024) {
      const int64_t end = std::min<int64_t>(rows, block + 1024);
      llvm::parallelFor(block, end, [&](size_t r) {
        std::vector<float> row(cols);
        tensor.readValues(int64_t(r) * cols, cols, row.data());
        for (int64_t g = 0; g < groups; ++g) {
          const float *values = row.data() + g * group;
          const float *weights =
              importance ? importance->data() + g * group : nullptr;
          Int4Group q = symmetric
                            ? searchSymmetricInt4Group(values, group, weights)
                            : searchInt4Group(values, group, weights);
          tensor.groupScales[r * groups + g] = q.scale;
          tensor.groupZeros[r * groups + g] = q.zero;
        }
      });
      tensor.releaseValues(block * cols, (end - block) * cols);
    }
    for (auto [role, values] :
         {std::pair{PackTensor::Role::Scales, &tensor.groupScales},
          {PackTensor::Role::Zeros, &tensor.groupZeros}}) {
      if (symmetric && values == &tensor.groupZeros)
        continue; // all 8
      // Half precision: 4 + 2 x 16 / 128 = 4.25 bits per weight. Zero points
      // (0..15) are exact; scales are rounded to f16 here so the codes
      // below are chosen against the scales the kernels will read.
      PackTensor side;
      side.role = role;
      side.name = sideName(tensor.name, role);
      side.dtype = DType::F16;
      side.shape = std::vector<int64_t>{rows, groups};
      for (float &v : *values)
        v = halfToFloat(floatToHalf(v));
      side.values = *values;
      sideIndex(role)[symbol.getValue()] = int(plan.tensors.size());
      plan.tensors.push_back(std::move(side));
    }
    tensor.shape = std::vector<int64_t>{rows, cols / 2}; // bytes
  } else if (weight && weight.getQuant()) {
    // w8a16: symmetric int8 per output row; scale = max |row| / 127.
    tensor.dtype = DType::I8;
    const int64_t rows = tensor.shape[0], cols = tensor.shape.back();
    if (reuseQuantized(tensor, {rows, cols}, DType::I8,
                       {{PackTensor::Role::Scales, DType::F32, {rows}}},
                       symbol.getValue()))
      return addTensor(std::move(tensor), symbol.getValue());
    tensor.rowScales.resize(rows);
    // The scan streams the checkpoint mapping: release what it read every
    // 1024 rows to keep RSS bounded.
    for (int64_t block = 0; block < rows; block += 1024) {
      const int64_t end = std::min<int64_t>(rows, block + 1024);
      llvm::parallelFor(block, end, [&](size_t r) {
        std::vector<float> row(cols);
        tensor.readValues(int64_t(r) * cols, cols, row.data());
        tensor.rowScales[r] =
            symmetricInt8Scale([&](int64_t c) { return row[c]; }, cols);
      });
      tensor.releaseValues(block * cols, (end - block) * cols);
    }
    PackTensor scales;
    scales.role = PackTensor::Role::Scales;
    scales.name = sideName(tensor.name, scales.role);
    scales.shape = {rows};
    scales.values = tensor.rowScales;
    scalesIndex[symbol.getValue()] = int(plan.tensors.size());
    plan.tensors.push_back(std::move(scales));
  }
  return addTensor(std::move(tensor), symbol.getValue());
}

int Planner::addTensor(PackTensor tensor, StringRef symbol) {
  int index = int(plan.tensors.size());
  plan.tensors.push_back(std::move(tensor));
  tensorIndex[symbol] = index;
  return index;
}

bool Planner::reuseQuantized(PackTensor &tensor,
                             llvm::ArrayRef<int64_t> storedShape,
                             DType storedType, llvm::ArrayRef<SideTensor> sides,
                             StringRef symbol) {
  if (!plan.weightsFrom)
    return false;
  std::optional<PackReader::Stored> codes =
      plan.weightsFrom->find(tensor.name, storedType, storedShape);
  if (!codes)
    return false;
  std::vector<PackReader::Stored> found;
  for (size_t i = 0; i < sides.size(); ++i) {
    std::optional<PackReader::Stored> side = plan.weightsFrom->find(
        sideName(tensor.name, sides[i].role), sides[i].dtype, sides[i].shape);
    if (!side)
      return false;
    found.push_back(*side);
  }
  for (size_t i = 0; i < sides.size(); ++i) {
    PackTensor side;
    side.role = sides[i].role;
    side.name = sideName(tensor.name, side.role);
    side.dtype = sides[i].dtype;
    side.shape = sides[i].shape;
    side.stored = found[i].bytes;
    side.storedChecksum = found[i].checksum;
    sideIndex(side.role)[symbol] = int(plan.tensors.size());
    plan.tensors.push_back(std::move(side));
  }
  tensor.shape.assign(storedShape.begin(), storedShape.end());
  tensor.stored = codes->bytes;
  tensor.storedChecksum = codes->checksum;
  return true;
}

std::array<int, 4> Planner::ropeTables(RopeTableOp table) {
  std::array<int, 4> indices;
  const double theta = table.getTheta().convertToDouble();
  const int64_t rotary = table.getRotaryDim(), half = rotary / 2,
                block = table.getBlock(),
                coarseRows = (table.getPositions() + block - 1) / block;
  // Angles in double precision: p * theta^(-2i/rd) reaches ~1e5 rad at long
  // contexts, where f32 arithmetic would lose the phase.
  const struct {
    const char *suffix;
    int64_t rows, step;
    bool cosine;
  } parts[] = {{"coarse_cos", coarseRows, block, true},
               {"coarse_sin", coarseRows, block, false},
               {"fine_cos", block, 1, true},
               {"fine_sin", block, 1, false}};
  for (int part = 0; part < 4; ++part) {
    std::string name = (table.getSymName() + "." + parts[part].suffix).str();
    auto it = tensorIndex.find(name);
    if (it != tensorIndex.end()) {
      indices[part] = it->second;
      continue;
    }
    PackTensor tensor;
    tensor.name = name;
    tensor.layout = 1; // SPARK_LAYOUT_TABLE
    tensor.shape = {parts[part].rows, half};
    for (int64_t r = 0; r < parts[part].rows; ++r)
      for (int64_t i = 0; i < half; ++i) {
        double angle = double(r * parts[part].step) *
                       std::pow(theta, -2.0 * double(i) / double(rotary));
        tensor.values.push_back(
            float(parts[part].cosine ? std::cos(angle) : std::sin(angle)));
      }
    indices[part] = int(plan.tensors.size());
    tensorIndex[name] = indices[part];
    plan.tensors.push_back(std::move(tensor));
  }
  return indices;
}

int Planner::constantTensor(ConstantOp constant) {
  PackTensor tensor;
  tensor.name = llvm::formatv("constant.{0}", plan.tensors.size()).str();
  auto type = cast<RankedTensorType>(constant.getResult().getType());
  tensor.shape.assign(type.getShape().begin(), type.getShape().end());
  for (APFloat v :
       cast<DenseElementsAttr>(constant.getValue()).getValues<APFloat>())
    tensor.values.push_back(v.convertToFloat());
  int index = int(plan.tensors.size());
  plan.tensors.push_back(std::move(tensor));
  return index;
}

int64_t Planner::newValue(Value v, int64_t features) {
  // spark-plan-memory placed every value (its offset is in bytes).
  ArenaValue value;
  auto offset =
      v.getDefiningOp()->getAttrOfType<IntegerAttr>("spark.arena_offset");
  value.offset = offset ? offset.getInt() / 4 : -1;
  int64_t id = int64_t(plan.arena.size());
  plan.arena.push_back(value);
  storage[v] = {Storage::Kind::Arena, id, 0, features};
  return id;
}

View Planner::activation(Value v, std::vector<int64_t> inner) {
  const Storage &s = storage.lookup(v);
  View view;
  view.base =
      s.kind == Storage::Kind::Logits ? View::Base::Logits : View::Base::Arena;
  view.index = s.index;
  view.column = s.column;
  if (inner.empty())
    inner = {width(v)};
  view.extents = inner;
  int64_t stride = 1;
  for (int64_t e : inner) {
    view.strides.push_back(stride);
    stride *= e;
  }
  view.hasRows = true;
  view.rowStride = s.rowStride;
  return view;
}

View Planner::weightView(int tensor) {
  const PackTensor &t = plan.tensors[tensor];
  View view;
  view.base = View::Base::Weight;
  view.index = tensor;
  view.type = t.dtype;
  // Pack tensors are row-major [rows][cols]: Halide dims are (cols, rows).
  std::vector<int64_t> dims(t.shape.rbegin(), t.shape.rend());
  view.extents = dims;
  int64_t stride = 1;
  for (int64_t e : dims) {
    view.strides.push_back(stride);
    stride *= e;
  }
  return view;
}

llvm::Error Planner::cacheOf(Operation *op, Value cache, int &index) {
  auto it = storage.find(cache);
  if (it == storage.end() || it->second.kind != Storage::Kind::Cache)
    return error(op, "cache operand must be a cache argument of the step "
                     "function or a spark.kv_write of one");
  index = int(it->second.index);
  return llvm::Error::success();
}

static Step::Arg viewArg(View v) {
  Step::Arg a;
  a.view = std::move(v);
  return a;
}

static Step::Arg scalarArg(Step::Arg::Kind kind, int64_t bound = 0,
                           float value = 0.0f) {
  Step::Arg a;
  a.kind = kind;
  a.bound = bound;
  a.value = value;
  return a;
}

llvm::Error Planner::lower(Operation *op) {
  const DType matrixType = options.dtype;
  llvm::Error err = llvm::Error::success();
  Step step;
  step.comment = op->getName().getStringRef().str();

  auto output = [&](Value result, std::vector<int64_t> inner = {}) {
    newValue(result, width(result));
    return viewArg(activation(result, std::move(inner)));
  };
  auto input = [&](Value v, std::vector<int64_t> inner = {}) {
    const Storage &s = storage.lookup(v);
    if (s.kind == Storage::Kind::Weight)
      return viewArg(weightView(int(s.index)));
    return viewArg(activation(v, std::move(inner)));
  };

  if (auto embed = dyn_cast<EmbedOp>(op)) {
    int table = weightTensor(op, embed.getTableAttr(), matrixType, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::Embed;
    spec.in = width(embed.getResult());
    spec.out = plan.tensors[table].shape[0];
    spec.weightType = plan.tensors[table].dtype;
    spec.group = plan.tensors[table].group;
    spec.symmetricGroups = plan.tensors[table].symmetricGroups;
    step.kernel = kernel(spec);
    View ids;
    ids.base = View::Base::Tokens;
    ids.isInt32 = true;
    ids.hasRows = true;
    ids.rowStride = 1;
    step.args = {viewArg(ids), viewArg(weightView(table))};
    if (spec.weightType == DType::I8 || spec.weightType == DType::U8)
      step.args.push_back(
          viewArg(weightView(scalesIndex.lookup(embed.getTable()))));
    if (spec.weightType == DType::U8 && !spec.symmetricGroups)
      step.args.push_back(
          viewArg(weightView(zerosIndex.lookup(embed.getTable()))));
    step.args.push_back(output(embed.getResult()));
  } else if (auto norm = dyn_cast<RMSNormOp>(op)) {
    if (norm.getOutputScale())
      return error(op, "rms_norm with a folded output quantization is not "
                       "supported by the host codegen yet");
    int w = weightTensor(op, norm.getWeightAttr(), DType::F32, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::RMSNorm;
    spec.in = width(norm.getInput());
    spec.epsilon = norm.getEpsilon().convertToDouble();
    step.kernel = kernel(spec);
    step.headRows = norm->hasOneUse() && isa<LogitsOp>(*norm->user_begin());
    step.args = {input(norm.getInput()), viewArg(weightView(w))};
    step.args.push_back(output(norm.getResult()));
  } else if (isa<LinearOp, LogitsOp>(op)) {
    Value in = op->getOperand(0), result = op->getResult(0);
    auto symbol = isa<LinearOp>(op) ? cast<LinearOp>(op).getWeightAttr()
                                    : cast<LogitsOp>(op).getHeadAttr();
    int w = weightTensor(op, symbol, matrixType, err);
    if (err)
      return err;
    KernelSpec spec;
    spec.kind = KernelKind::Linear;
    spec.in = width(in);
    spec.out = width(result);
    spec.weightType = plan.tensors[w].dtype;
    spec.group = plan.tensors[w].group;
    spec.symmetricGroups = plan.tensors[w].symmetricGroups;
    if (auto inputQuant = op->getAttrOfType<QuantAttr>("input_quant")) {
      spec.inputBits = inputQuant.getBits();
      spec.inputBlock = inputQuant.getGroupSize();
    }
    if (auto inputType = op->getAttrOfType<TypeAttr>("input_type"))
      spec.inputType = inputType.getValue().isBF16() ? DType::BF16 : DType::F16;
    spec.phase = Phase::Prefill;
    step.kernel = kernel(spec);
    spec.phase = Phase::Decode;
    step.decodeKernel = kernel(spec);
    step.args = {input(in), viewArg(weightView(w))};
    if (spec.weightType == DType::I8 || spec.weightType == DType::U8)
      step.args.push_back(
          viewArg(weightView(scalesIndex.lookup(symbol.getValue()))));
    if (spec.weightType == DType::U8 && !spec.symmetricGroups)
      step.args.push_back(
          viewArg(weightView(zerosIndex.lookup(symbol.getValue()))));
    if (options.probeInputs) {
      step.probeInput =
          int(plan.config.numLayers + int64_t(plan.inputProbes.size()));
      plan.inputProbes.push_back(symbol.getValue().str());
    }
    if (spec.inputBits == 8) { // the static input scale, or 0: per token
      auto scale = op->getAttrOfType<FloatAttr>("input_scale");
      step.args.push_back(
          scalarArg(Step::Arg::Kind::Float, 0,
                    scale ? float(scale.getValueAsDouble()) : 0.0f));
    }
    if (isa<LogitsOp>(op)) {
      step.headRows = true;
      storage[result] = {Storage::Kind::Logits, 0, 0, width(result)};
      step.args.push_back(viewArg(activation(result)));
    } else {
      step.args.push_back(output(result));
    }
  } else if (auto split = dyn_cast<SplitOp>(op)) {
    Storage parent = storage.lookup(split.getInput());
    int64_t column = parent.column;
    for (auto [result, size] :
         llvm::zip(split.getResults(), split.getSizes())) {
      Storage piece = parent;
      piece.column = column;
      storage[result] = piece;
      column += size;
    }
    return llvm::Error::success(); // a view, no step
  } else if (auto rope = dyn_cast<RopeOp>(op)) {
    RopeTableOp table;
    if (rope.getTableAttr())
      table = SymbolTable::lookupNearestSymbolFrom<RopeTableOp>(
          op, rope.getTableAttr());
    if (!table)
      return error(op, "spark.rope has no table (run spark-rope-tables)");
    if (int64_t(table.getPositions()) < options.maxContext)
      return error(op, llvm::formatv("RoPE table {0} covers {1} positions, "
                                     "the build holds {2}",
                                     table.getSymName(), table.getPositions(),
                                     options.maxContext));
    KernelSpec spec;
    spec.kind = KernelKind::Rope;
    spec.heads = rope.getNumHeads();
    spec.headDim = rope.getHeadDim();
    spec.rotaryDim = rope.getRotaryDim();
    spec.out = table.getPositions();
    spec.block = table.getBlock();
    step.kernel = kernel(spec);
    step.args = {input(rope.getInput())};
    for (int tensor : ropeTables(table))
      step.args.push_back(viewArg(weightView(tensor)));
    step.args.push_back(scalarArg(Step::Arg::Kind::Position));
    step.args.push_back(output(rope.getResult()));
  } else if (auto attn = dyn_cast<AttentionOp>(op)) {
    int kc, vc;
    if (llvm::Error e = cacheOf(op, attn.getKeyCache(), kc))
      return e;
    if (llvm::Error e = cacheOf(op, attn.getValueCache(), vc))
      return e;
    const CacheSpec &cache = plan.caches[kc];
    KernelSpec spec;
    spec.kind = KernelKind::Attention;
    spec.heads = attn.getNumHeads();
    spec.kvHeads = attn.getNumKvHeads();
    spec.headDim = attn.getHeadDim();
    spec.window = attn.getWindow().value_or(0);
    spec.slots = cache.slots;
    spec.ring = cache.ring;
    spec.scale = attn.getScale().convertToDouble();
    spec.weightType = cache.dtype; // the caches' elements
    spec.gated = bool(attn.getGate());
    step.kernel = kernel(spec);
    const int64_t hd = spec.headDim;
    auto cacheView = [&](int index) {
      View v;
      v.base = View::Base::Cache;
      v.index = index;
      v.type = plan.caches[index].dtype;
      v.extents = {hd, spec.kvHeads, spec.slots};
      v.strides = {1, hd, hd * spec.kvHeads};
      return viewArg(v);
    };
    step.args = {input(attn.getQuery(), {hd, spec.heads}),
                 input(attn.getKey(), {hd, spec.kvHeads}),
                 input(attn.getValue(), {hd, spec.kvHeads}), cacheView(kc),
                 cacheView(vc)};
    if (spec.gated)
      step.args.push_back(input(attn.getGate()));
    step.args.push_back(scalarArg(Step::Arg::Kind::Position));
    step.args.push_back(scalarArg(Step::Arg::Kind::CachedRows, spec.slots));
    step.args.push_back(output(attn.getResult(), {hd, spec.heads}));
  } else if (auto write = dyn_cast<KVWriteOp>(op)) {
    int cache;
    if (llvm::Error e = cacheOf(op, write.getCache(), cache))
      return e;
    step.kind = Step::Kind::CacheWrite;
    step.cache = cache;
    step.source = activation(write.getValues());
    step.width = width(write.getValues());
    storage[write.getResult()] = storage.lookup(write.getCache());
  } else if (auto gate = dyn_cast<HeadGateOp>(op)) {
    KernelSpec spec;
    spec.kind = KernelKind::HeadGate;
    spec.heads = gate.getNumHeads();
    spec.headDim = width(gate.getInput()) / spec.heads;
    step.kernel = kernel(spec);
    step.args = {input(gate.getInput()), input(gate.getGate())};
    step.args.push_back(output(gate.getResult()));
  } else if (auto get = dyn_cast<GetWeightOp>(op)) {
    int w = weightTensor(op, get.getWeightAttr(), DType::F32, err);
    if (err)
      return err;
    storage[get.getResult()] = {Storage::Kind::Weight, w, 0, 0};
    return llvm::Error::success(); // data in the pack, no step
  } else if (auto constant = dyn_cast<ConstantOp>(op)) {
    storage[constant.getResult()] = {Storage::Kind::Weight,
                                     constantTensor(constant), 0, 0};
    return llvm::Error::success();
  } else if (isa<AddOp, MulOp>(op)) {
    Value result = op->getResult(0);
    auto rowsOf = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).getRank() == 2;
    };
    if (!rowsOf(result))
      return error(op, "the host codegen supports elementwise ops on "
                       "[tokens, features] values only");
    KernelSpec spec;
    spec.kind = KernelKind::Binary;
    spec.op = isa<AddOp>(op) ? ElementwiseOp::Add : ElementwiseOp::Mul;
    spec.in = width(result);
    spec.lhsWidth = width(op->getOperand(0));
    spec.rhsWidth = width(op->getOperand(1));
    spec.lhsRows = rowsOf(op->getOperand(0));
    spec.rhsRows = rowsOf(op->getOperand(1));
    step.kernel = kernel(spec);
    step.args = {input(op->getOperand(0)), input(op->getOperand(1))};
    step.args.push_back(output(result));
  } else if (isa<GegluOp, RsqrtOp, SigmoidOp, GeluOp, PowOp, MeanOp>(op)) {
    KernelSpec spec;
    spec.in = width(op->getOperand(0));
    spec.kind = isa<GegluOp>(op)  ? KernelKind::Geglu
                : isa<MeanOp>(op) ? KernelKind::Mean
                                  : KernelKind::Unary;
    if (auto gelu = dyn_cast<GeluOp>(op))
      spec.op =
          gelu.getApproximate() ? ElementwiseOp::GeluTanh : ElementwiseOp::Gelu;
    else if (auto pow = dyn_cast<PowOp>(op)) {
      spec.op = ElementwiseOp::Pow;
      spec.parameter = pow.getExponent().convertToDouble();
    } else if (isa<RsqrtOp>(op))
      spec.op = ElementwiseOp::Rsqrt;
    else if (isa<SigmoidOp>(op))
      spec.op = ElementwiseOp::Sigmoid;
    step.kernel = kernel(spec);
    for (Value operand : op->getOperands())
      step.args.push_back(input(operand));
    step.args.push_back(output(op->getResult(0)));
  } else if (isa<func::ReturnOp>(op)) {
    if (op->getNumOperands() < 1 ||
        storage.lookup(op->getOperand(0)).kind != Storage::Kind::Logits)
      return error(op, "the step function must return the logits first");
    return llvm::Error::success();
  } else {
    return error(op, "the host codegen cannot lower '" +
                         op->getName().getStringRef() +
                         "' (decomposed and quantized ops need the fusion "
                         "passes, which are not in this build yet)");
  }
  step.layer = layerOf(op->getLoc());
  // The last residual add of a decoder layer is that layer's output.
  if (step.layer >= 0 && isa<AddOp>(op) &&
      width(op->getResult(0)) == plan.config.hiddenSize)
    layerOutputs[step.layer] = currentStep();
  plan.steps.push_back(std::move(step));
  return llvm::Error::success();
}

llvm::Expected<ModelPlan> Planner::run(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>("step");
  if (!step)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the module has no func.func @step");
  Block &body = step.getBody().front();
  if (body.getNumArguments() < 2 || (body.getNumArguments() - 2) % 2 != 0)
    return error(step, "@step takes (ids, positions, k/v caches...)");
  std::string configText =
      llvm::formatv("{0}", llvm::json::Value(plan.config.toJSON())).str();
  plan.configHash = fnv1a(configText);
  if (!options.weightsFrom.empty()) {
    auto reader = PackReader::open(options.weightsFrom);
    if (!reader)
      return reader.takeError();
    if ((*reader)->configHash() != plan.configHash)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s: built for another model configuration than this checkpoint's",
          options.weightsFrom.c_str());
    plan.weightsFrom = std::move(*reader);
  }
  storage[body.getArgument(0)] = {Storage::Kind::Tokens, 0, 0, 1};
  storage[body.getArgument(1)] = {Storage::Kind::Positions, 0, 0, 1};

  // Cache layouts come from the IR (spark-kv-layout decides them): the
  // slots are the cache type's first dim, the layout the attention's.
  llvm::DenseMap<Value, bool> cacheIsRing;
  for (AttentionOp attn : step.getOps<AttentionOp>())
    for (Value cache : {attn.getKeyCache(), attn.getValueCache()})
      cacheIsRing[cache] = attn.getLayout() == CacheLayout::Ring;
  for (unsigned i = 2; i < body.getNumArguments(); ++i) {
    Value arg = body.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    auto it = cacheIsRing.find(arg);
    if (it == cacheIsRing.end())
      return error(step, llvm::formatv("cache argument {0} is not read by any "
                                       "spark.attention",
                                       i));
    CacheSpec cache;
    cache.layer = int((i - 2) / 2);
    cache.keys = (i - 2) % 2 == 0;
    cache.ring = it->second;
    cache.slots = type.getShape()[0];
    cache.kvHeads = type.getShape()[1];
    cache.headDim = type.getShape()[2];
    Type element = type.getElementType();
    if (element.isBF16())
      cache.dtype = DType::BF16;
    else if (element.isF16())
      cache.dtype = DType::F16;
    else if (!element.isF32())
      return error(step, llvm::formatv("cache argument {0} has elements of "
                                       "neither f32, bf16 nor f16",
                                       i));
    storage[arg] = {Storage::Kind::Cache, int64_t(plan.caches.size()), 0, 0};
    plan.caches.push_back(cache);
  }
  auto arena = module->getAttrOfType<DictionaryAttr>("spark.arena");
  auto arenaBytes = arena ? arena.getAs<IntegerAttr>("bytes") : IntegerAttr();
  auto arenaRows = arena ? arena.getAs<IntegerAttr>("rows") : IntegerAttr();
  if (!arenaBytes || !arenaRows)
    return error(module,
                 "the module has no spark.arena (run spark-plan-memory)");
  const int64_t neededRows =
      spark::arenaRows(options.maxChunk, kPrefillRowMultiple);
  if (arenaRows.getInt() < neededRows)
    return error(module, llvm::formatv("the arena holds {0} rows per value; "
                                       "max chunk {1} needs {2}",
                                       arenaRows.getInt(), options.maxChunk,
                                       neededRows));
  plan.arenaFloats = arenaBytes.getInt() / 4;
  for (Operation &op : body)
    if (llvm::Error e = lower(&op))
      return e;
  for (auto [layer, stepIndex] : layerOutputs)
    plan.steps[stepIndex].probeLayer = layer;
  for (const ArenaValue &v : plan.arena)
    if (v.offset < 0)
      return error(module, "a value has no spark.arena_offset (run "
                           "spark-plan-memory)");

  std::string abi = llvm::formatv("abi2;ctx{0};chunk{1};", options.maxContext,
                                  options.maxChunk)
                        .str();
  for (const KernelSpec &k : plan.kernels)
    abi += k.name() + ";";
  for (const PackTensor &t : plan.tensors)
    abi += llvm::formatv("{0}:{1}:{2};", t.name, int(t.dtype), t.bytes()).str();
  for (const CacheSpec &c : plan.caches)
    abi += llvm::formatv("{0}:{1}:{2};", c.ring, c.slots, c.kvHeads * c.headDim)
               .str();
  plan.abiHash = fnv1a(abi, plan.configHash);
  return std::move(plan);
}

} // namespace

llvm::Expected<ModelPlan> planModel(ModuleOp module, const Checkpoint &ckpt,
                                    const BuildOptions &options) {
  return Planner(ckpt, options).run(module);
}

} // namespace spark
