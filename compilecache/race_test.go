package compilecache

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Two journals on one directory stand for two processes: each has its own file
// description of the journal, so their flocks exclude each other as between processes.

// A Put whose blob already exists (another entry has the same content) must not append
// its record after another process has removed that blob: an eviction dropped the only
// other entry naming it and deleted the file between the Put's look and its append.
// The journal then named a blob that was not there.
func TestPutRacingEvictionOfItsBlob(t *testing.T) {
	dir := t.TempDir()
	a, _ := openTest(t, dir, Options{})
	b, _ := openTest(t, dir, Options{})
	data := content(0, 300<<10, 11)
	m1, m2 := testMaterial("shared", "c1"), testMaterial("shared", "c2")
	if err := a.Put(m1, "one", data, 0); err != nil {
		t.Fatal(err)
	}
	evicted := false
	testHookPutBlobReady = func() {
		if evicted {
			return
		}
		evicted = true
		// b's Put saw the blob; now a evicts the only entry naming it
		if rep, err := a.GC(GCOptions{Budget: 1}); err != nil || rep.Evicted != 1 {
			t.Errorf("gc: %+v %v", rep, err)
		}
	}
	t.Cleanup(func() { testHookPutBlobReady = nil })
	if err := b.Put(m2, "two", data, 0); err != nil {
		t.Fatal(err)
	}
	if !evicted {
		t.Fatal("the hook did not run")
	}
	c, _ := openTest(t, dir, Options{})
	if _, probs, err := c.Verify(); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
	got, err := c.Get(m2)
	if err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("the entry just put: %v", err)
	}
}

// GC with a short grace removes unreferenced blobs and temporary files even while a
// Put is publishing one; the Put must still publish an entry whose blob exists.
func TestPutRacingOrphanRemoval(t *testing.T) {
	dir := t.TempDir()
	a, _ := openTest(t, dir, Options{})
	b, _ := openTest(t, dir, Options{})
	data := content(100, 200<<10, 12)
	m := testMaterial("orphan", "c")
	removed := false
	testHookPutBlobReady = func() {
		if removed {
			return
		}
		removed = true
		if rep, err := a.GC(GCOptions{Grace: time.Nanosecond}); err != nil || rep.OrphanBlobs != 1 {
			t.Errorf("gc: %+v %v", rep, err)
		}
	}
	t.Cleanup(func() { testHookPutBlobReady = nil })
	if err := b.Put(m, "orphan", data, 100); err != nil {
		t.Fatal(err)
	}
	c, _ := openTest(t, dir, Options{})
	if _, probs, err := c.Verify(); err != nil || len(probs) != 0 {
		t.Fatalf("verify: %v %v", probs, err)
	}
	if got, err := c.Get(m); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("get: %v", err)
	}
}

// Verify and Get in one process while another evicts and re-publishes: an entry that
// was evicted after the reader listed it is not damage. Verify must not report it,
// and neither may drop an entry that was published again meanwhile.
func TestReadersRacingEviction(t *testing.T) {
	dir := t.TempDir()
	w, _ := openTest(t, dir, Options{Budget: 4 * (64<<10 + 200)})
	w2, _ := openTest(t, dir, Options{Budget: 4 * (64<<10 + 200)})
	r, _ := openTest(t, dir, Options{})
	const n = 10
	datas := make([][]byte, n)
	for i := range datas {
		datas[i] = content(0, 64<<10, int64(100+i))
	}
	mat := func(i, v int) Material { return testMaterial(fmt.Sprint("race", i), fmt.Sprint("v", v)) }
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g, j := range []*Journal{w, w2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for time.Now().Before(deadline) {
				i := rng.Intn(n)
				if err := j.Put(mat(i, rng.Intn(2)), "race", datas[i], 0); err != nil {
					errs <- err
					return
				}
				if rng.Intn(20) == 0 {
					if _, err := j.GC(GCOptions{Budget: 2 * (64<<10 + 200)}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(7))
		for time.Now().Before(deadline) {
			if rng.Intn(4) == 0 {
				if _, probs, err := r.Verify(); err != nil || len(probs) != 0 {
					errs <- fmt.Errorf("verify during eviction: %v %v", probs, err)
					return
				}
				continue
			}
			i := rng.Intn(n)
			b, err := r.Get(mat(i, rng.Intn(2)))
			if err == nil && !bytes.Equal(b.Bytes(), datas[i]) {
				errs <- fmt.Errorf("get %d: wrong content", i)
				return
			}
			var miss *MissError
			if err != nil && !errors.As(err, &miss) {
				errs <- err
				return
			}
			// an entry evicted under a reader is a plain miss, never damage
			if miss != nil && miss.Cause.Kind != MissAbsent && miss.Cause.Kind != MissEvicted {
				errs <- fmt.Errorf("get %d: miss %v: %s", i, miss.Cause.Kind, miss.Cause)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Corrupt != 0 {
		t.Fatalf("%d corrupt", st.Corrupt)
	}
	c, _ := openTest(t, dir, Options{})
	if _, probs, err := c.Verify(); err != nil || len(probs) != 0 {
		t.Fatalf("verify after: %v %v", probs, err)
	}
	es, _ := c.Entries()
	for _, e := range es {
		if _, err := c.Get(e.Material); err != nil {
			t.Fatalf("entry %s: %v", e.Label, err)
		}
	}
	if q, _ := os.ReadDir(filepath.Join(dir, "quarantine")); len(q) != 0 {
		t.Fatalf("%d files quarantined", len(q))
	}
}
