/* int8_linear.c again, under other names, with the paths its CPU checks do
 * not pick on this CPU, so that X86KernelsTest checks them too: the w4a8
 * decode rows on the shift-and-mask high nibbles of CPUs without GFNI
 * (Cascade Lake, Cooper Lake), and w4a16 decode in tiles of 4 rows on Intel
 * cores, one row at a time on AMD's (w4a16_decode_rows). */
#define SPARK_NO_GFNI 1
#define SPARK_W4A16_OTHER_DECODE 1
#define spark_vnni_linear_w8a8 spark_nogfni_linear_w8a8
#define spark_vnni_linear_w4a8 spark_nogfni_linear_w4a8
#define spark_vnni_linear_w4a16_xbf16 spark_nogfni_linear_w4a16_xbf16
#define spark_vnni_linear_w4a16_xf16 spark_nogfni_linear_w4a16_xf16
#define spark_vnni_linear_w6a8 spark_nogfni_linear_w6a8
#define spark_vnni_linear_w6a16_xbf16 spark_nogfni_linear_w6a16_xbf16
#define spark_vnni_linear_w6a16_xf16 spark_nogfni_linear_w6a16_xf16
#include "int8_linear.c"
