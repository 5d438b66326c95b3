//===- CpuSchedules.h - schedules shared by the SIMD CPU targets ----------===//
//
// The kernels' schedules for a CPU with `lanes`-wide f32 vectors and a
// thread pool: vectorized elementwise loops, GEMV and register-blocked GEMM
// for the matrix kernels, per-(head, token) attention. x86 and arm64 call
// these with their own lane counts (and add their own tile schedules).
//
//===----------------------------------------------------------------------===//
#ifndef SPARK_TARGETS_CPUSCHEDULES_H
#define SPARK_TARGETS_CPUSCHEDULES_H

#include "spark/Kernels/Kernels.h"

namespace spark {

struct TargetVariant;

void scheduleCpuKernel(KernelAlgorithm &kernel, int lanes);

/// scheduleCpuKernel with the variant's f32 lanes (vectorFloats): the
/// TargetInfo::schedule of the targets with nothing of their own (arm64,
/// hexagon).
void scheduleCpuVariant(KernelAlgorithm &kernel, const TargetVariant &variant);

} // namespace spark

#endif // SPARK_TARGETS_CPUSCHEDULES_H
