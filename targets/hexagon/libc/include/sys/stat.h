/* sys/stat.h - freestanding subset (targets/hexagon/libc): st_size only. */
#ifndef SPARK_HEXAGON_SYS_STAT_H
#define SPARK_HEXAGON_SYS_STAT_H
#include <sys/types.h>
struct stat {
  off_t st_size;
  mode_t st_mode;
};
int fstat(int fd, struct stat *st);
#endif
