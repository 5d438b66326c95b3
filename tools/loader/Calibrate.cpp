//===- Calibrate.cpp - measure a probed build's matrix product inputs -----===//
//
// See Calibrate.h.
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>

using namespace spark;

namespace {

/// Calibration: per probed product input, the largest |x| and a histogram
/// of |x| in bins of 1/32 octave, from which the clipping range with the
/// least int8 quantization error is chosen.
struct InputHistogram {
  static constexpr int kBinsPerOctave = 32, kLowestOctave = -40, kOctaves = 80,
                       kBins = kBinsPerOctave * kOctaves;
  bool seen = false; // the probe saw this input at least once
  double largest = 0;
  std::vector<double> channelSquares; // per input channel, sum of x^2
  std::vector<double> moment;         // secondMoments: addSecondMoment's sums
  long long rows = 0;
  std::vector<double> count, sum, sumSquares; // per bin, of |x|
  InputHistogram() : count(kBins), sum(kBins), sumSquares(kBins) {}

  static double lowerEdge(int bin) {
    return std::exp2(double(bin) / kBinsPerOctave + kLowestOctave);
  }
  void add(float value) {
    double a = std::fabs(double(value));
    largest = std::max(largest, a);
    if (a == 0)
      return; // exact at any scale
    int bin = int(std::floor((std::log2(a) - kLowestOctave) * kBinsPerOctave));
    bin = std::clamp(bin, 0, kBins - 1);
    count[bin] += 1;
    sum[bin] += a;
    sumSquares[bin] += a * a;
  }
  /// Squared error of symmetric int8 codes with scale clip / 127: values
  /// inside round to the grid (step^2 / 12 each; those under half a step
  /// become 0, error x^2), values outside are clipped to +-clip.
  double error(double clip) const {
    const double step = clip / 127.0;
    double total = 0;
    for (int b = 0; b < kBins; ++b) {
      if (count[b] == 0)
        continue;
      double lower = lowerEdge(b), upper = lowerEdge(b + 1);
      if (lower >= clip) // (|x| - clip)^2 summed
        total += sumSquares[b] - 2 * clip * sum[b] + count[b] * clip * clip;
      else if (upper <= step / 2)
        total += sumSquares[b];
      else
        total += count[b] * step * step / 12.0;
    }
    return total;
  }
  /// The clipping range with the least error: the largest |x| or a bin edge
  /// below it, down to 1/64 of it.
  double bestClip() const {
    if (largest == 0)
      return 0;
    double best = largest, bestError = error(largest);
    int top =
        int(std::floor((std::log2(largest) - kLowestOctave) * kBinsPerOctave));
    for (int b = top; b > top - 6 * kBinsPerOctave && b > 0; --b) {
      double clip = lowerEdge(b);
      if (clip >= largest)
        continue;
      double e = error(clip);
      if (e < bestError) {
        bestError = e;
        best = clip;
      }
    }
    return best;
  }
};

struct RangeState {
  int32_t layers = 0;
  bool secondMoments = false;
  std::vector<InputHistogram> inputs; // by probe id - layers
};

void rangeProbe(void *user, int32_t id, int32_t rows, int32_t width,
                const float *data, int32_t rowStride) {
  auto *state = static_cast<RangeState *>(user);
  if (id < state->layers)
    return; // a layer output
  size_t index = size_t(id - state->layers);
  if (index >= state->inputs.size())
    state->inputs.resize(index + 1);
  InputHistogram &h = state->inputs[index];
  h.seen = true;
  if (h.channelSquares.size() != size_t(width))
    h.channelSquares.assign(width, 0.0);
  h.rows += rows;
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t c = 0; c < width; ++c) {
      float v = data[size_t(r) * rowStride + c];
      h.add(v);
      h.channelSquares[c] += double(v) * double(v);
    }
  if (!state->secondMoments)
    return;
  addSecondMoment(h.moment, data, rows, width, rowStride);
}

} // namespace

