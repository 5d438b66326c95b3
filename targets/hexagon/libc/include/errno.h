/* errno.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_ERRNO_H
#define SPARK_HEXAGON_ERRNO_H
extern int errno;
#define ENOENT 2
#define EIO 5
#define ENOMEM 12
#define EACCES 13
#define EINVAL 22
#define ERANGE 34
#endif
