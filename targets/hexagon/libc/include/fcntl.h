/* fcntl.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_FCNTL_H
#define SPARK_HEXAGON_FCNTL_H
#define O_RDONLY 0
#define O_WRONLY 1
#define O_RDWR 2
#define O_CREAT 0100
#define O_TRUNC 01000
#define O_NONBLOCK 04000
#define O_CLOEXEC 02000000
int open(const char *path, int flags, ...);
#endif
