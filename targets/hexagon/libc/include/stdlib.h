/* stdlib.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_STDLIB_H
#define SPARK_HEXAGON_STDLIB_H
#include <stddef.h>

#define NULL ((void *)0)
void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void *realloc(void *p, size_t size);
void free(void *p);
int posix_memalign(void **out, size_t alignment, size_t size);
long long strtoll(const char *s, char **end, int base);
long strtol(const char *s, char **end, int base);
double strtod(const char *s, char **end);
char *getenv(const char *name);
void abort(void) __attribute__((noreturn));
void exit(int status) __attribute__((noreturn));
int abs(int v);
int atoi(const char *s);
#endif
