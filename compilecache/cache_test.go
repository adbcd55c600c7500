package compilecache

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func testMaterial(model, compiler string) Material {
	return Material{Kind: KindExecutable, Parts: []Component{{"model", model}, {"options", "O3"}, {"compiler", compiler}, {"target", "avx2"}}}
}

func openTest(t *testing.T, dir string, opts Options) (*Journal, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	opts.Dir, opts.Log = dir, zap.New(core)
	j, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j, logs
}

// content is a test payload: a compressible head and, when tail > 0, random bytes.
func content(head, tail int, seed int64) []byte {
	b := bytes.Repeat([]byte("kiln program "), head/13+1)[:head]
	r := rand.New(rand.NewSource(seed))
	t := make([]byte, tail)
	r.Read(t)
	return append(b, t...)
}

func logged(logs *observer.ObservedLogs, want string) bool {
	for _, e := range logs.All() {
		s := e.Message
		for _, f := range e.Context {
			s += " " + f.Key + "=" + f.String
		}
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}

func TestPutGetRawTail(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	m := testMaterial("m1", "c1")
	data := content(5000, 3<<20, 1)
	if err := j.Put(m, "resnet", data, 5000); err != nil {
		t.Fatal(err)
	}
	b, err := j.Get(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Head()) != 5000 || len(b.Tail()) != 3<<20 || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("head %d tail %d, equal %v", len(b.Head()), len(b.Tail()), bytes.Equal(b.Bytes(), data))
	}
	// a compressible tail is compressed with the head
	m2 := testMaterial("m2", "c1")
	data2 := content(3<<20, 0, 0)
	if err := j.Put(m2, "text", data2, 1000); err != nil {
		t.Fatal(err)
	}
	b2, err := j.Get(m2)
	if err != nil || b2.Tail() != nil || !bytes.Equal(b2.Bytes(), data2) {
		t.Fatalf("compressible: err %v, tail %d", err, len(b2.Tail()))
	}
	es, _ := j.Entries()
	if len(es) != 2 || es[0].Stored >= int64(len(data2)) && es[1].Stored >= int64(len(data2)) {
		t.Fatalf("entries %+v", es)
	}
	// another process sees both
	j2, _ := openTest(t, dir, Options{})
	if _, err := j2.Get(m); err != nil {
		t.Fatal(err)
	}
}

func TestMissNamesDifferingComponent(t *testing.T) {
	j, logs := openTest(t, t.TempDir(), Options{})
	if err := j.Put(testMaterial("m1", "compiler-v1"), "resnet", []byte("exe"), 0); err != nil {
		t.Fatal(err)
	}
	builds := 0
	res, err := j.Do(context.Background(), testMaterial("m1", "compiler-v2"), "resnet", func(context.Context) ([]byte, int, error) {
		builds++
		return []byte("exe2"), 0, nil
	})
	if err != nil || res.Outcome != Built || builds != 1 {
		t.Fatalf("outcome %v builds %d err %v", res.Outcome, builds, err)
	}
	if res.Miss.Kind != MissAbsent || !slices.Equal(res.Miss.Differs, []string{"compiler"}) ||
		!strings.Contains(res.Miss.String(), "differs in compiler") || !logged(logs, "cause=no entry for this key; the closest") {
		t.Fatalf("miss %+v; logs %v", res.Miss, logs.All())
	}
}

func TestCorruptBlobIsQuarantinedAndRebuilt(t *testing.T) {
	dir := t.TempDir()
	for _, tail := range []int{0, 2 << 20} {
		j, logs := openTest(t, dir, Options{})
		m := testMaterial("flip", string(rune('a'+tail%7)))
		data := content(3000, tail, 7)
		if err := j.Put(m, "flip", data, 3000); err != nil {
			t.Fatal(err)
		}
		es, _ := j.Entries()
		var e Entry
		for _, x := range es {
			if x.Key == m.Key() {
				e = x
			}
		}
		path := blobPath(dir, e.Blob)
		raw, _ := os.ReadFile(path)
		raw[len(raw)-10] ^= 0x40 // the last bytes: the zstd frame, or the raw tail
		os.WriteFile(path, raw, 0o644)
		res, err := j.Do(context.Background(), m, "flip", func(context.Context) ([]byte, int, error) { return data, 3000, nil })
		if err != nil || res.Outcome != Built || !bytes.Equal(res.Blob.Bytes(), data) {
			t.Fatalf("tail %d: outcome %v err %v", tail, res.Outcome, err)
		}
		if j.Stats().Corrupt != 1 || !logged(logs, "quarantined") || res.Miss.Kind != MissCorrupt || !strings.Contains(res.Miss.String(), "checksum") {
			t.Fatalf("tail %d: corrupt %d, miss %+v", tail, j.Stats().Corrupt, res.Miss)
		}
		if b, err := j.Get(m); err != nil || !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("after rebuild: %v", err)
		}
	}
	q, _ := os.ReadDir(filepath.Join(dir, "quarantine"))
	if len(q) != 2 {
		t.Fatalf("quarantine holds %d files", len(q))
	}
}

