/* sys/mman.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_SYS_MMAN_H
#define SPARK_HEXAGON_SYS_MMAN_H
#include <sys/types.h>
#define PROT_READ 1
#define PROT_WRITE 2
#define MAP_SHARED 1
#define MAP_PRIVATE 2
#define MAP_ANONYMOUS 0x20
#define MAP_FAILED ((void *)-1)
#define MADV_DONTNEED 4
#define MADV_WILLNEED 3
#define MADV_SEQUENTIAL 2
void *mmap(void *address, size_t length, int prot, int flags, int fd, off_t offset);
int munmap(void *address, size_t length);
int madvise(void *address, size_t length, int advice);
#endif
