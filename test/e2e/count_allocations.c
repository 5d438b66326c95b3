/* count_allocations.c - an LD_PRELOAD library for test_e2e.py's
 * test_decode_allocates_nothing: counts the process's heap allocations
 * (malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign), passes
 * each to glibc, and prints "[allocations] N" to stderr at exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_long allocations;

void *malloc(size_t size) {
  ++allocations;
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  ++allocations;
  return __libc_calloc(count, size);
}

void *realloc(void *p, size_t size) {
  ++allocations;
  return __libc_realloc(p, size);
}

void *memalign(size_t alignment, size_t size) {
  ++allocations;
  return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
  ++allocations;
  return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
  ++allocations;
  void *p = __libc_memalign(alignment, size);
  if (!p)
    return ENOMEM;
  *out = p;
  return 0;
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "[allocations] %ld\n", (long)allocations);
}
