//===- StreamRead.h - read memory as the decode kernels do ----------------===//
//
// The loop of the benchmarks' bandwidth probes (spark-bench's roofline,
// spark-kernelbench's stream): a sum over 64-byte lines with each line
// requested into L2 ahead, with the widest loads this CPU has.
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TOOLS_STREAMREAD_H
#define SPARK_TOOLS_STREAMREAD_H

#include <cstddef>

namespace spark {

/// The sum of the floats of `lines` 64-byte lines at `p` (lines a multiple of
/// 4), each line requested into L2 (prefetcht1) `ahead` bytes before it is
/// read (0: no prefetch).
using LineSum = float (*)(const float *p, size_t lines, size_t ahead);

/// One 64-byte load a line where the CPU has AVX-512, as the decode kernels
/// read; four 16-byte loads elsewhere. With 16-byte loads a probe read 13.7
/// and 10.4 GB/s on one thread of an Intel Xeon (Emerald Rapids) in two
/// rounds where 64-byte loads read 15.1 and 14.6, below what the w8a8 decode
/// rows read there.
LineSum widestLineSum();

} // namespace spark

#endif // SPARK_TOOLS_STREAMREAD_H
