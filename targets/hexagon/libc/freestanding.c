/* freestanding.c - the libc subset of Hexagon executables (see
 * include/README.md): program entry, Linux system calls through trap0(#1)
 * (r6 = number, arguments in r0-r5, result in r0), memory from anonymous
 * mappings, string and number formatting, and the few math functions the
 * runtime and the microkernels call. For `--emit=exe` under
 * qemu-hexagon-static; not a general C library. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int errno;

/* asm-generic system call numbers (32-bit). */
enum {
  kUnlinkAt = 35,
  kOpenAt = 56,
  kClose = 57,
  kLlseek = 62,
  kRead = 63,
  kWrite = 64,
  kReadLinkAt = 78,
  kExitGroup = 94,
  kMunmap = 215,
  kMmap2 = 222,
  kMadvise = 233,
  kRenameAt2 = 276,
  kAtCwd = -100,
};

static long syscall6(long n, long a, long b, long c, long d, long e, long f) {
  register long r0 __asm__("r0") = a;
  register long r1 __asm__("r1") = b;
  register long r2 __asm__("r2") = c;
  register long r3 __asm__("r3") = d;
  register long r4 __asm__("r4") = e;
  register long r5 __asm__("r5") = f;
  register long r6 __asm__("r6") = n;
  __asm__ volatile("trap0(#1)"
                   : "+r"(r0)
                   : "r"(r1), "r"(r2), "r"(r3), "r"(r4), "r"(r5), "r"(r6)
                   : "memory");
  return r0;
}

/* A system call's result, or -1 with errno set. */
static long checked(long result) {
  if (result < 0 && result > -4096) {
    errno = (int)-result;
    return -1;
  }
  return result;
}

/* Program entry ----------------------------------------------------------- */

extern int main(int argc, char **argv);

void exit(int status) {
  fflush(stdout);
  fflush(stderr);
  for (;;)
    syscall6(kExitGroup, status, 0, 0, 0, 0, 0);
}

void abort(void) {
  static const char message[] = "abort\n";
  syscall6(kWrite, 2, (long)message, sizeof(message) - 1, 0, 0, 0);
  for (;;)
    syscall6(kExitGroup, 134, 0, 0, 0, 0, 0);
}

void spark_start_c(long *stack) {
  int argc = (int)stack[0];
  char **argv = (char **)(stack + 1);
  exit(main(argc, argv));
}

/* The kernel starts us with r29 (sp) at argc, argv... */
__asm__(".text\n"
        ".globl _start\n"
        ".type _start,@function\n"
        "_start:\n"
        "  r0 = r29\n"
        "  r29 = and(r29, #-8)\n"
        "  call spark_start_c\n");

/* Files ------------------------------------------------------------------ */

int open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  int mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
  va_end(args);
  return (int)checked(syscall6(kOpenAt, kAtCwd, (long)path, flags, mode, 0, 0));
}

int close(int fd) { return (int)checked(syscall6(kClose, fd, 0, 0, 0, 0, 0)); }

ssize_t read(int fd, void *buffer, size_t n) {
  return checked(syscall6(kRead, fd, (long)buffer, (long)n, 0, 0, 0));
}

ssize_t write(int fd, const void *buffer, size_t n) {
  return checked(syscall6(kWrite, fd, (long)buffer, (long)n, 0, 0, 0));
}

off_t lseek(int fd, off_t offset, int whence) {
  long long result = 0;
  if (checked(syscall6(kLlseek, fd, (long)(offset >> 32), (long)offset,
                       (long)&result, whence, 0)) < 0)
    return -1;
  return result;
}

int fstat(int fd, struct stat *st) {
  off_t here = lseek(fd, 0, SEEK_CUR);
  off_t size = lseek(fd, 0, SEEK_END);
  if (here < 0 || size < 0 || lseek(fd, here, SEEK_SET) < 0)
    return -1;
  st->st_size = size;
  st->st_mode = 0100000; /* a regular file */
  return 0;
}

