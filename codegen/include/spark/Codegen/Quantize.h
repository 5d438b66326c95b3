//===- Quantize.h - weight quantization: int8 rows, 4-bit groups -*- C++ -*-===//
//
// The maths of the quantized schemes, in one place: the planner quantizes
// each weight with these, and PackTensor::readElements writes the codes they
// imply. spark-quantize-weights decides which weight gets which precision.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_CODEGEN_QUANTIZE_H
#define SPARK_CODEGEN_QUANTIZE_H

#include "llvm/ADT/STLFunctionalExtras.h"

#include <algorithm>
#include <cstdint>

namespace spark {

/// The scale of symmetric int8 quantization of one row: max |value| / 127
/// (1 for an all-zero row), so every value maps to a code in [-127, 127].
float symmetricInt8Scale(llvm::function_ref<float(int64_t)> value, int64_t n);

/// Asymmetric 4-bit quantization of one group: codes 0..15 with
/// value ~ (code - zero) * scale, scale and zero f16 values. Searches
/// shrinkings of the [min, max] range and grids of 14 to 16 steps over it,
/// each followed by a least-squares refit of scale and zero to its codes,
/// and keeps the grid with the least squared error, each value's error
/// weighted by `importance` (the mean square of the input channel it
/// multiplies, from calibration) when given.
struct Int4Group {
  float scale = 1.0f, zero = 0.0f;
};
Int4Group searchInt4Group(const float *values, int64_t n,
                          const float *importance = nullptr);
Int4Group searchInt4Group(llvm::function_ref<float(int64_t)> value, int64_t n,
                          const float *importance = nullptr);
/// Symmetric 4-bit quantization of one group: value ~ (code - 8) * scale,
/// codes 0..15, scale an f16 value; searches shrinkings of max |value| / 7
/// and grids fitting either side, each refitted, weighted as above.
Int4Group searchSymmetricInt4Group(const float *values, int64_t n,
                                   const float *importance = nullptr);
Int4Group searchSymmetricInt4Group(llvm::function_ref<float(int64_t)> value,
                                   int64_t n,
                                   const float *importance = nullptr);
int quantizeInt4(float value, const Int4Group &g);
/// The asymmetric search for 6-bit groups: codes 0..63, grids of 62 to 64
/// steps (an Int4Group holds their scale and zero point too).
Int4Group searchInt6Group(const float *values, int64_t n,
                          const float *importance = nullptr);

/// GPTQ (Frantar et al., 2022) for the rows x cols matrix `w` (row-major)
/// in 4-bit groups of `group` along each row: the columns are rounded in
/// order, and each column's rounding error is spread over the columns not
/// yet rounded through `moment`, the cols x cols second
/// moment E[x x^T] of the product's calibrated inputs (row-major), damped
/// by `damp` times its mean diagonal; a column no input ever reached
/// (its diagonal 0) is rounded as 0. Each group's grid is the search above
/// (asymmetric, or symmetric with zero point 8) over the group's values as
/// the errors before it left them, its scale an f16 value. Writes the
/// grids ([rows][cols / group]) and each weight's code (0..15, one a byte,
/// [rows][cols]). False (nothing written) when the damped moment is not
/// positive definite. `bits` 6: asymmetric 6-bit groups (codes 0..63).
bool gptqInt4(const float *w, int64_t rows, int64_t cols, int64_t group,
              bool symmetric, const float *moment, Int4Group *grids,
              uint8_t *codes, double damp = 0.01, int bits = 4);

/// The Cholesky factor L (lower triangular, L L^T = a) of the symmetric
/// positive definite n x n matrix `a` (row-major; its lower triangle is
/// read), written in place over that lower triangle (blocked, on all
/// threads). False when `a` is not positive definite.
bool choleskyInPlace(double *a, int64_t n);
/// Whether the two searches run their eight-lane AVX2 loops (set where the
/// CPU has AVX2; they give the same grids, bit for bit, as the four-lane
/// loops). Tests clear it to compare the two.
bool &int4SearchUsesAvx2();

/// The 4-bit code of `value` in a group with 1 / scale `inverse` (`top`
/// 63: the 6-bit code).
inline float int4Code(float value, float inverse, float zero,
                      float top = 15.0f) {
  // Codes outside [0, top] are clamped, so x is first brought into
  // [-1, top + 1]; there, adding and subtracting 1.5 * 2^23 rounds to the
  // nearest integer, ties to even, as std::nearbyint does in the default
  // rounding mode, without its libm call (the group searches round every
  // weight six times).
  float x = std::min(top + 1.0f, std::max(-1.0f, value * inverse + zero));
  const float magic = 12582912.0f;
  float code = (x + magic) - magic;
  return code < 0.0f ? 0.0f : code > top ? top : code;
}

} // namespace spark

#endif // SPARK_CODEGEN_QUANTIZE_H
