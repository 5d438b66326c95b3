//===- StreamRead.cpp - read memory as the decode kernels do --------------===//
#include "StreamRead.h"

namespace spark {
namespace {

float sumLines128(const float *p, size_t lines, size_t ahead) {
  typedef float v4 __attribute__((vector_size(16)));
  const v4 *data = reinterpret_cast<const v4 *>(p);
  const size_t aheadVectors = ahead / sizeof(v4);
  v4 a = {0, 0, 0, 0}, b = a, c = a, d = a;
  for (size_t i = 0; i < 4 * lines; i += 4) {
    if (aheadVectors)
      __builtin_prefetch(data + i + aheadVectors, 0, 2);
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  v4 s = a + b + c + d;
  return s[0] + s[1] + s[2] + s[3];
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float
sumLines512(const float *p, size_t lines, size_t ahead) {
  typedef float v16 __attribute__((vector_size(64)));
  const v16 *data = reinterpret_cast<const v16 *>(p);
  const size_t aheadLines = ahead / sizeof(v16);
  v16 a = {}, b = a, c = a, d = a;
  for (size_t i = 0; i + 4 <= lines; i += 4) {
    if (aheadLines)
      for (size_t j = 0; j < 4; ++j)
        __builtin_prefetch(data + i + j + aheadLines, 0, 2);
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  v16 s = a + b + c + d;
  float sum = 0;
  for (int i = 0; i < 16; ++i)
    sum += s[i];
  return sum;
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