ssize_t readlink(const char *path, char *buffer, size_t size) {
  return checked(
      syscall6(kReadLinkAt, kAtCwd, (long)path, (long)buffer, (long)size, 0, 0));
}

int rename(const char *from, const char *to) {
  return (int)checked(
      syscall6(kRenameAt2, kAtCwd, (long)from, kAtCwd, (long)to, 0, 0));
}

int remove(const char *path) {
  return (int)checked(syscall6(kUnlinkAt, kAtCwd, (long)path, 0, 0, 0, 0));
}

void *mmap(void *address, size_t length, int prot, int flags, int fd,
           off_t offset) {
  long result = syscall6(kMmap2, (long)address, (long)length, prot, flags, fd,
                         (long)(offset >> 12));
  if (result < 0 && result > -4096) {
    errno = (int)-result;
    return MAP_FAILED;
  }
  return (void *)result;
}

int munmap(void *address, size_t length) {
  return (int)checked(syscall6(kMunmap, (long)address, (long)length, 0, 0, 0, 0));
}

int madvise(void *address, size_t length, int advice) {
  return (int)checked(
      syscall6(kMadvise, (long)address, (long)length, advice, 0, 0, 0));
}

/* Memory: a bump allocator over anonymous mappings; free() keeps the
 * memory (these programs run one prompt and exit). Every block records its
 * size for realloc. ------------------------------------------------------ */

static char *arena_next, *arena_end;

static void *posix_memalign_raw(size_t alignment, size_t size) {
  if (alignment < 16)
    alignment = 16;
  uintptr_t start = ((uintptr_t)arena_next + 16 + alignment - 1) &
                    ~(uintptr_t)(alignment - 1);
  if (!arena_next || start + size > (uintptr_t)arena_end) {
    size_t chunk = size + alignment + 32 > (64u << 20) ? size + alignment + 32
                                                       : (64u << 20);
    void *block = mmap(NULL, chunk, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
      return NULL;
    arena_next = (char *)block;
    arena_end = arena_next + chunk;
    start = ((uintptr_t)arena_next + 16 + alignment - 1) &
            ~(uintptr_t)(alignment - 1);
  }
  ((size_t *)start)[-1] = size;
  arena_next = (char *)(start + size);
  return (void *)start;
}

void *malloc(size_t size) { return posix_memalign_raw(16, size); }

void *calloc(size_t count, size_t size) {
  void *p = malloc(count * size);
  if (p)
    memset(p, 0, count * size); /* mmap'd pages are zero, reused ones not */
  return p;
}

void *realloc(void *p, size_t size) {
  void *q = malloc(size);
  if (q && p) {
    size_t old = ((size_t *)p)[-1];
    memcpy(q, p, old < size ? old : size);
  }
  return q;
}

void free(void *p) { (void)p; }

int posix_memalign(void **out, size_t alignment, size_t size) {
  *out = posix_memalign_raw(alignment, size);
  return *out ? 0 : ENOMEM;
}

char *getenv(const char *name) {
  (void)name;
  return NULL;
}

int abs(int v) { return v < 0 ? -v : v; }

/* Strings ----------------------------------------------------------------- */

void *memcpy(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  while (n--)
    *d++ = *s++;
  return dst;
}

void *memmove(void *dst, const void *src, size_t n) {
  char *d = dst;
  const char *s = src;
  if (d < s)
    while (n--)
      *d++ = *s++;
  else
    while (n--)
      d[n] = s[n];
  return dst;
}

void *memset(void *dst, int c, size_t n) {
  unsigned char *d = dst;
  while (n--)
    *d++ = (unsigned char)c;
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n--; ++x, ++y)
    if (*x != *y)
      return *x - *y;
  return 0;
}

void *memchr(const void *s, int c, size_t n) {
  const unsigned char *p = s;
  for (; n--; ++p)
    if (*p == (unsigned char)c)
      return (void *)p;
  return NULL;
}

