/* unistd.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_UNISTD_H
#define SPARK_HEXAGON_UNISTD_H
#include <sys/types.h>
#define SEEK_SET 0
#define SEEK_CUR 1
#define SEEK_END 2
int close(int fd);
ssize_t read(int fd, void *buffer, size_t n);
ssize_t write(int fd, const void *buffer, size_t n);
off_t lseek(int fd, off_t offset, int whence);
ssize_t readlink(const char *path, char *buffer, size_t size);
#endif
