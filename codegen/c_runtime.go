package codegen

// ParallelRuntime is how generated C runs a parallel loop's chunks.
type ParallelRuntime uint8

const (
	// Pool: persistent workers per shared object, woken through a futex, one parallel
	// region at a time; a caller that finds the pool busy (another request's kernel is
	// using it) runs all its chunks itself, so concurrent requests spread across callers
	// instead of queueing for a team.
	Pool ParallelRuntime = iota
	// Spawn: a fresh fork-join of pthreads per parallel loop (kept for comparison:
	// kernelbench measures the three).
	Spawn
	// OpenMP: an omp parallel for over the chunks (compile with -fopenmp; libgomp keeps
	// its own team; kept for comparison).
	OpenMP
)

func (r ParallelRuntime) String() string { return [...]string{"pool", "spawn", "openmp"}[r] }

// COptions select code generation choices of the C dialect.
type COptions struct {
	Parallel ParallelRuntime
}

// cThreads declares the pthread entry points (no headers: see the package doc).
const cThreads = `typedef unsigned long kiln_thread_t;
extern int pthread_create(kiln_thread_t *, const void *, void *(*)(void *), void *);
extern int pthread_join(kiln_thread_t, void **);
`

// cPool is the thread pool runtime emitted into every translation unit that has a
// parallel loop under the Pool runtime. Workers are created on first use (up to the
// requested thread count), claim chunks dynamically, spin briefly after a region and
// then sleep on a futex; the host calls kiln_pool_shutdown before unloading the shared
// object.
const cPool = `extern long syscall(long, ...);
extern int sched_yield(void);
#if defined(__x86_64__)
#define KILN_SYS_FUTEX 202
#define kiln_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define KILN_SYS_FUTEX 98
#define kiln_relax() __asm__ __volatile__("yield")
#else
#define kiln_relax() sched_yield()
#endif
#define KILN_POOL_MAX 64
static void kiln_futex_wait(int *addr, int val) {
#ifdef KILN_SYS_FUTEX
  syscall(KILN_SYS_FUTEX, addr, 128 /* FUTEX_WAIT_PRIVATE */, val, (void *)0, (void *)0, 0);
#else
  (void)addr; (void)val; sched_yield();
#endif
}
static void kiln_futex_wake(int *addr) {
#ifdef KILN_SYS_FUTEX
  syscall(KILN_SYS_FUTEX, addr, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, (void *)0, (void *)0, 0);
#else
  (void)addr;
#endif
}
static struct {
  int busy, nworkers, stop, gen, pending, n, next, njobs;
  void *(*fn)(void *);
  char *envs;
  long size;
  int first_gen[KILN_POOL_MAX];
  kiln_thread_t th[KILN_POOL_MAX];
} kiln_pool;
static void kiln_run_chunks(void) {
  for (int i; (i = __atomic_fetch_add(&kiln_pool.next, 1, __ATOMIC_ACQ_REL)) < kiln_pool.njobs;)
    kiln_pool.fn(kiln_pool.envs + i * kiln_pool.size);
}
/* kiln_await returns once *addr differs from old (spinning first, then sleeping). */
static int kiln_await(int *addr, int old) {
  for (;;) {
    for (int i = 0; i < 2048; i++) {
      int v = __atomic_load_n(addr, __ATOMIC_ACQUIRE);
      if (v != old) return v;
      kiln_relax();
    }
    kiln_futex_wait(addr, old);
  }
}
static void *kiln_worker(void *arg) {
  int id = (int)(long)arg, seen = kiln_pool.first_gen[id];
  for (;;) {
    seen = kiln_await(&kiln_pool.gen, seen);
    if (__atomic_load_n(&kiln_pool.stop, __ATOMIC_ACQUIRE)) return 0;
    if (id < kiln_pool.n) kiln_run_chunks();
    if (__atomic_sub_fetch(&kiln_pool.pending, 1, __ATOMIC_ACQ_REL) == 0) kiln_futex_wake(&kiln_pool.pending);
  }
}
/* kiln_parallel runs fn on n envs (chunks of size bytes each) with up to nt threads: the
   caller and nt - 1 workers claim chunks in order until none is left, so a thread that
   starts late (its core busy elsewhere) takes fewer. */
static void kiln_parallel(void *(*fn)(void *), void *envs, long size, int n, int nt) {
  char *e = (char *)envs;
  if (nt > n) nt = n;
  if (nt <= 1 || __atomic_exchange_n(&kiln_pool.busy, 1, __ATOMIC_ACQUIRE)) {
    for (int i = 0; i < n; i++) fn(e + i * size);
    return;
  }
  while (kiln_pool.nworkers < nt - 1 && kiln_pool.nworkers < KILN_POOL_MAX - 1) {
    int id = kiln_pool.nworkers + 1;
    kiln_pool.first_gen[id] = kiln_pool.gen;
    if (pthread_create(&kiln_pool.th[id], 0, kiln_worker, (void *)(long)id) != 0) break;
    kiln_pool.nworkers++;
  }
  kiln_pool.fn = fn; kiln_pool.envs = e; kiln_pool.size = size; kiln_pool.njobs = n;
  kiln_pool.n = nt; /* workers 1 .. nt-1 take part */
  __atomic_store_n(&kiln_pool.next, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&kiln_pool.pending, kiln_pool.nworkers, __ATOMIC_RELAXED);
  if (kiln_pool.nworkers > 0) {
    __atomic_add_fetch(&kiln_pool.gen, 1, __ATOMIC_RELEASE);
    kiln_futex_wake(&kiln_pool.gen);
  }
  kiln_run_chunks();
  for (int p; (p = __atomic_load_n(&kiln_pool.pending, __ATOMIC_ACQUIRE)) != 0;) kiln_await(&kiln_pool.pending, p);
  __atomic_store_n(&kiln_pool.busy, 0, __ATOMIC_RELEASE);
}
int kiln_pool_shutdown(void) {
  while (__atomic_exchange_n(&kiln_pool.busy, 1, __ATOMIC_ACQUIRE)) sched_yield();
  __atomic_store_n(&kiln_pool.stop, 1, __ATOMIC_RELEASE);
  __atomic_add_fetch(&kiln_pool.gen, 1, __ATOMIC_RELEASE);
  kiln_futex_wake(&kiln_pool.gen);
  for (int i = 1; i <= kiln_pool.nworkers; i++) pthread_join(kiln_pool.th[i], 0);
  kiln_pool.nworkers = 0;
  __atomic_store_n(&kiln_pool.stop, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&kiln_pool.busy, 0, __ATOMIC_RELEASE);
  return 0;
}
`
