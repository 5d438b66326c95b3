//===- Calibrate.h - measure a probed build's matrix product inputs -------===//
//
// What spark-compile --calib measures (in its own process) and spark-fidelity
// --ranges-out writes: every calibration sequence runs through a build with
// input probes, and each probed product input gets its largest |x|, the
// clipping range with the least int8 quantization error over the values
// seen, each input channel's mean x^2 (its importance for the 4-bit weight
// search) and, for GPTQ, the mean of x x^T.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TOOLS_CALIBRATE_H
#define SPARK_TOOLS_CALIBRATE_H

#include "ModelLoader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spark {

/// One probed product input over the calibration sequences.
struct MeasuredInput {
  bool seen = false;  // the probe saw it at least once
  double largest = 0; // the largest |x|
  double clip = 0;    // the clipping range with the least int8 error
  std::vector<double> importance; // each input channel's mean x^2
  /// With secondMoments: the mean of x x^T over the rows seen (width x
  /// width, row-major), for GPTQ.
  std::vector<float> secondMoment;
};

/// Runs every sequence through `run` (a build with input probes) chunk by
/// chunk, every row's logits computed, and measures each probed product
/// input (`inputs`, by probe id - num_layers), with `secondMoments` its
/// second moment too. Returns "" or a message naming `build`.
std::string
measureProductInputs(ModelSession &run, const std::string &build,
                     const std::vector<std::vector<int32_t>> &sequences,
                     std::vector<MeasuredInput> &inputs,
                     bool secondMoments = false);

/// Adds x x^T of `rows` input rows of `width` values (row r at data + r *
/// rowStride) to `packed`: the upper triangle of a width x width sum,
/// packed by rows (row i holds columns i..width-1), sized
/// width (width + 1) / 2 on first use. A rank-k update per block of rows,
/// in parallel over the moment's rows.
void addSecondMoment(std::vector<double> &packed, const float *data,
                     int32_t rows, int32_t width, int32_t rowStride);
/// The mean of such a sum over `rows` rows, as a full n x n row-major
/// matrix (both triangles), for GPTQ.
std::vector<float> secondMomentMean(const std::vector<double> &packed, size_t n,
                                    double rows);

} // namespace spark

#endif // SPARK_TOOLS_CALIBRATE_H