func TestTornJournalTailIsTruncated(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	m1, m2 := testMaterial("a", "c"), testMaterial("b", "c")
	j.Put(m1, "a", []byte("one"), 0)
	j.Put(m2, "b", []byte("two"), 0)
	j.Close()
	path := filepath.Join(dir, "journal")
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	j2, logs := openTest(t, dir, Options{})
	if !logged(logs, "journal tail damaged: truncated") {
		t.Fatalf("no truncation logged: %v", logs.All())
	}
	if _, err := j2.Get(m1); err != nil {
		t.Fatalf("the first entry is intact: %v", err)
	}
	if _, err := j2.Get(m2); !errors.Is(err, ErrMiss) {
		t.Fatalf("the torn entry: %v", err)
	}
	// the journal is whole again: a new entry appends after the truncation point
	j2.Put(m2, "b", []byte("two"), 0)
	j3, logs3 := openTest(t, dir, Options{})
	if _, err := j3.Get(m2); err != nil || logged(logs3, "truncated") {
		t.Fatalf("after repair: %v", err)
	}
}

func TestGarbageJournalStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "journal"), []byte("not a journal at all"), 0o644)
	j, logs := openTest(t, dir, Options{})
	if !logged(logs, "journal-reset") {
		t.Fatal("no reset logged")
	}
	if err := j.Put(testMaterial("x", "y"), "x", []byte("z"), 0); err != nil {
		t.Fatal(err)
	}
}

func TestOneBuildPerKey(t *testing.T) {
	dir := t.TempDir()
	// two journals on one directory stand for two processes (distinct lock owners)
	js := []*Journal{}
	for range 2 {
		j, _ := openTest(t, dir, Options{Poll: 5 * 1e6})
		js = append(js, j)
	}
	var builds atomic.Int32
	m := testMaterial("cold", "c")
	var wg sync.WaitGroup
	outcomes := make([]Outcome, 16)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := js[i%2].Do(context.Background(), m, "cold", func(context.Context) ([]byte, int, error) {
				builds.Add(1)
				return []byte("the executable"), 0, nil
			})
			if err != nil || string(res.Blob.Bytes()) != "the executable" {
				t.Errorf("%d: %v", i, err)
			}
			outcomes[i] = res.Outcome
		}()
	}
	wg.Wait()
	if builds.Load() != 1 {
		t.Fatalf("%d builds, outcomes %v", builds.Load(), outcomes)
	}
}

func TestStaleLockOfDeadProcessIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	j, logs := openTest(t, dir, Options{})
	m := testMaterial("stale", "c")
	// a lock left by a process that no longer exists (pid far beyond pid_max)
	os.WriteFile(j.lockPath(m.Key()), []byte(`{"owner":"dead","host":"`+j.host+`","pid":99999999,"expires":"2999-01-01T00:00:00Z"}`), 0o644)
	res, err := j.Do(context.Background(), m, "stale", func(context.Context) ([]byte, int, error) { return []byte("x"), 0, nil })
	if err != nil || res.Outcome != Built || !logged(logs, "taking over a stale build lock") {
		t.Fatalf("outcome %v err %v", res.Outcome, err)
	}
	if _, err := os.Stat(j.lockPath(m.Key())); !os.IsNotExist(err) {
		t.Fatal("lock not released")
	}
}

