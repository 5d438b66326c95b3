//===- Utf8.cpp - UTF-8 repair and completeness checks --------------------===//
#include "Tokenizer.h"

namespace spark::text {

namespace {
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

/// Length of the valid character at s[i..], 0 when the bytes there are not
/// a character; *maximal receives the length of the maximal subpart (the
/// bytes one U+FFFD replaces) and *truncated whether more input could have
/// completed it.
size_t charAt(std::string_view s, size_t i, size_t *maximal,
              bool *truncated) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  *truncated = false;
  *maximal = 1;
  if (c < 0x80)
    return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0)
      lo = 0xA0;
    if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      *maximal = k;
      return 0;
    }
    unsigned char d = b(i + k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (d < l || d > h) {
      *maximal = k;
      return 0;
    }
  }
  return need;
}
} // namespace

size_t sanitizeUtf8(std::string_view in, std::string &out, size_t *firstBad) {
  out.clear();
  out.reserve(in.size());
  size_t replaced = 0;
  size_t i = 0;
  while (i < in.size()) {
    // Copy runs of ASCII quickly.
    size_t j = i;
    while (j < in.size() && static_cast<unsigned char>(in[j]) < 0x80)
      ++j;
    out.append(in.data() + i, j - i);
    i = j;
    if (i >= in.size())
      break;
    size_t maximal;
    bool truncated;
    size_t n = charAt(in, i, &maximal, &truncated);
    if (n) {
      out.append(in.data() + i, n);
      i += n;
      continue;
    }
    if (replaced++ == 0 && firstBad)
      *firstBad = i;
    out.append(kReplacement);
    i += maximal;
  }
  return replaced;
}

size_t completeUtf8Prefix(std::string_view s, bool *invalid) {
  *invalid = false;
  size_t i = 0;
  while (i < s.size()) {
    size_t maximal;
    bool truncated;
    size_t n = charAt(s, i, &maximal, &truncated);
    if (n) {
      i += n;
      continue;
    }
    if (!truncated)
      *invalid = true;
    return i;
  }
  return i;
}

} // namespace spark::text
