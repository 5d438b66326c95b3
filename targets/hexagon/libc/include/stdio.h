/* stdio.h - freestanding subset (targets/hexagon/libc). */
#ifndef SPARK_HEXAGON_STDIO_H
#define SPARK_HEXAGON_STDIO_H
#include <stdarg.h>
#include <stddef.h>

typedef struct spark_file FILE;
extern FILE *stdin, *stdout, *stderr;
#define EOF (-1)

FILE *fopen(const char *path, const char *mode);
int fclose(FILE *f);
size_t fwrite(const void *data, size_t size, size_t count, FILE *f);
int fflush(FILE *f);
int fputs(const char *s, FILE *f);
int printf(const char *format, ...);
int fprintf(FILE *f, const char *format, ...);
int snprintf(char *buffer, size_t size, const char *format, ...);
int vsnprintf(char *buffer, size_t size, const char *format, va_list args);
int vfprintf(FILE *f, const char *format, va_list args);
int rename(const char *from, const char *to);
int remove(const char *path);
#endif
