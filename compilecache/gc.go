package compilecache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
)

// evict drops the least recently used entries until the blob files fit the budget,
// never keep (the entry just published).
func (j *Journal) evict(keep Key) {
	es := j.jf.snapshot()
	sort.Slice(es, func(a, b int) bool { return es[a].LastUse.Before(es[b].LastUse) })
	total := storedBytes(es)
	for _, e := range es {
		if total <= j.opts.Budget {
			break
		}
		if e.Key == keep {
			continue
		}
		j.drop(e.Key, "evicted: over the size budget")
		j.stats.evictions.Add(1)
		j.log.Info("cache entry evicted", zap.String("key", e.Key.Short()), zap.String("label", e.Label), zap.Time("last_use", e.LastUse))
		if !j.blobReferenced(e.Blob) {
			os.Remove(blobPath(j.dir, e.Blob))
		}
		total = storedBytes(j.jf.snapshot())
	}
}

// storedBytes sums the blob files of entries, each blob once.
func storedBytes(es []Entry) int64 {
	seen := map[Digest]bool{}
	var n int64
	for _, e := range es {
		if !seen[e.Blob] {
			seen[e.Blob] = true
			n += e.Stored
		}
	}
	return n
}

func (j *Journal) blobReferenced(d Digest) bool {
	for _, e := range j.jf.snapshot() {
		if e.Blob == d {
			return true
		}
	}
	return false
}

// GCOptions configure GC.
type GCOptions struct {
	// Budget, when > 0, evicts least recently used entries beyond it.
	Budget int64
	// Grace spares unreferenced blobs and temporary files younger than this (a
	// publish in progress writes its blob before its record); 0: ten minutes.
	Grace time.Duration
}

// GCReport says what GC removed.
type GCReport struct {
	Evicted, OrphanBlobs, TempFiles, Quarantined int
	FreedBytes                                   int64
}

// GC evicts over budget, removes blobs no entry references, leftover temporary files
// and the quarantine, and compacts the journal.
func (j *Journal) GC(o GCOptions) (GCReport, error) {
	var rep GCReport
	if j.jf == nil || j.opts.Policy == PolicyReadOnly {
		return rep, fmt.Errorf("compilecache: gc needs a writable journal (policy %s)", j.opts.Policy)
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Minute
	}
	if err := j.jf.refresh(); err != nil {
		return rep, err
	}
	if o.Budget > 0 {
		before := j.stats.evictions.Load()
		saved := j.opts.Budget
		j.opts.Budget = o.Budget
		j.evict(Key{})
		j.opts.Budget = saved
		rep.Evicted = int(j.stats.evictions.Load() - before)
	}
	live := map[string]bool{}
	for _, e := range j.jf.snapshot() {
		live[e.Blob.String()] = true
	}
	old := func(info fs.FileInfo) bool { return time.Since(info.ModTime()) > o.Grace }
	err := filepath.WalkDir(filepath.Join(j.dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasPrefix(name, ".tmp-"):
			if old(info) && os.Remove(p) == nil {
				rep.TempFiles++
				rep.FreedBytes += info.Size()
			}
		case !live[name] && old(info):
			if os.Remove(p) == nil {
				rep.OrphanBlobs++
				rep.FreedBytes += info.Size()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	qs, _ := os.ReadDir(filepath.Join(j.dir, "quarantine"))
	for _, q := range qs {
		if info, err := q.Info(); err == nil && os.Remove(filepath.Join(j.dir, "quarantine", q.Name())) == nil {
			rep.Quarantined++
			rep.FreedBytes += info.Size()
		}
	}
	tmps, _ := filepath.Glob(filepath.Join(j.dir, ".tmp-*"))
	for _, t := range tmps {
		if info, err := os.Stat(t); err == nil && old(info) && os.Remove(t) == nil {
			rep.TempFiles++
		}
	}
	return rep, j.jf.compact(true)
}

// Problem is one damaged entry found by Verify.
type Problem struct {
	Entry Entry
	Err   error
}

// Verify reads every entry's blob in full (SHA-256 of the content included) and, unless
// the journal is read-only, quarantines the damaged ones.
func (j *Journal) Verify() (checked int, problems []Problem, err error) {
	es, err := j.Entries()
	if err != nil {
		return 0, nil, err
	}
	for _, e := range es {
		b, err := readBlob(j.dec, blobPath(j.dir, e.Blob), e.Blob, true)
		if err == nil && int64(b.Len()) != e.Size {
			err = fmt.Errorf("%w: %d bytes, the journal says %d", ErrCorrupt, b.Len(), e.Size)
		}
		checked++
		if err != nil {
			problems = append(problems, Problem{e, err})
			if errors.Is(err, os.ErrNotExist) {
				j.drop(e.Key, "blob missing")
			} else {
				j.quarantine(e, err.Error())
			}
		}
	}
	return checked, problems, nil
}
