/* math.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_MATH_H
#define SPARK_HEXAGON_MATH_H
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
float expf(float x);
float floorf(float x);
float sqrtf(float x);
float fabsf(float x);
float fmaxf(float a, float b);
float nearbyintf(float x);
double fabs(double x);
int isinf_(double x);
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
#define isfinite(x) __builtin_isfinite(x)
#endif
