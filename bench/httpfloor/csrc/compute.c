/* compute.c: a stand-in for one inference, shared by every server of httpfloor.
   kiln_floor_compute(us) keeps the calling thread and one helper thread busy for `us`
   microseconds, the way a model's kernels keep kiln's two-thread pool busy. The helper
   idles like kiln's pool worker (codegen's cPool): it spins about 2 ms, yielding the core
   every 256 pauses, then sleeps on a futex. */
#define _GNU_SOURCE
#include <pthread.h>
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

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void busy_until(long long end) {
  while (now_ns() < end) relax();
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
    busy_until(__atomic_load_n(&end_ns, __ATOMIC_ACQUIRE)); /* a late helper still ends on time */
    __atomic_store_n(&done, seen, __ATOMIC_RELEASE);
  }
  return 0;
}

int kiln_floor_compute(long long us) {
  if (!started) {
    pthread_t th;
    if (pthread_create(&th, 0, helper, 0) != 0) return 1;
    started = 1;
  }
  long long end = now_ns() + us * 1000;
  __atomic_store_n(&end_ns, end, __ATOMIC_RELEASE);
  int g = __atomic_add_fetch(&gen, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &gen, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
  busy_until(end);
  while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != g) relax();
  return 0;
}