size_t strlen(const char *s) {
  size_t n = 0;
  while (s[n])
    ++n;
  return n;
}

int strcmp(const char *a, const char *b) {
  while (*a && *a == *b)
    ++a, ++b;
  return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n) {
  for (; n && *a && *a == *b; --n)
    ++a, ++b;
  return n ? (unsigned char)*a - (unsigned char)*b : 0;
}

char *strchr(const char *s, int c) {
  for (;; ++s) {
    if (*s == (char)c)
      return (char *)s;
    if (!*s)
      return NULL;
  }
}

char *strrchr(const char *s, int c) {
  const char *last = NULL;
  for (;; ++s) {
    if (*s == (char)c)
      last = s;
    if (!*s)
      return (char *)last;
  }
}

size_t strcspn(const char *s, const char *reject) {
  size_t n = 0;
  while (s[n] && !strchr(reject, s[n]))
    ++n;
  return n;
}

char *strerror(int error) {
  switch (error) {
  case ENOENT:
    return "No such file or directory";
  case EACCES:
    return "Permission denied";
  case ENOMEM:
    return "Out of memory";
  case EINVAL:
    return "Invalid argument";
  default:
    return "I/O error";
  }
}

/* Numbers ----------------------------------------------------------------- */

long long strtoll(const char *s, char **end, int base) {
  (void)base; /* decimal only */
  const char *p = s;
  while (*p == ' ' || *p == '\t')
    ++p;
  int negative = *p == '-';
  if (*p == '-' || *p == '+')
    ++p;
  const char *digits = p;
  unsigned long long value = 0;
  int overflow = 0;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (value > (0x7fffffffffffffffull - (unsigned)(*p - '0')) / 10)
      overflow = 1;
    value = value * 10 + (unsigned)(*p - '0');
  }
  if (p == digits)
    p = s;
  if (end)
    *end = (char *)p;
  if (overflow) {
    errno = ERANGE;
    return negative ? (-0x7fffffffffffffffll - 1) : 0x7fffffffffffffffll;
  }
  return negative ? -(long long)value : (long long)value;
}

long strtol(const char *s, char **end, int base) {
  return (long)strtoll(s, end, base);
}

double strtod(const char *s, char **end) {
  const char *p = s;
  int negative = *p == '-';
  if (*p == '-' || *p == '+')
    ++p;
  const char *start = p;
  double value = 0.0, scale = 1.0;
  for (; *p >= '0' && *p <= '9'; ++p)
    value = value * 10.0 + (*p - '0');
  if (*p == '.')
    for (++p; *p >= '0' && *p <= '9'; ++p)
      value += (*p - '0') * (scale *= 0.1);
  if (p == start || (p == start + 1 && *start == '.'))
    p = s;
  if (end)
    *end = (char *)p;
  return negative ? -value : value;
}

float fabsf(float x) { return x < 0.0f ? -x : x; }
double fabs(double x) { return x < 0.0 ? -x : x; }
float fmaxf(float a, float b) { return a != a ? b : (b != b ? a : (a > b ? a : b)); }

/* Round half to even, as rint() in the default rounding mode. */
float nearbyintf(float x) {
  float a = fabsf(x);
  if (!(a < 8388608.0f))
    return x; /* already integral (or NaN) */
  float r = (float)(int)(a + 0.5f);
  if (r - a == 0.5f && ((int)r & 1))
    r -= 1.0f;
  return x < 0.0f ? -r : r;
}

float sqrtf(float x) {
  if (!(x > 0.0f))
    return x == 0.0f ? x : NAN;
  if (isinf(x))
    return x;
  /* Newton on a power-of-two start. */
  float r = x > 1.0f ? x : 1.0f;
  for (int i = 0; i < 64; ++i) {
    float next = 0.5f * (r + x / r);
    if (next == r)
      break;
    r = next;
  }
  return r;
}

