/* compute.c: a stand-in for one inference, shared by every server of httpfloor.
   kiln_floor_compute(us, bytes) keeps the calling thread and one helper thread busy for
   `us` microseconds, the way a model's kernels keep kiln's two-thread pool busy. With
   bytes > 0 the two threads spend that time reading a buffer of that many bytes (each
   its half, a cache line at a time, over and over), as a model streams its weights: the
   caches the server's own code and data were in are then as cold after the compute as
   after an inference. With 0 they only pause, and a server's code stays cached. The
   helper idles like kiln's pool worker (codegen's cPool): it spins about 2 ms, yielding
   the core every 256 pauses, then sleeps on a futex. */
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
    busy_until(__atomic_load_n(&end_ns, __ATOMIC_ACQUIRE), 1); /* a late helper still ends on time */
    __atomic_store_n(&done, seen, __ATOMIC_RELEASE);
  }
  return 0;
}

int kiln_floor_compute(long long us, long long bytes) {
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
  }
  long long end = now_ns() + us * 1000;
  __atomic_store_n(&end_ns, end, __ATOMIC_RELEASE);
  int g = __atomic_add_fetch(&gen, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &gen, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
  busy_until(end, 0);
  while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != g) relax();
  return 0;
}
