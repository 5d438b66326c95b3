//===- FloatFormats.h - conversions between f32 and 16-bit floats ---------===//
//
// Bit-exact IEEE half and bfloat16 conversions (round to nearest even), used
// by the checkpoint reader and writer on every element, so kept inline and
// branch-light rather than going through APFloat.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_IMPORT_FLOATFORMATS_H
#define SPARK_IMPORT_FLOATFORMATS_H

#include <cstdint>
#include <cstring>

namespace spark {

inline uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float bf16ToFloat(uint16_t h) { return bitsToFloat(uint32_t(h) << 16); }

inline uint16_t floatToBF16(float f) {
  uint32_t bits = floatBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1f,
           mantissa = h & 0x3ff;
  if (exponent == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24 is exact in f32.
  float magnitude = float(mantissa) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

inline uint16_t floatToHalf(float f) {
  uint32_t bits = floatBits(f);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  if (magnitude >= 0x477ff000u) // rounds to >= 65520: infinity
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) { // below the smallest normal half (2^-14)
    // Scale into the subnormal grid (units of 2^-24) and round to even.
    float scaled = bitsToFloat(magnitude) * 16777216.0f;
    uint32_t q = uint32_t(scaled);
    float rest = scaled - float(q);
    if (rest > 0.5f || (rest == 0.5f && (q & 1)))
      ++q;
    return sign | uint16_t(q);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to even.
  uint32_t rebased = magnitude - (112u << 23);
  rebased += 0xfffu + ((rebased >> 13) & 1);
  return sign | uint16_t(rebased >> 13);
}

} // namespace spark

#endif // SPARK_IMPORT_FLOATFORMATS_H
