package codegen

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"
)

// poolDriver runs the pool's regions back to back from one caller, as a model's kernels
// do, and prints how many chunks ran, how many wake-up calls the pool made and how many
// of the chunks the workers ran. It includes the runtime's source, so that it reads the
// pool's counters directly.
const poolDriver = `
#include "runtime.c"
#include <stdio.h>
#include <stdlib.h>
struct env { long n; long sum; char pad[48]; };
static __thread int caller;
static long by_workers;
static void *chunk(void *p) {
  struct env *e = (struct env *)p;
  for (long i = 0; i < e->n; i++) e->sum += i;
  if (!caller) __atomic_add_fetch(&by_workers, 1, __ATOMIC_RELAXED);
  return 0;
}
int main(int argc, char **argv) {
  int regions = atoi(argv[1]), nt = atoi(argv[2]);
  struct env envs[8];
  long ran = 0;
  caller = 1;
  for (int r = 0; r < regions; r++) {
    for (int i = 0; i < 8; i++) { envs[i].n = 2000; envs[i].sum = 0; }
    kiln_parallel(chunk, envs, (long)sizeof(envs[0]), 8, nt);
    for (int i = 0; i < 8; i++) ran += envs[i].sum == 1999L * 2000 / 2;
  }
  printf("%ld %ld %ld\n", ran, kiln_pool.wakes, by_workers);
  return kiln_pool_shutdown();
}
`

// buildDriver builds a C driver program that includes the runtime's source as
// "runtime.c" with cc ($CC, else cc) and returns the executable's path.
func buildDriver(t *testing.T, what, driver string) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		testdata.NoCompiler(t, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "runtime.c"), []byte(CRuntime()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "driver.c"), []byte(driver), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "driver")
	if out, err := exec.Command(cc, "-O2", "-o", bin, filepath.Join(dir, "driver.c"), "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("building the %s driver: %v\n%s", what, err, out)
	}
	return bin
}

// runPool builds poolDriver and runs it; it returns the chunks run, the wake-up calls
// made and the chunks the workers ran.
func runPool(t *testing.T, regions, threads int) (ran, wakes, byWorkers int64) {
	t.Helper()
	bin := buildDriver(t, "pool", poolDriver)
	out, err := exec.Command(bin, strconv.Itoa(regions), strconv.Itoa(threads)).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("pool driver: %v\n%s", err, ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		t.Fatalf("pool driver printed %q", out)
	}
	var v [3]int64
	for i, s := range f {
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("pool driver printed %q", out)
		}
	}
	return v[0], v[1], v[2]
}

// TestPoolWakesOnlySleepingWorkers checks that back-to-back parallel regions, as a
// model's kernels launch them, run every chunk without a wake-up system call per region:
// a worker spinning between regions sees the new region by itself, and the caller calls
// the futex only when a worker has gone to sleep (after about 2 ms idle, or when the
// host took its core away for that long).
func TestPoolWakesOnlySleepingWorkers(t *testing.T) {
	const regions = 2000
	ran, wakes, byWorkers := runPool(t, regions, 2)
	if ran != 8*regions {
		t.Fatalf("%d chunks ran correctly, want %d", ran, 8*regions)
	}
	if wakes >= regions/4 {
		t.Errorf("%d wake-up calls for %d regions, want far fewer than one a region", wakes, regions)
	}
	t.Logf("%d regions: %d wake-up calls, %d of %d chunks run by the worker", regions, wakes, byWorkers, ran)
}

// TestPoolRunsEveryChunkOnceAtAnyThreadCount: each thread claims from its own range of
// a region's chunks and then from the others'; with 8 chunks over 3 threads (ranges of
// 2, 3 and 3), 8 threads (one chunk each) and 16 (more threads than chunks: the region
// uses 8), on a machine with fewer cores than threads, every chunk of every region runs
// exactly once (a chunk run twice or never leaves a wrong sum).
func TestPoolRunsEveryChunkOnceAtAnyThreadCount(t *testing.T) {
	const regions = 500
	for _, threads := range []int{3, 8, 16} {
		ran, _, byWorkers := runPool(t, regions, threads)
		if ran != 8*regions {
			t.Errorf("%d threads: %d chunks ran correctly, want %d", threads, ran, 8*regions)
		}
		t.Logf("%d threads: %d of %d chunks run by the workers", threads, byWorkers, ran)
	}
}
