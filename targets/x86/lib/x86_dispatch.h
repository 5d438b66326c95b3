/* x86_dispatch.h - which of an x86 library's variants this CPU may run.
 *
 * Included by the generated step driver, which is compiled for plain
 * x86-64: each check is a CPUID query, safe on any x86-64 CPU. The driver
 * tries the variants best first (docs/targets.md). */
#ifndef SPARK_X86_DISPATCH_H
#define SPARK_X86_DISPATCH_H

#include <cpuid.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

/* avx2: AVX2, FMA and F16C. */
static inline int spark_x86_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

/* avx512: the Skylake-server subset (F, CD, BW, DQ, VL) and avx2's. */
static inline int spark_x86_avx512(void) {
  return spark_x86_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

/* avx512vnni: vpdpbusd for the int8 products. */
static inline int spark_x86_avx512vnni(void) {
  return spark_x86_avx512() && __builtin_cpu_supports("avx512vnni");
}

/* avx512bf16: vdpbf16ps for bf16 weights. */
static inline int spark_x86_avx512bf16(void) {
  return spark_x86_avx512vnni() && __builtin_cpu_supports("avx512bf16");
}

/* AMX code may run only if CPUID.(EAX=7,ECX=0):EDX reports AMX-BF16 (bit 22),
 * AMX-TILE (24) and AMX-INT8 (25), and the kernel grants this process the
 * tile data state (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA,
 * which applications must request even on AMX hardware). NULL when usable. */
static inline const char *spark_amx_missing(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return "AMX not used: CPUID leaf 7 is unavailable";
  if (!(d & (1u << 22)) || !(d & (1u << 24)) || !(d & (1u << 25)))
    return "AMX not used: CPUID reports no AMX-TILE/AMX-BF16/AMX-INT8";
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
              18 /* XFEATURE_XTILEDATA */) != 0)
    return "AMX not used: the kernel refused the tile data state "
           "(arch_prctl ARCH_REQ_XCOMP_PERM)";
  return NULL;
}

/* amx (--target=spr): AMX usable, and avx512bf16's features. */
static inline int spark_x86_amx(void) {
  return spark_x86_avx512bf16() && spark_amx_missing() == NULL;
}

#endif /* SPARK_X86_DISPATCH_H */
