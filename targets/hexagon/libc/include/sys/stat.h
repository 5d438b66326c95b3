/* sys/stat.h - freestanding subset (targets/hexagon/libc): st_size and a
 * file type (fstat reports a seekable file as regular, anything else fails). */
#ifndef SPARK_HEXAGON_SYS_STAT_H
#define SPARK_HEXAGON_SYS_STAT_H
#include <sys/types.h>
struct stat {
  off_t st_size;
  mode_t st_mode;
};
#define S_IFMT 0170000
#define S_IFSOCK 0140000
#define S_IFREG 0100000
#define S_IFBLK 0060000
#define S_IFDIR 0040000
#define S_IFCHR 0020000
#define S_IFIFO 0010000
#define S_ISREG(m) (((m) & S_IFMT) == S_IFREG)
#define S_ISDIR(m) (((m) & S_IFMT) == S_IFDIR)
#define S_ISFIFO(m) (((m) & S_IFMT) == S_IFIFO)
#define S_ISCHR(m) (((m) & S_IFMT) == S_IFCHR)
#define S_ISBLK(m) (((m) & S_IFMT) == S_IFBLK)
#define S_ISSOCK(m) (((m) & S_IFMT) == S_IFSOCK)
int fstat(int fd, struct stat *st);
#endif
