package codegen

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// scratchDriver exercises the runtime's scratch allocator (cScratch) from one caller and
// then from four threads at once; it prints "ok" or the first check that failed. It
// includes the runtime's source, so that it reads the allocator's counters directly.
const scratchDriver = `
#include "runtime.c"
#include <stdio.h>
#include <string.h>
#define MiB (1LL << 20)
#define CHECK(c) do { if (!(c)) { printf("failed at line %d: %s\n", __LINE__, #c); return 1; } } while (0)
static int kept(void) { int k = 0; for (int i = 0; i < KILN_SCRATCH_SLOTS; i++) k += kiln_scratch.raw[i] != 0; return k; }
static int bad;
static void *worker(void *arg) {
  long id = (long)arg;
  for (int r = 0; r < 40; r++) {
    i64 n = (33 + (id + r) % 5) * MiB;
    unsigned char *p = kiln_scratch_alloc(n);
    if (!p || ((u64)p & 63)) { __atomic_store_n(&bad, 1, __ATOMIC_RELAXED); return 0; }
    memset(p, (int)id, (size_t)n); /* another thread holding the same block would overwrite it */
    for (i64 k = 0; k < n; k += 4096) if (p[k] != (unsigned char)id || p[n - 1] != (unsigned char)id) { __atomic_store_n(&bad, 1, __ATOMIC_RELAXED); break; }
    kiln_scratch_free(p);
  }
  return 0;
}
int main(void) {
  /* small blocks: aligned, distinct, never kept */
  char *a = kiln_scratch_alloc(100), *b = kiln_scratch_alloc(1 << 20);
  CHECK(a && b && a != b && ((u64)a & 63) == 0 && ((u64)b & 63) == 0);
  memset(a, 1, 100); memset(b, 2, 1 << 20);
  kiln_scratch_free(a); kiln_scratch_free(b); kiln_scratch_free(0);
  CHECK(kept() == 0 && kiln_scratch.bytes == 0);
  /* a large block is kept on free and handed to the next request it fits */
  char *big = kiln_scratch_alloc(40 * MiB);
  CHECK(big && ((u64)big & 63) == 0);
  memset(big, 3, 40 * MiB);
  kiln_scratch_free(big);
  CHECK(kept() == 1 && kiln_scratch.bytes >= 40 * MiB);
  char *again = kiln_scratch_alloc(35 * MiB);
  CHECK(again == big && kept() == 0 && kiln_scratch.bytes == 0);
  /* a request larger than every kept block maps its own */
  kiln_scratch_free(again);
  char *larger = kiln_scratch_alloc(50 * MiB);
  CHECK(larger && larger != big && kept() == 1);
  /* the smallest kept block that fits is taken */
  kiln_scratch_free(larger);
  CHECK(kept() == 2);
  char *fit = kiln_scratch_alloc(39 * MiB);
  CHECK(fit == big && kept() == 1);
  kiln_scratch_free(fit);
  /* at most KILN_SCRATCH_KEEP bytes are kept: with 40 + 50 MiB kept, of two freed
     blocks of 100 MiB the first is kept and the second is not */
  char *h1 = kiln_scratch_alloc(100 * MiB), *h2 = kiln_scratch_alloc(100 * MiB);
  CHECK(h1 && h2 && h1 != h2 && kept() == 2);
  kiln_scratch_free(h1);
  CHECK(kept() == 3);
  kiln_scratch_free(h2);
  CHECK(kept() == 3 && kiln_scratch.bytes > 190 * MiB && kiln_scratch.bytes < 191 * MiB);
  /* release hands every kept block back */
  kiln_scratch_release();
  CHECK(kept() == 0 && kiln_scratch.bytes == 0);
  /* four threads at once: no block handed to two of them */
  kiln_thread_t th[4];
  for (long i = 0; i < 4; i++) CHECK(pthread_create(&th[i], 0, worker, (void *)i) == 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], 0);
  CHECK(!bad && kiln_scratch.bytes <= KILN_SCRATCH_KEEP && kept() <= KILN_SCRATCH_SLOTS);
  kiln_scratch_release();
  printf("ok\n");
  return 0;
}
`

// TestScratchKeepsLargeBlocks: the runtime's scratch allocator gives 64-byte aligned
// blocks; it keeps a freed block of KILN_SCRATCH_MIN bytes or more (never a small one)
// and hands it to the next request it fits, the smallest that fits first; it keeps no
// more than KILN_SCRATCH_KEEP bytes; kiln_scratch_release frees what it keeps; and four
// threads allocating and freeing large blocks at once never share one.
func TestScratchKeepsLargeBlocks(t *testing.T) {
	bin := buildDriver(t, "scratch", scratchDriver)
	out, err := exec.Command(bin).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(out) == 0 {
		t.Fatalf("scratch driver: %v\n%s", err, ee.Stderr)
	}
	if got := strings.TrimSpace(string(out)); got != "ok" {
		t.Fatalf("scratch driver: %s", got)
	}
}
