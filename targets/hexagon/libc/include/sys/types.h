/* sys/types.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_SYS_TYPES_H
#define SPARK_HEXAGON_SYS_TYPES_H
#include <stddef.h>
typedef long ssize_t;
typedef long long off_t;
typedef unsigned int mode_t;
#endif
