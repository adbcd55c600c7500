package compilecache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// getMiss gets m from j and returns the cause of its miss (failing the test on a hit or
// on an error that is not a miss).
func getMiss(t *testing.T, j *Journal, m Material) MissCause {
	t.Helper()
	_, err := j.Get(m)
	var miss *MissError
	if !errors.As(err, &miss) || !errors.Is(err, ErrMiss) {
		t.Fatalf("get: want a miss, got %v", err)
	}
	return miss.Cause
}

func entryOf(t *testing.T, j *Journal, m Material) Entry {
	t.Helper()
	e, ok := j.jf.lookup(m.Key())
	if !ok {
		t.Fatalf("no entry for %s", m.Key().Short())
	}
	return e
}

func TestEmptyJournalMissIsAbsentWithoutClosest(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), Options{})
	c := getMiss(t, j, testMaterial("m", "c"))
	if c.Kind != MissAbsent || c.Differs != nil || c.String() != "no exe entry in the journal" {
		t.Fatalf("miss %+v (%s)", c, c)
	}
}

func TestMissingBlobDropsTheEntryAsBlobMissing(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	m := testMaterial("gone", "c")
	if err := j.Put(m, "gone", []byte("exe"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blobPath(dir, entryOf(t, j, m).Blob)); err != nil {
		t.Fatal(err)
	}
	if c := getMiss(t, j, m); c.Kind != MissBlobMissing {
		t.Fatalf("miss %+v", c)
	}
	// the entry was dropped: the next lookup finds no entry at all
	if c := getMiss(t, j, m); c.Kind != MissAbsent {
		t.Fatalf("after the drop: miss %+v", c)
	}
}

func TestEntryEvictedByAnotherProcessIsMissEvicted(t *testing.T) {
	dir := t.TempDir()
	reader, _ := openTest(t, dir, Options{})
	writer, _ := openTest(t, dir, Options{})
	m := testMaterial("evicted", "c")
	if err := writer.Put(m, "evicted", content(0, 64<<10, 3), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Get(m); err != nil { // the reader knows the entry
		t.Fatal(err)
	}
	if rep, err := writer.GC(GCOptions{Budget: 1}); err != nil || rep.Evicted != 1 {
		t.Fatalf("gc: %+v %v", rep, err)
	}
	if c := getMiss(t, reader, m); c.Kind != MissEvicted {
		t.Fatalf("miss %+v", c)
	}
	if reader.Stats().Corrupt != 0 {
		t.Fatal("an eviction was counted as damage")
	}
}

func TestBlobThatCannotBeOpenedIsMissUnreadable(t *testing.T) {
	dir := t.TempDir()
	j, _ := openTest(t, dir, Options{})
	m := testMaterial("unreadable", "c")
	if err := j.Put(m, "unreadable", []byte("exe"), 0); err != nil {
		t.Fatal(err)
	}
	// the blob's fan-out directory replaced by a file: opening the blob fails with
	// ENOTDIR, an I/O error that is neither absence nor damage of the blob
	sub := filepath.Dir(blobPath(dir, entryOf(t, j, m).Blob))
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if c := getMiss(t, j, m); c.Kind != MissUnreadable {
		t.Fatalf("miss %+v (%s)", c, c)
	}
	if j.Stats().Corrupt != 0 {
		t.Fatal("an I/O error was counted as damage")
	}
}

func TestDoReportsTheMissCauseOfGet(t *testing.T) {
	dir := t.TempDir()
	j, logs := openTest(t, dir, Options{})
	m := testMaterial("do", "c")
	if err := j.Put(m, "do", []byte("exe"), 0); err != nil {
		t.Fatal(err)
	}
	os.Remove(blobPath(dir, entryOf(t, j, m).Blob))
	res, err := j.Do(context.Background(), m, "do", func(context.Context) ([]byte, int, error) { return []byte("exe"), 0, nil })
	if err != nil || res.Outcome != Built || res.Miss.Kind != MissBlobMissing || !logged(logs, "miss=blob-missing") {
		t.Fatalf("outcome %v, miss %+v, err %v, logs %v", res.Outcome, res.Miss, err, logs.All())
	}
}