float expf(float x) {
  if (x != x)
    return x;
  if (x > 88.72f)
    return INFINITY;
  if (x < -103.97f)
    return 0.0f;
  /* e^x = 2^k e^r, |r| <= ln2 / 2. */
  const float ln2 = 0.69314718056f;
  int k = (int)(x / ln2 + (x < 0 ? -0.5f : 0.5f));
  float r = x - (float)k * ln2;
  float term = 1.0f, sum = 1.0f;
  for (int i = 1; i < 12; ++i) {
    term *= r / (float)i;
    sum += term;
  }
  union {
    float f;
    uint32_t u;
  } scale;
  while (k > 127) {
    sum *= 1.7014118e38f;
    k -= 127;
  }
  while (k < -126) {
    sum *= 1.1754944e-38f;
    k += 126;
  }
  scale.u = (uint32_t)(k + 127) << 23;
  return sum * scale.f;
}

/* Formatting: %d %u %x %s %c %% with l, ll, z and 0-padded widths, %.Ns
 * and %.*s (what the runtime, the runner and Halide's runtime print). */

typedef struct sink {
  char *buffer;
  size_t size, length;
} sink;

static void put(sink *s, char c) {
  if (s->length + 1 < s->size)
    s->buffer[s->length] = c;
  ++s->length;
}

static void put_number(sink *s, unsigned long long v, int negative, int base,
                       int width, char pad) {
  char digits[24];
  int n = 0;
  do {
    unsigned long long q = 0, r = v;
    /* v / base without a 64-bit division routine */
    for (int bit = 63; bit >= 0; --bit) {
      unsigned long long t = r >> bit;
      if (t >= (unsigned long long)base) {
        r -= (unsigned long long)base << bit;
        q |= 1ull << bit;
      }
    }
    digits[n++] = "0123456789abcdef"[r];
    v = q;
  } while (v);
  int length = n + negative;
  if (negative && pad == '0')
    put(s, '-');
  for (; length < width; ++length)
    put(s, pad);
  if (negative && pad != '0')
    put(s, '-');
  while (n)
    put(s, digits[--n]);
}

int vsnprintf(char *buffer, size_t size, const char *format, va_list args) {
  sink s = {buffer, size, 0};
  for (const char *p = format; *p; ++p) {
    if (*p != '%') {
      put(&s, *p);
      continue;
    }
    ++p;
    char pad = ' ';
    int width = 0, precision = -1, longs = 0, sized = 0;
    if (*p == '0')
      pad = '0', ++p;
    while (*p >= '0' && *p <= '9')
      width = width * 10 + (*p++ - '0');
    if (*p == '.') {
      ++p;
      if (*p == '*') {
        precision = va_arg(args, int);
        ++p;
      } else {
        precision = 0;
        while (*p >= '0' && *p <= '9')
          precision = precision * 10 + (*p++ - '0');
      }
    }
    for (; *p == 'l' || *p == 'z'; ++p)
      *p == 'l' ? ++longs : ++sized;
    switch (*p) {
    case 'd':
    case 'i': {
      long long v = longs >= 2 ? va_arg(args, long long)
                    : longs   ? va_arg(args, long)
                              : va_arg(args, int);
      put_number(&s, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v,
                 v < 0, 10, width, pad);
      break;
    }
    case 'u':
    case 'x': {
      unsigned long long v = longs >= 2 ? va_arg(args, unsigned long long)
                             : longs || sized ? va_arg(args, unsigned long)
                                              : va_arg(args, unsigned);
      put_number(&s, v, 0, *p == 'x' ? 16 : 10, width, pad);
      break;
    }
    case 'p':
      put(&s, '0');
      put(&s, 'x');
      put_number(&s, (uintptr_t)va_arg(args, void *), 0, 16, 0, ' ');
      break;
    case 's': {
      const char *text = va_arg(args, const char *);
      if (!text)
        text = "(null)";
      for (int i = 0; text[i] && (precision < 0 || i < precision); ++i)
        put(&s, text[i]);
      break;
    }
    case 'c':
      put(&s, (char)va_arg(args, int));
      break;
    case 'f':
    case 'g': {
      /* Rarely printed here: fixed, 6 decimals. */
      double v = va_arg(args, double);
      if (v < 0)
        put(&s, '-'), v = -v;
      unsigned long long whole = (unsigned long long)v;
      put_number(&s, whole, 0, 10, 0, ' ');
      put(&s, '.');
      put_number(&s, (unsigned long long)((v - (double)whole) * 1e6), 0, 10, 6,
                 '0');
      break;
    }
    case '%':
      put(&s, '%');
      break;
    default:
      put(&s, '%');
      if (*p)
        put(&s, *p);
      else
        --p;
    }
  }
  if (size)
    buffer[s.length < size ? s.length : size - 1] = 0;
  return (int)s.length;
}

