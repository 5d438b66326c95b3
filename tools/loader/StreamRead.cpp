//===- StreamRead.cpp - read memory as the decode kernels do --------------===//
#include "StreamRead.h"

namespace spark {
namespace {

/// sumLines with vectors of V: each line's vectors in turn into four
/// accumulators, the line requested `ahead` bytes before it is read.
template <typename V>
inline __attribute__((always_inline)) float
sumLinesOf(const float *p, size_t lines, size_t ahead) {
  constexpr size_t kPerLine = 64 / sizeof(V);
  const V *data = reinterpret_cast<const V *>(p);
  const size_t aheadVectors = ahead / sizeof(V);
  V acc[4] = {};
  for (size_t i = 0; i < kPerLine * lines; i += 4)
    for (size_t j = 0; j < 4; ++j) {
      if (aheadVectors && (i + j) % kPerLine == 0)
        __builtin_prefetch(data + i + j + aheadVectors, 0, 2);
      acc[j] += data[i + j];
    }
  const V s = acc[0] + acc[1] + acc[2] + acc[3];
  float sum = 0;
  for (size_t l = 0; l < sizeof(V) / sizeof(float); ++l)
    sum += s[l];
  return sum;
}

float sumLines128(const float *p, size_t lines, size_t ahead) {
  typedef float v4 __attribute__((vector_size(16)));
  return sumLinesOf<v4>(p, lines, ahead);
}

#if defined(__x86_64__)
typedef float v16 __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) float
sumLines512(const float *p, size_t lines, size_t ahead) {
  return sumLinesOf<v16>(p, lines, ahead);
}
#endif

} // namespace

LineSum widestLineSum() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return sumLines512;
#endif
  return sumLines128;
}

} // namespace spark
