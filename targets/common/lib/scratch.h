/* scratch.h - the microkernels' work buffers (input codes, attention scores,
 * partial sums), kept by each thread between calls.
 *
 * A decode step of the 1.7b made about 400 allocations, each matrix call and
 * each attention call or task getting its buffers from posix_memalign or
 * malloc and giving them back (w4a8: 169 posix_memalign and 226 malloc a
 * token; w4a16: 395 posix_memalign). A thread now keeps up to
 * kSparkScratchSlots of its freed blocks of at most SPARK_SCRATCH_KEEP bytes
 * and hands the smallest that fits to its next request, so a step takes the
 * same blocks as the one before it and allocates nothing. Blocks are sized
 * in powers of two from 4 KiB, so that requests of one size class share
 * them; larger blocks (a long prompt's) go back to the C library at once.
 *
 * The cache is per thread and per file that includes this header (a static
 * in each), so no lock is taken; a thread's blocks are freed when it exits
 * (a pthread key's destructor). The Hexagon builds are single-threaded and
 * freestanding: one cache, no destructor. Every block is 128-byte aligned
 * (a cache line pair, and an HVX vector). */
#ifndef SPARK_SCRATCH_H
#define SPARK_SCRATCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#if !defined(__hexagon__)
#include <pthread.h>
#endif

enum { kSparkScratchSlots = 8, kSparkScratchAlign = 128 };
#define SPARK_SCRATCH_KEEP ((size_t)1 << 20)
#define SPARK_SCRATCH_MIN ((size_t)4096)

typedef struct spark_scratch_cache {
  void *blocks[kSparkScratchSlots]; /* kept blocks (their headers), or NULL */
  int registered; /* the thread's destructor is set (not on Hexagon) */
} spark_scratch_cache;

#if defined(__hexagon__)
static spark_scratch_cache spark_scratch_mine;
#else
static __thread spark_scratch_cache spark_scratch_mine;
static pthread_once_t spark_scratch_once = PTHREAD_ONCE_INIT;
static pthread_key_t spark_scratch_key;

static inline void spark_scratch_release(void *cache) {
  spark_scratch_cache *c = (spark_scratch_cache *)cache;
  for (int i = 0; i < kSparkScratchSlots; ++i) {
    free(c->blocks[i]);
    c->blocks[i] = NULL;
  }
}

static inline void spark_scratch_make_key(void) {
  if (pthread_key_create(&spark_scratch_key, spark_scratch_release) != 0)
    spark_scratch_key = (pthread_key_t)-1;
}
#endif

/* A block's size in bytes, stored in its header. */
static inline size_t spark_scratch_size(const void *header) {
  return *(const size_t *)header;
}

/* Sets *block to a 128-byte aligned buffer of at least `bytes` bytes
 * (uninitialized) and returns 0, or returns -1 with *block NULL. Give it back
 * with spark_scratch_put. */
static inline int spark_scratch_get(void **block, size_t bytes) {
  spark_scratch_cache *c = &spark_scratch_mine;
  int best = -1;
  for (int i = 0; i < kSparkScratchSlots; ++i)
    if (c->blocks[i] && spark_scratch_size(c->blocks[i]) >= bytes &&
        (best < 0 || spark_scratch_size(c->blocks[i]) <
                         spark_scratch_size(c->blocks[best])))
      best = i;
  if (best >= 0) {
    *block = (uint8_t *)c->blocks[best] + kSparkScratchAlign;
    c->blocks[best] = NULL;
    return 0;
  }
  size_t size = bytes;
  if (size <= SPARK_SCRATCH_KEEP) {
    size = SPARK_SCRATCH_MIN;
    while (size < bytes)
      size *= 2;
  }
  void *header = NULL;
  *block = NULL;
  if (size > SIZE_MAX - kSparkScratchAlign ||
      posix_memalign(&header, kSparkScratchAlign, size + kSparkScratchAlign) !=
          0)
    return -1;
  *(size_t *)header = size;
  *block = (uint8_t *)header + kSparkScratchAlign;
  return 0;
}

/* spark_scratch_get as malloc: the block, or NULL. */
static inline void *spark_scratch_alloc(size_t bytes) {
  void *block;
  return spark_scratch_get(&block, bytes) == 0 ? block : NULL;
}

/* Gives a block from spark_scratch_get back (NULL: nothing): kept for the
 * thread's next requests if it is small enough and a slot is free (or holds
 * a smaller block, which is freed), else freed. */
static inline void spark_scratch_put(void *block) {
  if (!block)
    return;
  void *header = (uint8_t *)block - kSparkScratchAlign;
  const size_t size = spark_scratch_size(header);
  spark_scratch_cache *c = &spark_scratch_mine;
  if (size <= SPARK_SCRATCH_KEEP) {
#if !defined(__hexagon__)
    if (!c->registered) {
      pthread_once(&spark_scratch_once, spark_scratch_make_key);
      if (spark_scratch_key == (pthread_key_t)-1 ||
          pthread_setspecific(spark_scratch_key, c) != 0) {
        free(header); /* no destructor: keep nothing */
        return;
      }
      c->registered = 1;
    }
#endif
    int slot = -1; /* a free slot, else the one of the smallest block */
    for (int i = 0; i < kSparkScratchSlots; ++i) {
      if (!c->blocks[i]) {
        slot = i;
        break;
      }
      if (slot < 0 || spark_scratch_size(c->blocks[i]) <
                          spark_scratch_size(c->blocks[slot]))
        slot = i;
    }
    if (!c->blocks[slot] || spark_scratch_size(c->blocks[slot]) < size) {
      free(c->blocks[slot]);
      c->blocks[slot] = header;
      return;
    }
  }
  free(header);
}

#endif /* SPARK_SCRATCH_H */