int snprintf(char *buffer, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(buffer, size, format, args);
  va_end(args);
  return n;
}

/* Streams: unbuffered writes to a file descriptor. ------------------------ */

struct spark_file {
  int fd;
};

static FILE files[3] = {{0}, {1}, {2}};
FILE *stdin = &files[0], *stdout = &files[1], *stderr = &files[2];

FILE *fopen(const char *path, const char *mode) {
  int flags = mode[0] == 'r' ? O_RDONLY : (O_WRONLY | O_CREAT | O_TRUNC);
  int fd = open(path, flags | O_CLOEXEC, 0644);
  if (fd < 0)
    return NULL;
  FILE *f = malloc(sizeof(FILE));
  f->fd = fd;
  return f;
}

int fclose(FILE *f) { return close(f->fd); }

size_t fwrite(const void *data, size_t size, size_t count, FILE *f) {
  const char *p = data;
  size_t total = size * count, done = 0;
  while (done < total) {
    ssize_t n = write(f->fd, p + done, total - done);
    if (n <= 0)
      break;
    done += (size_t)n;
  }
  return size ? done / size : 0;
}

int fflush(FILE *f) {
  (void)f;
  return 0;
}

int fputs(const char *s, FILE *f) {
  return fwrite(s, 1, strlen(s), f) == strlen(s) ? 0 : EOF;
}

int vfprintf(FILE *f, const char *format, va_list args) {
  char text[2048];
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(text, sizeof(text), format, copy);
  va_end(copy);
  fwrite(text, 1, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1, f);
  return n;
}

int fprintf(FILE *f, const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vfprintf(f, format, args);
  va_end(args);
  return n;
}

int printf(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vfprintf(stdout, format, args);
  va_end(args);
  return n;
}

/* What Halide's noos runtime expects of its host. ------------------------- */

void halide_print(void *user_context, const char *message) {
  (void)user_context;
  fputs(message, stderr);
}

void halide_error(void *user_context, const char *message) {
  (void)user_context;
  fputs(message, stderr);
}

/* Compiler support routines (compiler-rt's Hexagon builtins are not in
 * Debian): integer division, f32 division and square root, and the f64
 * arithmetic Halide's runtime uses to print numbers in messages, done at f32
 * precision. None of these may use the operation it implements. ---------- */

static unsigned udivmod(unsigned n, unsigned d, unsigned *remainder) {
  unsigned q = 0, r = 0;
  for (int bit = 31; bit >= 0; --bit) {
    r = (r << 1) | ((n >> bit) & 1u);
    if (r >= d) {
      r -= d;
      q |= 1u << bit;
    }
  }
  *remainder = r;
  return q;
}

unsigned __hexagon_udivsi3(unsigned n, unsigned d) {
  unsigned r;
  return udivmod(n, d, &r);
}

unsigned __hexagon_umodsi3(unsigned n, unsigned d) {
  unsigned r;
  udivmod(n, d, &r);
  return r;
}

