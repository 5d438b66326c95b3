/* int8_linear.c again, under other names, with its w4a8 decode rows on the
 * shift-and-mask high nibbles of CPUs without GFNI (Cascade Lake, Cooper
 * Lake), so that X86KernelsTest checks that path on a CPU that has GFNI. */
#define SPARK_NO_GFNI 1
#define spark_vnni_linear_w8a8 spark_nogfni_linear_w8a8
#define spark_vnni_linear_w4a8 spark_nogfni_linear_w4a8
#define spark_vnni_linear_w4a16_xbf16 spark_nogfni_linear_w4a16_xbf16
#define spark_vnni_linear_w4a16_xf16 spark_nogfni_linear_w4a16_xf16
#include "int8_linear.c"
