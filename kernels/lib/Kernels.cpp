//===- Kernels.cpp - Halide algorithms of the spark kernels ---------------===//
//
// Algorithms only: no schedule decisions here (targets/<t> makes them).
// Every index into an input is clamped or guarded so that Halide's bounds
// inference never asks for data outside the buffers the driver passes.
//
//===----------------------------------------------------------------------===//
#include "spark/Kernels/Kernels.h"
#include "spark/model_abi.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>

using namespace Halide;

namespace spark {

Type halideType(DType type) {
  switch (type) {
  case DType::F32:
    return Float(32);
  case DType::BF16:
    return BFloat(16);
  case DType::F16:
    return Float(16);
  case DType::I8:
    return Int(8);
  case DType::U8:
    return UInt(8);
  }
  return Float(32);
}

static std::string typeSuffix(DType type) { return dtypeName(type).lower(); }

/// The weight part of a matrix kernel's name: "bf16", "i8", "u4g128" (4-bit
/// asymmetric groups) or "s4g128" (symmetric), "u4g128r1088" with grouped
/// rows of 1088 bytes, "u6g128" (6-bit groups).
static std::string weightSuffix(const KernelSpec &s) {
  if (!s.group)
    return typeSuffix(s.weightType);
  return (s.symmetricGroups ? "s" : "u") + std::to_string(s.codeBits) + "g" +
         std::to_string(s.group) +
         (s.rowBytes ? "r" + std::to_string(s.rowBytes) : "");
}

/// A parameter's part of a kernel name: `readable` (an integer the value
/// was rounded to, e.g. 600 for an epsilon of 1e-6), followed by the value's
/// bits unless `exact` (the value `readable` stands for) is the value, as a
/// double or as the float the kernels compute with. Kernels are told apart
/// by their names: two different values never share one.
static std::string parameterPart(long long readable, double exact,
                                 double value) {
  std::string part = std::to_string(readable);
  if (value == exact || value == double(float(exact)))
    return part;
  char bits[24];
  uint64_t raw;
  std::memcpy(&raw, &value, sizeof(raw));
  std::snprintf(bits, sizeof(bits), "_x%016llx", (unsigned long long)raw);
  return part + bits;
}

std::string KernelSpec::name() const {
  std::ostringstream os;
  auto phaseSuffix = [&] {
    return phase == Phase::Decode ? "_decode" : phase == Phase::Prefill ? "_prefill" : "";
  };
  switch (kind) {
  case KernelKind::Embed:
    os << "embed_d" << in << "_v" << out << "_" << weightSuffix(*this);
    break;
  case KernelKind::RMSNorm: {
    const long long k = std::llround(-std::log10(epsilon) * 100);
    os << "rms_norm_d" << in << "_eps"
       << parameterPart(k, std::pow(10.0, -double(k) / 100), epsilon);
  } break;
  case KernelKind::Linear:
    os << "linear_k" << in << "_n" << out << "_" << weightSuffix(*this)
       << (inputBits ? "_a" + std::to_string(inputBits) : "")
       << (inputBlock ? "b" + std::to_string(inputBlock) : "")
       << (inputType != DType::F32 ? "_x" + typeSuffix(inputType) : "")
       << phaseSuffix();
    break;
  case KernelKind::Rope:
    os << "rope_h" << heads << "_hd" << headDim << "_rd" << rotaryDim << "_p"
       << out << "_b" << block;
    break;
  case KernelKind::Attention:
    os << "attention_" << (window ? "sliding_w" + std::to_string(window) : "full")
       << (ring ? "_ring" : "_linear") << slots << "_h" << heads << "_kv"
       << kvHeads << "_hd" << headDim << "_" << typeSuffix(weightType)
       << (gated ? "_gated" : "");
    break;
  case KernelKind::HeadGate:
    os << "head_gate_h" << heads << "_hd" << headDim;
    break;
  case KernelKind::Geglu:
    os << "geglu_" << in;
    break;
  case KernelKind::Binary:
    os << (op == ElementwiseOp::Add ? "add_" : "mul_") << in << "_a"
       << lhsWidth << (lhsRows ? "" : "c") << "_b" << rhsWidth
       << (rhsRows ? "" : "c");
    break;
  case KernelKind::Unary: {
    static const char *names[] = {"add", "mul", "rsqrt", "sigmoid",
                                  "gelu", "gelu_tanh", "pow"};
    os << names[int(op)] << "_" << in;
    if (op == ElementwiseOp::Pow) {
      const long long k = std::llround(parameter * 1000);
      os << "_e" << parameterPart(k, double(k) / 1000, parameter);
    }
    break;
  }
  case KernelKind::Mean:
    os << "mean_" << in;
    break;
  }
  return os.str();
}

namespace {

/// erfc(z) for z >= 0 with fractional error < 1.2e-7 (Numerical Recipes'
/// Chebyshev fit); Halide has no erf.
Expr erfcNonNegative(Expr z) {
  Expr t = 1.0f / (1.0f + 0.5f * z);
  const float c[] = {-1.26551223f, 1.00002368f, 0.37409196f,  0.09678418f,
                     -0.18628806f, 0.27886807f, -1.13520398f, 1.48851587f,
                     -0.82215223f, 0.17087277f};
  Expr poly = c[9];
  for (int i = 8; i >= 0; --i)
    poly = c[i] + t * poly;
  return t * exp(-z * z + poly);
}

/// The exact gelu 0.5 z (1 + erf(z / sqrt 2)), written with erfc so that the
/// negative side keeps its relative accuracy.
Expr gelu(Expr z) {
  Expr e = erfcNonNegative(abs(z) * float(M_SQRT1_2));
  return 0.5f * z * select(z >= 0.0f, 2.0f - e, e);
}

/// Bytes per stored row of grouped codes (before any scales of grouped
/// rows): K/2 for 4-bit codes, K/2 + K/4 for 6-bit ones.
int groupedCodeBytes(const KernelSpec &s) {
  return int(s.codeBits == 6 ? spark_six_bit_row_bytes(s.in) : s.in / 2);
}

/// The code (as f32) of column `c` of row `row` of grouped codes `w`: a
/// nibble, or for 6-bit codes the nibble plus 16 x its top two bits, where
/// spark_six_bit_top puts them (blocks of 128 codes, the last one `tail`
/// codes if shorter; h half a block).
Expr groupedCode(const KernelSpec &s, const ImageParam &w, Expr c, Expr row) {
  Expr byte = w(c / 2, row);
  Expr code = cast<float>(select(c % 2 == 0, byte & 15, byte >> 4));
  if (s.codeBits == 6) {
    const int in = int(s.in), tail = in % 128;
    Expr block = c / 128, within = c % 128;
    Expr h = tail ? select(block == in / 128, tail / 2, 64) : Expr(64);
    Expr high = w(in / 2 + 32 * block + (within % h) / 2, row);
    Expr shift = 2 * (within % 2) + 4 * (within / h);
    code += 16.0f * cast<float>((high >> cast<uint8_t>(shift)) & 3);
  }
  return code;
}

void buildEmbed(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam ids(Int(32), 1, "ids");
  ImageParam table(halideType(s.weightType), 2, "table");
  Func out("embed");
  Expr id = clamp(ids(k.y), 0, int(s.out) - 1);
  ImageParam scales(s.group ? Float(16) : Float(32), s.group ? 2 : 1, "scales");
  ImageParam zeros(Float(16), 2, "zeros");
  Expr value;
  int storedCols = int(s.in);
  if (s.group) { // 4/6-bit: (code - zero) * scale of the column's group
    storedCols = groupedCodeBytes(s);
    Expr code = groupedCode(s, table, k.x, id);
    Expr g = k.x / int(s.group);
    Expr zero = s.symmetricGroups ? Expr(8.0f) : cast<float>(zeros(g, id));
    value = (code - zero) * cast<float>(scales(g, id));
  } else {
    value = cast<float>(table(k.x, id));
    if (s.weightType == DType::I8) { // int8 codes, one scale per row
      scales.dim(0).set_bounds(0, int(s.out));
      value = value * scales(id);
    }
  }
  out(k.x, k.y) = value;
  table.dim(0).set_bounds(0, storedCols);
  table.dim(1)
      .set_bounds(0, int(s.out))
      .set_stride(s.rowBytes ? int(s.rowBytes) : storedCols);
  k.output = out;
  k.arguments = {ids, table};
  if (s.weightType == DType::I8 || s.group)
    k.arguments.push_back(scales);
  if (s.group && !s.symmetricGroups)
    k.arguments.push_back(zeros);
}

void buildRMSNorm(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam x(Float(32), 2, "x");
  ImageParam w(Float(32), 1, "w");
  k.reduction = RDom(0, int(s.in), "r");
  Func ss("sum_squares");
  ss(k.y) = 0.0f;
  ss(k.y) += x(k.reduction, k.y) * x(k.reduction, k.y);
  Func out("rms_norm");
  Expr inv = 1.0f / sqrt(ss(k.y) / float(s.in) + float(s.epsilon));
  out(k.x, k.y) = x(k.x, k.y) * inv * w(k.x);
  w.dim(0).set_bounds(0, int(s.in));
  k.output = out;
  k.sumSquares = ss;
  k.arguments = {x, w};
}

void buildLinear(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam x(Float(32), 2, "x");
  ImageParam w(halideType(s.weightType), 2, "w");
  k.reduction = RDom(0, int(s.in), "r");
  RVar r = k.reduction.x;
  // The activations as the product reads them: f32, or (inputBits == 8)
  // symmetric int8 codes: with one scale per token, max |x| / 127, or with
  // the static, calibrated `input_scale` when that is positive.
  Expr input = x(r, k.y), inputScale = 1.0f;
  Param<float> staticScale("input_scale");
  if (s.inputBits == 8 && s.inputBlock) {
    // One scale per token and block of inputBlock along K: the products sum
    // int8 x int8 exactly within a block and scale each block's sum.
    const int block = int(s.inputBlock);
    Var b("b");
    k.innerReduction = RDom(0, block, "rx");
    Func range("input_range");
    range(b, k.y) = 0.0f;
    range(b, k.y) =
        max(range(b, k.y), abs(x(b * block + k.innerReduction.x, k.y)));
    Func blockScale("input_scale_of_block");
    blockScale(b, k.y) = range(b, k.y) / 127.0f;
    Expr inverse = select(blockScale(k.x / block, k.y) > 0.0f,
                          1.0f / blockScale(k.x / block, k.y), 0.0f);
    Func codes("input_codes");
    codes(k.x, k.y) = cast<int8_t>(
        clamp(round(x(k.x, k.y) * inverse), -127.0f, 127.0f));
    k.inputRange = range;
    k.inputScale = blockScale;
    k.quantizedInput = codes;
    input = codes(r, k.y);
  } else if (s.inputBits == 8) {
    // One scale per token: the codes' int32 (or, 4- and 6-bit, exact f32)
    // sums times the token's scale.
    k.innerReduction = RDom(0, int(s.in), "rx");
    Func range("input_range");
    range(k.y) = 0.0f;
    range(k.y) = max(range(k.y), abs(x(k.innerReduction.x, k.y)));
    Func tokenScale("input_scale_of_token");
    tokenScale(k.y) =
        select(staticScale > 0.0f, staticScale, range(k.y) / 127.0f);
    Expr inverse = select(tokenScale(k.y) > 0.0f, 1.0f / tokenScale(k.y), 0.0f);
    Func codes("input_codes");
    codes(k.x, k.y) =
        cast<int8_t>(clamp(round(x(k.x, k.y) * inverse), -127.0f, 127.0f));
    k.inputRange = range;
    k.inputScale = tokenScale;
    k.quantizedInput = codes;
    input = codes(r, k.y);
    inputScale = tokenScale(k.y);
  } else if (s.inputType != DType::F32) {
    // 16-bit activations: each value rounded to bf16 / f16 once per call.
    Func rounded("input_16bit");
    rounded(k.x, k.y) = cast(halideType(s.inputType), x(k.x, k.y));
    k.roundedInput = rounded;
    input = cast<float>(rounded(r, k.y));
  }
  // int8 weights times int8 codes: exact int32 sums (per token scale).
  const bool integerDot =
      s.inputBits == 8 && !s.inputBlock && s.weightType == DType::I8;
  // Block scales: each product scaled by its block's scale, summed in f32.
  Expr blockFactor = 1.0f;
  if (s.inputBits == 8 && s.inputBlock)
    blockFactor = k.inputScale(r / int(s.inputBlock), k.y);
  Func dot("dot");
  dot(k.x, k.y) = integerDot ? Expr(0) : Expr(0.0f);
  ImageParam scales(s.group ? Float(16) : Float(32), s.group ? 2 : 1, "scales");
  ImageParam zeros(Float(16), 2, "zeros");
  int storedCols = int(s.in);
  if (s.group) { // 4/6-bit: (code - zero) * scale of the input's group
    storedCols = groupedCodeBytes(s);
    Expr code = groupedCode(s, w, r, k.x);
    Expr g = r / int(s.group);
    Expr zero = s.symmetricGroups ? Expr(8.0f) : cast<float>(zeros(g, k.x));
    // (code - 8) * input code is exact in f32 for w4a8.
    dot(k.x, k.y) += (code - zero) * cast<float>(input) *
                     (cast<float>(scales(g, k.x)) * blockFactor);
  } else if (integerDot) {
    // |w * x| <= 127 * 127: an exact int16 product, widened to the sum.
    dot(k.x, k.y) += cast<int32_t>(cast<int16_t>(w(r, k.x)) *
                                   cast<int16_t>(input));
  } else if (s.inputBits == 8 && s.inputBlock) {
    dot(k.x, k.y) += cast<float>(cast<int16_t>(w(r, k.x)) *
                                 cast<int16_t>(input)) *
                     blockFactor;
  } else {
    dot(k.x, k.y) += cast<float>(w(r, k.x)) * input;
  }
  Func out("linear");
  Expr result = cast<float>(dot(k.x, k.y)) * inputScale;
  if (s.weightType == DType::I8) { // int8 codes, one scale per output row
    scales.dim(0).set_bounds(0, int(s.out));
    result = result * scales(k.x);
  }
  out(k.x, k.y) = result;
  k.accumulator = dot;
  x.dim(0).set_bounds(0, int(s.in));
  w.dim(0).set_bounds(0, storedCols);
  w.dim(1)
      .set_bounds(0, int(s.out))
      .set_stride(s.rowBytes ? int(s.rowBytes) : storedCols);
  k.output = out;
  k.arguments = {x, w};
  if (s.weightType == DType::I8 || s.group)
    k.arguments.push_back(scales);
  if (s.group && !s.symmetricGroups)
    k.arguments.push_back(zeros);
  if (s.inputBits == 8)
    k.arguments.push_back(staticScale);
}

void buildLinearTiles(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam x(Float(32), 2, "x");
  ImageParam w(halideType(s.weightType), 2, "w");
  Var pair("pair"), t("t"), kp("kp");
  Func packed("packed_input");
  packed(pair, t, kp) = cast<bfloat16_t>(x(2 * kp + pair, t));
  k.reduction = RDom(0, int(s.in), "r");
  RVar r = k.reduction.x;
  // dot(token, row): rows of w are the A tiles, packed tokens the B tiles.
  Func dot("tile_dot");
  dot(k.x, k.y) = 0.0f;
  dot(k.x, k.y) += cast<float>(w(r, k.y)) * cast<float>(packed(r % 2, k.x, r / 2));
  Func out("linear");
  out(k.x, k.y) = dot(k.y, k.x);
  x.dim(0).set_bounds(0, int(s.in));
  w.dim(0).set_bounds(0, int(s.in));
  w.dim(1).set_bounds(0, int(s.out)).set_stride(int(s.in));
  k.accumulator = dot;
  k.packedInput = packed;
  k.output = out;
  k.arguments = {x, w};
}

void buildRope(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  const int width = int(s.heads * s.headDim), hd = int(s.headDim),
            half = int(s.rotaryDim / 2), positions = int(s.out),
            block = int(s.block), coarseRows = (positions + block - 1) / block;
  ImageParam x(Float(32), 2, "x");
  ImageParam coarseCos(Float(32), 2, "coarse_cos"),
      coarseSin(Float(32), 2, "coarse_sin"), fineCos(Float(32), 2, "fine_cos"),
      fineSin(Float(32), 2, "fine_sin");
  Param<int> pos0("pos0");
  Var c = k.x, t = k.y;
  Expr i = c % hd;
  Expr p = clamp(pos0 + t, 0, positions - 1);
  Expr pair = clamp(i % half, 0, half - 1);
  // cos/sin(a + b) from the coarse angle a = (p / B) B f and the fine b = (p % B) f.
  Expr cc = coarseCos(pair, p / block), cs = coarseSin(pair, p / block);
  Expr fc = fineCos(pair, p % block), fs = fineSin(pair, p % block);
  Expr cosine = cc * fc - cs * fs, sine = cs * fc + cc * fs;
  Expr up = x(clamp(c + half, 0, width - 1), t);
  Expr down = x(clamp(c - half, 0, width - 1), t);
  Func out("rope");
  out(c, t) = select(i < half, x(c, t) * cosine - up * sine,
                     i < 2 * half, x(c, t) * cosine + down * sine, x(c, t));
  x.dim(0).set_bounds(0, width);
  for (auto [table, rows] : {std::pair{&coarseCos, coarseRows},
                             {&coarseSin, coarseRows},
                             {&fineCos, block},
                             {&fineSin, block}}) {
    table->dim(0).set_bounds(0, half);
    table->dim(1).set_bounds(0, rows).set_stride(half);
  }
  k.output = out;
  k.arguments = {x, coarseCos, coarseSin, fineCos, fineSin, pos0};
}

void buildAttention(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  const int hd = int(s.headDim), heads = int(s.heads), kvHeads = int(s.kvHeads),
            group = heads / kvHeads, slots = int(s.slots);
  Type cacheType = halideType(s.weightType);
  ImageParam q(Float(32), 3, "q"), key(Float(32), 3, "k"),
      value(Float(32), 3, "v");
  ImageParam keyCache(cacheType, 3, "k_cache"), valueCache(cacheType, 3, "v_cache");
  Param<int> pos0("pos0"), cached("cached");
  Expr n = q.dim(2).extent();
  Var d = k.x, j = k.y, t = k.z, m("m");

  // Position held by key m: cache slots first, then the chunk's own keys.
  Expr lastPosition = pos0 - 1;
  Expr slotPosition = s.ring ? lastPosition - ((lastPosition - m) % slots) : Expr(m);
  Expr keyPosition = select(m < cached, slotPosition, pos0 + (m - cached));
  Expr fromCache = m < cached;
  Expr slot = clamp(m, 0, slots - 1), row = clamp(m - cached, 0, n - 1);
  Func keys("keys"), values("values");
  keys(d, j, m) = select(fromCache, cast<float>(keyCache(d, j, slot)),
                         key(d, j, row));
  values(d, j, m) = select(fromCache, cast<float>(valueCache(d, j, slot)),
                           value(d, j, row));
  Func keyPositions("key_positions");
  keyPositions(m) = keyPosition;
  // Whether the query at chunk row tt sees key mm (causal, and within the
  // window for a sliding layer).
  auto visible = [&](Expr mm, Expr tt) {
    Expr kp = keyPositions(mm), qp = pos0 + tt;
    Expr seen = kp <= qp;
    if (s.window > 0)
      seen = seen && kp > qp - int(s.window);
    return seen;
  };

  RDom rd(0, hd, "rd");
  Func scores("scores");
  scores(m, j, t) = 0.0f;
  scores(m, j, t) += q(rd, j, t) * keys(rd, j / group, m);

  k.reduction = RDom(0, cached + n, "rm");
  RVar rm = k.reduction.x;
  const float lowest = -3.0e38f;
  Func maxScore("max_score");
  maxScore(j, t) = lowest;
  maxScore(j, t) = max(maxScore(j, t),
                       select(visible(rm, t), scores(rm, j, t) * float(s.scale),
                              lowest));
  Func weights("weights");
  weights(m, j, t) =
      select(visible(m, t),
             exp(scores(m, j, t) * float(s.scale) - maxScore(j, t)), 0.0f);
  Func denominator("denominator");
  denominator(j, t) = 0.0f;
  denominator(j, t) += weights(rm, j, t);
  Func accumulated("accumulated");
  accumulated(d, j, t) = 0.0f;
  accumulated(d, j, t) += weights(rm, j, t) * values(d, j / group, rm);
  Func out("attention");
  ImageParam gate(Float(32), 2, "gate");
  Expr result = accumulated(d, j, t) / denominator(j, t);
  if (s.gated) {
    gate.dim(0).set_bounds(0, heads);
    result = result / (1.0f + exp(-gate(j, t)));
  }
  out(d, j, t) = result;

  for (ImageParam *p : {&q}) {
    p->dim(0).set_bounds(0, hd);
    p->dim(1).set_bounds(0, heads);
  }
  for (ImageParam *p : {&key, &value}) {
    p->dim(0).set_bounds(0, hd);
    p->dim(1).set_bounds(0, kvHeads);
    p->dim(2).set_bounds(0, n);
  }
  for (ImageParam *p : {&keyCache, &valueCache}) {
    p->dim(0).set_bounds(0, hd);
    p->dim(1).set_bounds(0, kvHeads).set_stride(hd);
    p->dim(2).set_bounds(0, slots).set_stride(hd * kvHeads);
  }
  k.output = out;
  k.scores = scores;
  k.maxScore = maxScore;
  k.denominator = denominator;
  k.innerReduction = rd;
  k.keys = keys;
  k.values = values;
  k.weights = weights;
  k.accumulated = accumulated;
  k.keyPositions = keyPositions;
  k.arguments = {q, key, value, keyCache, valueCache};
  if (s.gated)
    k.arguments.push_back(gate);
  k.arguments.push_back(pos0);
  k.arguments.push_back(cached);
}

void buildHeadGate(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam o(Float(32), 2, "o"), g(Float(32), 2, "g");
  Func out("head_gate");
  Expr gate = g(k.x / int(s.headDim), k.y);
  out(k.x, k.y) = o(k.x, k.y) / (1.0f + exp(-gate));
  o.dim(0).set_bounds(0, int(s.heads * s.headDim));
  g.dim(0).set_bounds(0, int(s.heads));
  k.output = out;
  k.arguments = {o, g};
}

void buildGeglu(KernelAlgorithm &k) {
  ImageParam gate(Float(32), 2, "gate"), up(Float(32), 2, "up");
  Func out("geglu");
  out(k.x, k.y) = gelu(gate(k.x, k.y)) * up(k.x, k.y);
  gate.dim(0).set_bounds(0, int(k.spec.in));
  up.dim(0).set_bounds(0, int(k.spec.in));
  k.output = out;
  k.arguments = {gate, up};
}

void buildBinary(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam a(Float(32), s.lhsRows ? 2 : 1, "a");
  ImageParam b(Float(32), s.rhsRows ? 2 : 1, "b");
  auto load = [&](ImageParam &p, int64_t width, bool rows) {
    p.dim(0).set_bounds(0, int(width));
    Expr column = width == 1 ? Expr(0) : Expr(k.x);
    return rows ? p(column, k.y) : p(column);
  };
  Expr lhs = load(a, s.lhsWidth, s.lhsRows), rhs = load(b, s.rhsWidth, s.rhsRows);
  Func out(s.op == ElementwiseOp::Add ? "add" : "mul");
  out(k.x, k.y) = s.op == ElementwiseOp::Add ? lhs + rhs : lhs * rhs;
  k.output = out;
  k.arguments = {a, b};
}

void buildUnary(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam x(Float(32), 2, "x");
  x.dim(0).set_bounds(0, int(s.in));
  Expr v = x(k.x, k.y), result;
  switch (s.op) {
  case ElementwiseOp::Rsqrt:
    result = 1.0f / sqrt(v);
    break;
  case ElementwiseOp::Sigmoid:
    result = 1.0f / (1.0f + exp(-v));
    break;
  case ElementwiseOp::Gelu:
    result = gelu(v);
    break;
  case ElementwiseOp::GeluTanh:
    result = 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    break;
  case ElementwiseOp::Pow:
    result = s.parameter == 2.0 ? v * v : pow(v, float(s.parameter));
    break;
  default:
    result = v;
  }
  Func out("unary");
  out(k.x, k.y) = result;
  k.output = out;
  k.arguments = {x};
}

void buildMean(KernelAlgorithm &k) {
  const KernelSpec &s = k.spec;
  ImageParam x(Float(32), 2, "x");
  x.dim(0).set_bounds(0, int(s.in));
  k.reduction = RDom(0, int(s.in), "r");
  Func sum("sum");
  sum(k.y) = 0.0f;
  sum(k.y) += x(k.reduction, k.y);
  Func out("mean");
  out(k.x, k.y) = sum(k.y) / float(s.in);
  k.accumulator = sum;
  k.output = out;
  k.arguments = {x};
}

} // namespace

KernelAlgorithm buildKernel(const KernelSpec &spec, bool matrixTiles) {
  KernelAlgorithm k;
  k.spec = spec;
  if (matrixTiles && spec.kind == KernelKind::Linear) {
    buildLinearTiles(k);
    k.output.output_buffer().dim(0).set_min(0).set_stride(1);
    return k;
  }
  switch (spec.kind) {
  case KernelKind::Embed:
    buildEmbed(k);
    break;
  case KernelKind::RMSNorm:
    buildRMSNorm(k);
    break;
  case KernelKind::Linear:
    buildLinear(k);
    break;
  case KernelKind::Rope:
    buildRope(k);
    break;
  case KernelKind::Attention:
    buildAttention(k);
    break;
  case KernelKind::HeadGate:
    buildHeadGate(k);
    break;
  case KernelKind::Geglu:
    buildGeglu(k);
    break;
  case KernelKind::Binary:
    buildBinary(k);
    break;
  case KernelKind::Unary:
    buildUnary(k);
    break;
  case KernelKind::Mean:
    buildMean(k);
    break;
  }
  // Output dim 0 is dense and starts at 0 in every kernel.
  k.output.output_buffer().dim(0).set_min(0).set_stride(1);
  return k;
}

} // namespace spark
