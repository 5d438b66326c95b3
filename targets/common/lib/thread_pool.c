/* thread_pool.c - the model library's parallel loops (halide_do_par_for of
 * its Halide kernels and microkernels) on a pool of workers that spin
 * between the calls of a step.
 *
 * A decode step of the 1.7b makes about 150 parallel calls of 20-300 us
 * each. Halide's own pool puts its workers to sleep on a condition variable
 * between them; waking one costs a futex call and, in a VM, an
 * inter-processor interrupt, tens of microseconds per call. Here the workers
 * spin (with pause) on a generation counter for up to kSpinNs after their
 * last task, so the calls of a step find them awake; after that they sleep,
 * and a call wakes the sleepers.
 *
 * A call's tasks are split into one contiguous range per thread (each
 * thread streams its own part of a weight matrix), and a thread that is
 * done takes what is left of the others'. One call uses the pool at a time: a
 * call made while it is busy (another session's step, or a parallel loop inside
 * a task) runs its tasks on the calling thread, in order. Workers are started
 * on the first call that wants them and live as long as the process. Compiled
 * into every model library of the CPU targets (the Hexagon builds are
 * single-threaded). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "HalideRuntime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPARK_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define SPARK_PAUSE() __asm__ __volatile__("yield")
#else
#define SPARK_PAUSE() ((void)0)
#endif

enum { kMaxWorkers = 63 };
static const int64_t kSpinNs = 2000000; /* 2 ms */

/* A range's next task, alone in its 128 bytes (two cache lines, which some
 * cores fetch in pairs): each thread takes every task of its own range from
 * its counter, and counters that shared a line moved that line between the
 * cores on every task. A harness of this file's pool, 2 threads, calls of 32
 * tasks of 1.1 us (AMD EPYC Zen 4, 2-core VM, 2026-12-07): 20.2-21.3 us a
 * call with the counters side by side, 18.8-21.1 apart (17.6 the tasks'
 * own time). */
typedef struct range_counter {
  _Alignas(128) atomic_int next;
} range_counter;

/* The tasks of a call are split into one contiguous range per thread, so
 * that each thread streams its own part of a weight matrix; a thread that
 * finishes its range takes tasks from the others' (a worker that does not
 * join leaves its range to them). */
typedef struct pool_job {
  halide_task_t task;
  void *user_context;
  uint8_t *closure;
  int min, size, parts;
  atomic_int error;                     /* the first nonzero task result */
  range_counter range[kMaxWorkers + 1]; /* each range's next task */
} pool_job;

/* Range p: tasks [p * size / parts, (p + 1) * size / parts). */
static int range_end(const pool_job *job, int p) {
  return (int)((int64_t)(p + 1) * job->size / job->parts);
}

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  atomic_int threads;      /* wanted, the calling thread included */
  atomic_int started;      /* workers running */
  atomic_int busy;         /* a call holds the pool */
  atomic_uint generation;  /* bumped for every job */
  _Atomic(pool_job *) job; /* the job of the current generation, or NULL */
  atomic_int active;       /* workers between joining and leaving a job */
  atomic_int sleepers;     /* workers asleep on `wake` */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Runs the tasks of range `own`, then those left in the others. */
static void run_tasks(pool_job *job, int own) {
  for (int r = 0; r < job->parts; ++r) {
    const int p = (own + r) % job->parts, end = range_end(job, p);
    for (;;) {
      const int i = atomic_fetch_add(&job->range[p].next, 1);
      if (i >= end)
        break;
      const int rc = job->task(job->user_context, job->min + i, job->closure);
      if (rc != 0) {
        int expected = 0;
        atomic_compare_exchange_strong(&job->error, &expected, rc);
      }
    }
  }
}

