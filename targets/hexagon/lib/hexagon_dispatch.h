/* hexagon_dispatch.h - the variant of a Hexagon library: one, for v66+
 * cores with 128-byte HVX, which the build targets. Included by the
 * generated step driver. */
#ifndef SPARK_HEXAGON_DISPATCH_H
#define SPARK_HEXAGON_DISPATCH_H

static inline int spark_hexagon_hvx(void) { return 1; }

#endif /* SPARK_HEXAGON_DISPATCH_H */