func TestPolicies(t *testing.T) {
	dir := t.TempDir()
	m := testMaterial("p", "c")
	n := 0
	build := func(context.Context) ([]byte, int, error) { n++; return []byte("v"), 0, nil }
	ro, _ := openTest(t, dir, Options{Policy: PolicyReadOnly})
	if res, _ := ro.Do(context.Background(), m, "p", build); res.Outcome != Uncached || res.Miss.Kind != MissAbsent {
		t.Fatalf("readonly: %v, miss %+v", res.Outcome, res.Miss)
	}
	if es, _ := ro.Entries(); len(es) != 0 {
		t.Fatal("readonly wrote an entry")
	}
	on, _ := openTest(t, dir, Options{})
	on.Do(context.Background(), m, "p", build)
	if res, _ := ro.Do(context.Background(), m, "p", build); res.Outcome != Hit || res.Miss.Kind != MissNone {
		t.Fatalf("readonly after publish: %v, miss %+v", res.Outcome, res.Miss)
	}
	redo, _ := openTest(t, dir, Options{Policy: PolicyRedo})
	if res, _ := redo.Do(context.Background(), m, "p", build); res.Outcome != Built || res.Miss.Kind != MissRedo {
		t.Fatalf("redo: %v, miss %+v", res.Outcome, res.Miss)
	}
	off, _ := openTest(t, "", Options{Policy: PolicyOff})
	if res, _ := off.Do(context.Background(), m, "p", build); res.Outcome != Uncached || res.Miss.Kind != MissOff {
		t.Fatalf("off: %v, miss %+v", res.Outcome, res.Miss)
	}
	if n != 4 {
		t.Fatalf("%d builds, want 4 (readonly, on, redo, off)", n)
	}
}

func TestBudgetEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	for i, name := range []string{"old", "mid", "new"} {
		if err := j.Put(testMaterial(name, "c"), name, content(0, 200<<10, int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	es, _ := j.Entries()
	one := es[0].Stored
	rep, err := j.GC(GCOptions{Budget: 2*one + one/2})
	if err != nil || rep.Evicted != 1 {
		t.Fatalf("evicted %d: %v", rep.Evicted, err)
	}
	if _, err := j.Get(testMaterial("old", "c")); !errors.Is(err, ErrMiss) {
		t.Fatal("the least recently used entry survived")
	}
	for _, name := range []string{"mid", "new"} {
		if _, err := j.Get(testMaterial(name, "c")); err != nil {
			t.Fatal(name, err)
		}
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	if len(blobs) != 2 {
		t.Fatalf("%d blob files after eviction", len(blobs))
	}
}

func TestExportImport(t *testing.T) {
	src, _ := openTest(t, t.TempDir(), Options{})
	m := testMaterial("e", "c")
	data := content(100, 2<<20, 3)
	src.Put(m, "e", data, 100)
	var buf bytes.Buffer
	if n, err := src.Export(&buf, nil); err != nil || n != 1 {
		t.Fatalf("export %d: %v", n, err)
	}
	dst, _ := openTest(t, t.TempDir(), Options{})
	if n, err := dst.Import(bytes.NewReader(buf.Bytes())); err != nil || n != 1 {
		t.Fatalf("import %d: %v", n, err)
	}
	if b, err := dst.Get(m); err != nil || !bytes.Equal(b.Bytes(), data) {
		t.Fatalf("imported entry: %v", err)
	}
	bad := bytes.Clone(buf.Bytes())
	i := bytes.Index(bad, data[200:216])
	bad[i] ^= 1
	other, _ := openTest(t, t.TempDir(), Options{})
	if _, err := other.Import(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged archive: %v", err)
	}
	if es, _ := other.Entries(); len(es) != 0 {
		t.Fatal("a damaged archive published an entry")
	}
}

func TestVerifyFindsDamage(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	j.Put(testMaterial("v1", "c"), "v1", content(5000, 0, 0), 0)
	j.Put(testMaterial("v2", "c"), "v2", content(10, 0, 0), 0)
	if n, probs, err := j.Verify(); err != nil || n != 2 || len(probs) != 0 {
		t.Fatalf("clean: %d %v %v", n, probs, err)
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	os.Truncate(blobs[0], 50)
	if n, probs, _ := j.Verify(); n != 2 || len(probs) != 1 {
		t.Fatalf("damaged: %d %v", n, probs)
	}
	if n, probs, _ := j.Verify(); n != 1 || len(probs) != 0 {
		t.Fatalf("after quarantine: %d %v", n, probs)
	}
}
