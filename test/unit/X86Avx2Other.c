/* avx2_linear.c again, under other names, with the decode rows its CPU
 * check does not pick on this CPU (128-bit rows on CPUs with 256-bit vector
 * units, 256-bit rows on AMD Zen 1 and Zen+), so that X86KernelsTest checks
 * both on every CPU with AVX2. */
#define SPARK_AVX2_OTHER_ROWS 1
#define spark_avx2_linear_w8a8 spark_avx2other_linear_w8a8
#define spark_avx2_linear_w4a8 spark_avx2other_linear_w4a8
#define spark_avx2_linear_w4a16 spark_avx2other_linear_w4a16
#define spark_avx2_linear_w4a16_xbf16 spark_avx2other_linear_w4a16_xbf16
#define spark_avx2_linear_w4a16_xf16 spark_avx2other_linear_w4a16_xf16
#define spark_avx2_linear_w8a16 spark_avx2other_linear_w8a16
#define spark_avx2_linear_w8a16_xbf16 spark_avx2other_linear_w8a16_xbf16
#define spark_avx2_linear_w8a16_xf16 spark_avx2other_linear_w8a16_xf16
#define spark_avx2_linear_bf16 spark_avx2other_linear_bf16
#include "avx2_linear.c"
