/* arm64_dispatch.h - which of an AArch64 library's variants this CPU may
 * run, from the kernel's hardware capabilities (AT_HWCAP). Included by the
 * generated step driver. */
#ifndef SPARK_ARM64_DISPATCH_H
#define SPARK_ARM64_DISPATCH_H

#include <asm/hwcap.h>
#include <sys/auxv.h>

/* dotprod: the NEON dot product (sdot) and half-precision arithmetic. */
static inline int spark_arm64_dotprod(void) {
  const unsigned long hwcap = getauxval(AT_HWCAP);
  return (hwcap & HWCAP_ASIMDDP) && (hwcap & HWCAP_FPHP) &&
         (hwcap & HWCAP_ASIMDHP);
}

/* neon: every AArch64 CPU. */
static inline int spark_arm64_neon(void) { return 1; }

#endif /* SPARK_ARM64_DISPATCH_H */
