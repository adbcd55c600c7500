/* compute.c: a stand-in for one inference, shared by every server of httpfloor.
   kiln_floor_compute(us, bytes, fixed) keeps the calling thread and one helper thread
   busy, the way a model's kernels keep kiln's two-thread pool busy. With bytes > 0 the
   two threads read a buffer of that many bytes (each its half, a cache line at a time,
   over and over), as a model streams its weights: the caches the server's own code and
   data were in are then as cold after the compute as after an inference. With 0 they
   only pause (or, with fixed, multiply), and a server's code stays cached.

   With fixed = 0 the compute lasts `us` microseconds, whatever the caches hold when it
   starts. With fixed = 1 it does a fixed amount of work, calibrated at the first call
   so that a back-to-back call's work takes `us` (as `kiln bench` times inferences back
   to back): a request that left the caches or the cores cold then makes it slower, as it
   makes an inference slower. The helper idles like kiln's pool worker (codegen's cPool):
   it spins about 2 ms, yielding the core every 256 pauses, then sleeps on a futex. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#if defined(__x86_64__)
#define relax() __builtin_ia32_pause()
#else
#define relax() sched_yield()
#endif

static int gen, done, started;
static long long end_ns; /* the current inference ends here, for both threads */
static volatile const char *mem; /* the footprint, read by both threads */
static long long mem_half;       /* bytes per thread */
static volatile long sink;
static long long units; /* with fixed work: units per thread per call (0: by the clock) */

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* busy_until spins until end: reading its half of the footprint (part 0 or 1), else
   pausing */
static void busy_until(long long end, int part) {
  if (mem_half <= 0) {
    while (now_ns() < end) relax();
    return;
  }
  const volatile char *p = mem + part * mem_half;
  long long i = 0;
  long s = 0;
  while (now_ns() < end) {
    for (int k = 0; k < 64; k++) {
      s += p[i];
      i += 64;
      if (i >= mem_half) i = 0;
    }
  }
  sink = s;
}

/* work does n units on its half of the footprint (part 0 or 1): 64 cache lines each, or
   64 multiplies without a footprint */
static void work(long long n, int part) {
  const volatile char *p = mem + part * mem_half;
  long long i = 0;
  long s = 1;
  for (long long u = 0; u < n; u++) {
    for (int k = 0; k < 64; k++) {
      if (mem_half > 0) {
        s = s * 31 + p[i];
        i += 64;
        if (i >= mem_half) i = 0;
      } else {
        s = s * 31 + k;
      }
    }
  }
  sink = s;
}

static void *helper(void *arg) {
  int seen = 0;
  (void)arg;
  for (;;) {
    long long idle_end = now_ns() + 2000000;
    for (int i = 0; __atomic_load_n(&gen, __ATOMIC_ACQUIRE) == seen; i++) {
      if ((i & 255) == 255) sched_yield(); else relax();
      if ((i & 255) == 0 && now_ns() > idle_end) {
        syscall(SYS_futex, &gen, FUTEX_WAIT_PRIVATE, seen, 0, 0, 0);
        idle_end = now_ns() + 2000000;
      }
    }
    seen = __atomic_load_n(&gen, __ATOMIC_ACQUIRE);
    if (units > 0)
      work(units, 1);
    else
      busy_until(__atomic_load_n(&end_ns, __ATOMIC_ACQUIRE), 1); /* a late helper still ends on time */
    __atomic_store_n(&done, seen, __ATOMIC_RELEASE);
  }
  return 0;
}

/* once runs one compute on both threads: by the clock for us, or units of work. It
   returns how long the calling thread's own part took, in ns: the helper's wake-up and
   lateness are not in it. */
static long long once(long long us) {
  long long start = now_ns(), end = start + us * 1000;
  __atomic_store_n(&end_ns, end, __ATOMIC_RELEASE);
  int g = __atomic_add_fetch(&gen, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &gen, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
  long long t0 = now_ns();
  if (units > 0)
    work(units, 0);
  else
    busy_until(end, 0);
  long long span = now_ns() - t0;
  while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != g) relax();
  return span;
}

/* calibrate sets units so that the calling thread's part of a call takes us
   microseconds, rescaling six times from a first guess by the fastest of 9 calls (after
   3 untimed). Timing the caller's own work, and taking the fastest, keeps the estimate
   from collapsing on a busy machine: a late helper or a preempted call adds time that
   does not scale with the units, and rescaling by a time that included it would shrink
   the work toward nothing (a loaded 2-core CI machine calibrated 1 ms down to 0.02 ms
   that way). */
static void calibrate(long long us) {
  units = 1000;
  for (int step = 0; step < 6; step++) {
    long long best = 0;
    for (int r = 0; r < 3; r++) once(us);
    for (int r = 0; r < 9; r++) {
      long long t = once(us);
      if (r == 0 || t < best) best = t;
    }
    long long n = (long long)((double)units * (double)(us * 1000) / (double)(best > 0 ? best : 1));
    units = n > 0 ? n : 1;
  }
}

int kiln_floor_compute(long long us, long long bytes, long long fixed) {
  if (!started) {
    if (bytes > 0) {
      char *m = calloc(1, bytes);
      if (!m) return 1;
      for (long long i = 0; i < bytes; i += 4096) m[i] = (char)i; /* touched: real pages */
      mem = m;
      mem_half = bytes / 2;
    }
    pthread_t th;
    if (pthread_create(&th, 0, helper, 0) != 0) return 1;
    started = 1;
    if (fixed) calibrate(us);
  }
  once(us);
  return 0;
}