static void *worker(void *arg) {
  const int index = (int)(intptr_t)arg;
  unsigned seen = atomic_load(&pool.generation);
  for (;;) {
    /* Spin for the next job, then sleep until one is posted. */
    int64_t since = now_ns();
    for (unsigned spins = 0; atomic_load(&pool.generation) == seen; ++spins) {
      SPARK_PAUSE();
      if (spins % 64 == 63 && now_ns() - since > kSpinNs) {
        pthread_mutex_lock(&pool.lock);
        atomic_fetch_add(&pool.sleepers, 1);
        while (atomic_load(&pool.generation) == seen)
          pthread_cond_wait(&pool.wake, &pool.lock);
        atomic_fetch_sub(&pool.sleepers, 1);
        pthread_mutex_unlock(&pool.lock);
        break;
      }
    }
    seen = atomic_load(&pool.generation);
    if (index + 1 >= atomic_load(&pool.threads))
      continue; /* fewer threads wanted now */
    /* `active` is raised before the job is read: the caller clears the job,
     * then waits for active == 0, so no worker holds a finished job. */
    atomic_fetch_add(&pool.active, 1);
    pool_job *job = atomic_load(&pool.job);
    if (job)
      run_tasks(job, (index + 1) % job->parts);
    atomic_fetch_sub(&pool.active, 1);
  }
  return NULL;
}

/* Starts workers up to threads - 1; returns how many run. */
static int start_workers(int threads) {
  int started = atomic_load(&pool.started);
  if (started >= threads - 1)
    return started;
  pthread_mutex_lock(&pool.lock);
  started = atomic_load(&pool.started);
  while (started < threads - 1 && started < kMaxWorkers) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    const int rc =
        pthread_create(&thread, &attr, worker, (void *)(intptr_t)started);
    pthread_attr_destroy(&attr);
    if (rc != 0)
      break; /* fewer workers; the calls still complete */
    atomic_store(&pool.started, ++started);
  }
  pthread_mutex_unlock(&pool.lock);
  return started;
}

static int serial(void *user_context, halide_task_t task, int min, int size,
                  uint8_t *closure) {
  for (int i = min; i < min + size; ++i) {
    const int rc = task(user_context, i, closure);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static int pool_do_par_for(void *user_context, halide_task_t task, int min,
                           int size, uint8_t *closure) {
  const int threads = atomic_load(&pool.threads);
  if (size <= 1 || threads <= 1)
    return serial(user_context, task, min, size, closure);
  int idle = 0;
  if (!atomic_compare_exchange_strong(&pool.busy, &idle, 1))
    return serial(user_context, task, min, size, closure);
  if (start_workers(threads) == 0) {
    atomic_store(&pool.busy, 0);
    return serial(user_context, task, min, size, closure);
  }
  pool_job job = {.task = task,
                  .user_context = user_context,
                  .closure = closure,
                  .min = min,
                  .size = size};
  job.parts = threads < size ? threads : size;
  for (int p = 0; p < job.parts; ++p)
    atomic_init(&job.range[p].next, p == 0 ? 0 : range_end(&job, p - 1));
  atomic_init(&job.error, 0);
  atomic_store(&pool.job, &job);
  atomic_fetch_add(&pool.generation, 1);
  if (atomic_load(&pool.sleepers) > 0) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
  }
  run_tasks(&job, 0);
  atomic_store(&pool.job, NULL);
  while (atomic_load(&pool.active) != 0)
    SPARK_PAUSE();
  atomic_store(&pool.busy, 0);
  return atomic_load(&job.error);
}

/* The number of threads the library's parallel loops use, the calling one
 * included (1: none started); also Halide's own pool's, for any loop that
 * does not go through halide_do_par_for. */
void spark_pool_set_threads(int threads) {
  if (threads < 1)
    threads = 1;
  if (threads > kMaxWorkers + 1)
    threads = kMaxWorkers + 1;
  atomic_store(&pool.threads, threads);
  halide_set_num_threads(threads);
  halide_set_custom_do_par_for(pool_do_par_for);
}