int __hexagon_divsi3(int n, int d) {
  unsigned r;
  unsigned q = udivmod(n < 0 ? 0u - (unsigned)n : (unsigned)n,
                       d < 0 ? 0u - (unsigned)d : (unsigned)d, &r);
  return (n < 0) != (d < 0) ? -(int)q : (int)q;
}

int __hexagon_modsi3(int n, int d) {
  unsigned r;
  udivmod(n < 0 ? 0u - (unsigned)n : (unsigned)n,
          d < 0 ? 0u - (unsigned)d : (unsigned)d, &r);
  return n < 0 ? -(int)r : (int)r;
}

typedef union {
  float f;
  uint32_t u;
} float_bits;

/* 2^e as a float, for -126 <= e <= 127. */
static float power_of_two(int e) {
  float_bits p;
  p.u = (uint32_t)(e + 127) << 23;
  return p.f;
}

/* a / b: the reciprocal of b's mantissa by Newton's method, then exponents
 * put back in steps that cannot overflow early. Within 1-2 ulp. */
float __hexagon_divsf3(float a, float b) {
  float_bits fb = {b};
  const uint32_t sign = (((float_bits){a}).u ^ fb.u) & 0x80000000u;
  if (a != a || b != b)
    return NAN;
  float_bits result;
  if (isinf(b)) {
    result.f = isinf(a) ? NAN : 0.0f;
  } else if (b == 0.0f) {
    result.f = a == 0.0f ? NAN : INFINITY;
  } else if (isinf(a) || a == 0.0f) {
    result.f = fabsf(a);
  } else {
    float m = fabsf(b);
    int e = 0;
    if (m < 1.1754944e-38f) { /* subnormal: scale up by 2^64 */
      m *= 1.8446744e19f;
      e = -64;
    }
    fb.f = m;
    e += (int)((fb.u >> 23) & 0xff) - 127;
    fb.u = (fb.u & 0x007fffffu) | 0x3f800000u; /* m in [1, 2) */
    m = fb.f;
    float r = 1.4571068f - 0.5f * m;
    for (int i = 0; i < 5; ++i)
      r = r * (2.0f - m * r);
    float q = fabsf(a) * r; /* |a| / mantissa(b) */
    /* q * 2^-e, in two halves so neither step overflows before the end. */
    int half = -e / 2;
    if (half > 127) half = 127;
    if (half < -126) half = -126;
    int rest = -e - half;
    if (rest > 127) rest = 127;
    if (rest < -126) rest = -126;
    result.f = q * power_of_two(half) * power_of_two(rest);
  }
  result.u |= sign;
  return result.f;
}

float __hexagon_sqrtf(float x) { return sqrtf(x); }

double __hexagon_muldf3(double a, double b) { return (double)((float)a * (float)b); }
double __hexagon_divdf3(double a, double b) {
  return (double)__hexagon_divsf3((float)a, (float)b);
}

void *__hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void *dst,
                                                            const void *src,
                                                            size_t n) {
  return memcpy(dst, src, n);
}

float floorf(float x) {
  if (!(fabsf(x) < 8388608.0f))
    return x; /* integral, infinite or NaN */
  float t = (float)(int)x; /* toward zero */
  return t > x ? t - 1.0f : t;
}

int atoi(const char *s) { return (int)strtoll(s, NULL, 10); }

/* What Halide's Hexagon runtime asks of QuRT and the HAP library: on a DSP
 * they lock the HVX units and reserve VTCM; here there is nothing to lock
 * and no VTCM (the kernels do not ask for it). */
int qurt_hvx_lock(int mode) {
  (void)mode;
  return 0;
}
int qurt_hvx_unlock(void) { return 0; }
void *HAP_request_VTCM(unsigned size, unsigned single_page) {
  (void)size;
  (void)single_page;
  return NULL;
}
int HAP_release_VTCM(void *p) {
  (void)p;
  return 0;
}