std::string
spark::measureProductInputs(ModelSession &run, const std::string &build,
                            const std::vector<std::vector<int32_t>> &sequences,
                            std::vector<MeasuredInput> &inputs,
                            bool secondMoments) {
  RangeState state;
  state.layers = run.info.num_layers;
  state.secondMoments = secondMoments;
  spark_model_set_layer_probe(run.loaded.model, rangeProbe, &state);
  const int32_t chunk = run.info.max_chunk;
  // Every row's logits, so that the head's input is seen at every position.
  std::vector<float> logits(size_t(chunk) * run.info.vocab_size);
  std::string failure;
  for (size_t s = 0; s < sequences.size() && failure.empty(); ++s) {
    const std::vector<int32_t> &ids = sequences[s];
    spark_session_reset(run.session);
    for (size_t at = 0; at < ids.size(); at += chunk) {
      int32_t n = int32_t(std::min<size_t>(chunk, ids.size() - at));
      if (spark_session_eval(run.session, &ids[at], n, n, logits.data()) !=
          SPARK_OK) {
        failure =
            build + ": failed on calibration sequence " + std::to_string(s + 1);
        break;
      }
    }
  }
  spark_model_set_layer_probe(run.loaded.model, nullptr, nullptr);
  if (!failure.empty())
    return failure;
  if (state.inputs.empty())
    return build + ": no product input was probed; expected a build with "
                   "input probes (made by spark-compile --calib)";
  inputs.clear();
  for (InputHistogram &h : state.inputs) {
    MeasuredInput &m = inputs.emplace_back();
    if (!h.seen)
      continue;
    m.seen = true;
    m.largest = h.largest;
    m.clip = h.bestClip();
    for (double squares : h.channelSquares)
      m.importance.push_back(h.rows ? squares / double(h.rows) : 0.0);
    if (!h.moment.empty()) {
      m.secondMoment =
          secondMomentMean(h.moment, h.channelSquares.size(), double(h.rows));
      std::vector<double>().swap(h.moment); // freed as the next one grows
    }
  }
  return "";
}

/// Row i of a packed upper triangle holds columns i..n-1 from this offset
/// (the rows before it hold n, n - 1, ... entries).
static size_t packedRow(size_t i, size_t n) {
  return i * n - (i * (i - 1)) / 2;
}

void spark::addSecondMoment(std::vector<double> &packed, const float *data,
                            int32_t rows, int32_t width, int32_t rowStride) {
  // A rank-k update per block of k rows, the moment's rows in parallel:
  // each pass over the moment (n^2 / 2 doubles) serves k input rows.
  constexpr int32_t kBlock = 16;
  constexpr size_t kParallelWork = size_t(1) << 24; // multiply-adds
  const size_t n = size_t(width);
  if (packed.size() != n * (n + 1) / 2)
    packed.assign(n * (n + 1) / 2, 0.0);
  std::vector<double> x(size_t(kBlock) * n);
  for (int32_t first = 0; first < rows; first += kBlock) {
    const int32_t k = std::min(kBlock, rows - first);
    for (int32_t r = 0; r < k; ++r)
      for (size_t c = 0; c < n; ++c)
        x[size_t(r) * n + c] = double(data[size_t(first + r) * rowStride + c]);
    auto rowOfMoment = [&](size_t i) {
      double a[kBlock];
      bool any = false;
      for (int32_t r = 0; r < k; ++r)
        any |= (a[r] = x[size_t(r) * n + i]) != 0.0;
      if (!any)
        return;
      double *mi = &packed[packedRow(i, n)];
      for (size_t j = i; j < n; ++j) {
        double sum = mi[j - i];
        for (int32_t r = 0; r < k; ++r)
          sum += a[r] * x[size_t(r) * n + j];
        mi[j - i] = sum;
      }
    };
    // Threads only where a block is worth their start (the 1.7b's inputs,
    // not spark-nano's: there the tasks cost more than they save).
    if (n * n / 2 * size_t(k) >= kParallelWork)
      llvm::parallelFor(0, n, rowOfMoment);
    else
      for (size_t i = 0; i < n; ++i)
        rowOfMoment(i);
  }
}

std::vector<float> spark::secondMomentMean(const std::vector<double> &packed,
                                           size_t n, double rows) {
  std::vector<float> mean(n * n);
  for (size_t i = 0; i < n; ++i) {
    const double *mi = &packed[packedRow(i, n)];
    for (size_t j = i; j < n; ++j)
      mean[i * n + j] = mean[j * n + i] = float(mi[j - i] / rows);
  }
  return mean;
}
