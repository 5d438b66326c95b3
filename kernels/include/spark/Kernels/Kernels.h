//===- Kernels.h - Halide algorithms of the spark kernels ------------------===//
//
// One KernelSpec per distinct kernel of a model (op kind + static shapes +
// element types + phase). buildKernel() writes its Halide algorithm only;
// targets/<t> schedules it. The AOT function's arguments are the inputs in
// the order listed per kind below, then scalar params, then the output.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_KERNELS_KERNELS_H
#define SPARK_KERNELS_KERNELS_H

#include "spark/Import/Safetensors.h"

#include "Halide.h"

#include <string>
#include <vector>

namespace spark {

enum class KernelKind {
  Embed,     // (ids i32[n], table T[d, V]) -> f32[d, n]
  RMSNorm,   // (x f32[d, n], w f32[d]) -> f32[d, n]
  Linear,    // (x f32[K, n], w T[K, N], [scales], [zeros]) -> f32[N, n];
             // prefill: n % 4 == 0
  Rope,      // (x f32[H*hd, n], coarse cos/sin f32[rd/2, P/B], fine cos/sin
             //  f32[rd/2, B], pos0): angle = coarse + fine (B = block)
  Attention, // (q, k, v, kcache T[hd, KV, S], vcache, [gate f32[H, n]], pos0,
             //  cached) -> f32[H*hd, n]
  HeadGate,  // (o f32[H*hd, n], g f32[H, n]) -> f32[H*hd, n]
  Geglu,     // (gate f32[I, n], up f32[I, n]) -> f32[I, n]
  // Decomposed graphs (what the fusion passes remove):
  Binary,    // (a, b) -> f32[w, n]: add or mul; a/b may broadcast (see below)
  Unary,     // (x f32[w, n]) -> f32[w, n]: rsqrt, sigmoid, gelu, pow
  Mean,      // (x f32[w, n]) -> f32[1, n]
};

enum class ElementwiseOp { Add, Mul, Rsqrt, Sigmoid, Gelu, GeluTanh, Pow };

/// Decode kernels are scheduled for one token, prefill kernels for a chunk.
enum class Phase { Any, Decode, Prefill };

struct KernelSpec {
  KernelKind kind = KernelKind::Binary;
  Phase phase = Phase::Any;
  DType weightType = DType::F32; // table / weight / cache type
  int64_t in = 0;  // Linear: K; Embed: d; RMSNorm/Geglu/Add/Rope/HeadGate: width
  int64_t out = 0; // Linear: N; Embed: V; Rope: table positions P
  double epsilon = 0.0, scale = 0.0, theta = 0.0;
  int64_t heads = 0, kvHeads = 0, headDim = 0, rotaryDim = 0;
  int64_t window = 0; // Attention: 0 for a full layer
  int64_t slots = 0;  // Attention: cache slots
  int64_t block = 0;  // Rope: positions per coarse table row
  int64_t group = 0;  // Linear/Embed with 4-bit weights (U8 bytes): group size
  /// Bits per code of grouped weights: 4, or 6 (asymmetric, dense: each
  /// row's K/2 bytes of low nibbles, then K/4 bytes of top two bits).
  int64_t codeBits = 4;
  bool symmetricGroups = false; // 4-bit: (code - 8) * scale, no zeros input
  /// 4-bit: bytes per stored row when every row holds its codes, then its
  /// scales and zero points (SPARK_LAYOUT_GROUPED_ROWS; the scales and zeros
  /// inputs are strided views of the same rows); 0: dense [N][K/2] codes.
  int64_t rowBytes = 0;
  int64_t inputBits = 0; // Linear: 8 = inputs quantized to int8 per token
  int64_t inputBlock = 0; // Linear, int8 inputs: one scale per block of K (0: per token)
  DType inputType = DType::F32; // Linear: BF16 / F16 = inputs rounded to it
  bool ring = false;  // Attention: ring cache
  bool gated = false; // Attention: sigmoid head gate in the epilogue
  // Binary / Unary: the operation (Pow: `parameter` is the exponent). A
  // Binary operand of width 1 broadcasts along the features; one without
  // rows (a weight or constant) along the tokens.
  ElementwiseOp op = ElementwiseOp::Add;
  double parameter = 0.0;
  int64_t lhsWidth = 0, rhsWidth = 0;
  bool lhsRows = true, rhsRows = true;

  /// A Linear with int8 inputs, one scale per token (w8a8, w4a8), and int8
  /// weights, or (fourBit) symmetric 4-bit groups: what the int8
  /// dot-product microkernels take (each target checks the group size and
  /// the shape its own kernels take).
  bool isInt8Linear(bool fourBit) const {
    if (kind != KernelKind::Linear || inputBits != 8 || inputBlock)
      return false;
    return fourBit ? group && symmetricGroups && codeBits == 4
                   : weightType == DType::I8 && !group;
  }

  /// A unique, C-identifier-safe name, e.g. "linear_k2048_n3072_bf16_decode".
  std::string name() const;
  bool operator<(const KernelSpec &other) const { return name() < other.name(); }
};

/// A built algorithm: the pipeline's output and arguments, plus the named
/// pieces a schedule refers to.
struct KernelAlgorithm {
  KernelSpec spec;
  Halide::Func output;
  std::vector<Halide::Argument> arguments;
  // Intermediate stages, by role (empty Funcs when a kind has none).
  Halide::Func sumSquares;             // RMSNorm
  Halide::Func accumulator; // Linear: the dot products; Mean: the sum
  Halide::Func packedInput; // Linear with matrix tiles: bf16 pairs [2, n, K/2]
  // Linear, int8 inputs: max |x|, the scale of each token (static or
  // max |x| / 127), the codes.
  Halide::Func inputRange, inputScale, quantizedInput;
  Halide::Func roundedInput; // Linear, 16-bit inputs: x in bf16 / f16
  Halide::Func scores, maxScore, denominator, keys, values, weights,
      accumulated, keyPositions; // Attention
  Halide::RDom reduction;      // the main reduction of the kind
  Halide::RDom innerReduction; // Attention: the q.k dot product over head_dim;
                               // Linear with int8 inputs: the max |x| scan
  Halide::Var x{"x"}, y{"y"}, z{"z"};  // output dims: x innermost
};

/// `matrixTiles` selects, for a prefill Linear with bf16 weights, the form a
/// matrix unit (AMX) runs: the weight rows are the tiles' A operand as
/// stored; the activations are packed into bf16 pairs (B operand, the VNNI
/// layout) per call; the product is computed transposed.
KernelAlgorithm buildKernel(const KernelSpec &spec, bool matrixTiles = false);

/// The Halide type of an element type.
Halide::Type halideType(DType type);

} // namespace spark

#endif // SPARK_KERNELS_KERNELS_H
