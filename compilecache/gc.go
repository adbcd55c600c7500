package compilecache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// evict drops the least recently used entries until the blob files fit the budget,
// never keep (the entry just published). Each entry is dropped, and its blob removed when
// no live entry names it any more, in one locked step, and only if it is still the
// entry looked at (not published again, not used meanwhile by another process).
func (j *Journal) evict(keep Key, budget int64) {
	es := j.jf.snapshot()
	sort.Slice(es, func(a, b int) bool { return es[a].LastUse.Before(es[b].LastUse) })
	total := storedBytes(es)
	for _, e := range es {
		if total <= budget {
			break
		}
		if e.Key == keep {
			continue
		}
		dropped := false
		err := j.jf.update(func() error {
			cur, ok := j.jf.live[e.Key]
			if !ok || cur.Blob != e.Blob || !cur.Created.Equal(e.Created) || cur.LastUse.After(e.LastUse) {
				return nil
			}
			if err := j.jf.writeLocked(true, dropRecord(cur, "evicted: over the size budget")); err != nil {
				return err
			}
			dropped = true
			// the record first: a crash between the two leaves an unreferenced blob (GC
			// removes it), never an entry without one
			if !j.jf.referencedLocked(e.Blob) {
				os.Remove(blobPath(j.dir, e.Blob))
			}
			return nil
		})
		if err != nil {
			j.log.Warn("journal append failed", zap.Error(err))
			return
		}
		if dropped {
			j.stats.evictions.Add(1)
			j.log.Info("cache entry evicted", zap.String("key", e.Key.Short()), zap.String("label", e.Label), zap.Time("last_use", e.LastUse))
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

// GCOptions configure GC.
type GCOptions struct {
	// Budget, when > 0, evicts least recently used entries beyond it.
	Budget int64
	// Grace spares unreferenced blobs and temporary files younger than this (a
	// publish in progress writes its blob before its record; removing it only makes the
	// publish write it again); 0: ten minutes.
	Grace time.Duration
}

// GCReport says what GC removed.
type GCReport struct {
	Evicted, OrphanBlobs, TempFiles, Quarantined int
	// StaleLocks are build lock files (and takeover guards) of builds that ended without
	// removing them; WorkDirs the work directories in tmp/ of processes that are gone.
	StaleLocks, WorkDirs int
	FreedBytes           int64
}

// GC evicts over budget, removes blobs no entry references, leftover temporary files,
// stale build locks, the work directories of processes that are gone and the
// quarantine, and compacts the journal.
func (j *Journal) GC(o GCOptions) (GCReport, error) {
	var rep GCReport
	if err := j.writable("gc"); err != nil {
		return rep, err
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Minute
	}
	if err := j.jf.refresh(); err != nil {
		return rep, err
	}
	if o.Budget > 0 {
		before := j.stats.evictions.Load()
		j.evict(Key{}, o.Budget)
		rep.Evicted = int(j.stats.evictions.Load() - before)
	}
	live := map[string]bool{}
	for _, e := range j.jf.snapshot() {
		live[e.Blob.String()] = true
	}
	old := func(info fs.FileInfo) bool { return time.Since(info.ModTime()) > o.Grace }
	type orphan struct {
		path string
		size int64
	}
	var orphans []orphan
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
			orphans = append(orphans, orphan{p, info.Size()})
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	// an orphan is removed under the journal's lock, and only if no entry names it by
	// then: a Put appends its record under the same lock, and only while its blob exists.
	// Temporary files of the journal itself (compaction) are written under that lock too.
	err = j.jf.update(func() error {
		for _, o := range orphans {
			if k, err := ParseKey(filepath.Base(o.path)); err == nil && j.jf.referencedLocked(Digest(k)) {
				continue
			}
			if os.Remove(o.path) == nil {
				rep.OrphanBlobs++
				rep.FreedBytes += o.size
			}
		}
		tmps, _ := filepath.Glob(filepath.Join(j.dir, ".tmp-*"))
		for _, t := range tmps {
			if info, err := os.Stat(t); err == nil && old(info) && os.Remove(t) == nil {
				rep.TempFiles++
			}
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	rep.StaleLocks = j.removeStaleLocks()
	rep.WorkDirs = j.cleanTemp()
	qs, _ := os.ReadDir(filepath.Join(j.dir, "quarantine"))
	for _, q := range qs {
		if info, err := q.Info(); err == nil && os.Remove(filepath.Join(j.dir, "quarantine", q.Name())) == nil {
			rep.Quarantined++
			rep.FreedBytes += info.Size()
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
// the journal is read-only, quarantines the damaged ones and drops those whose blob is
// missing. An entry another process evicts or replaces while Verify runs is not a
// problem: a missing blob is looked at again under the journal's lock.
func (j *Journal) Verify() (checked int, problems []Problem, err error) {
	es, err := j.Entries()
	if err != nil {
		return 0, nil, err
	}
	for _, e := range es {
		e, _, live, err := j.readEntry(e, true)
		if err == nil && !live {
			continue // evicted meanwhile
		}
		checked++
		if err != nil {
			problems = append(problems, Problem{e, err})
			if errors.Is(err, ErrCorrupt) {
				j.quarantine(e, err.Error())
			}
		}
	}
	return checked, problems, nil
}

// removeStaleLocks removes the build locks that a waiter would take over, and takeover
// guards older than their limit. A lease that ends too far ahead counts as renewed when
// its file changed within a lease duration (GC looks once; it cannot watch renewals).
// Each lock is judged and removed holding its takeover guard, as a takeover does.
func (j *Journal) removeStaleLocks() int {
	dir := filepath.Join(j.dir, "locks")
	ds, _ := os.ReadDir(dir)
	n := 0
	for _, d := range ds {
		path := filepath.Join(dir, d.Name())
		if strings.HasSuffix(d.Name(), ".takeover") {
			if info, err := d.Info(); err == nil && time.Since(info.ModTime()) > guardLimit && os.Remove(path) == nil {
				n++
			}
			continue
		}
		if _, err := ParseKey(d.Name()); err != nil {
			continue
		}
		guard := path + ".takeover"
		g, err := os.OpenFile(guard, os.O_WRONLY|os.O_CREATE|os.O_EXCL, j.perm.file)
		if err != nil {
			continue // a takeover is under way
		}
		g.Close()
		if j.lockFileStale(path) && os.Remove(path) == nil {
			n++
		}
		os.Remove(guard)
	}
	return n
}

func (j *Journal) lockFileStale(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	l, err := readLock(path)
	if err != nil {
		return time.Since(st.ModTime()) > tornLockAge // torn by a killed owner
	}
	now := time.Now()
	switch {
	case now.After(l.Expires):
		return true
	case l.Host == j.host && l.PID > 0 && errors.Is(syscall.Kill(l.PID, 0), syscall.ESRCH):
		return true
	case l.Expires.Sub(now) > j.opts.LeaseTTL:
		return now.Sub(st.ModTime()) > j.opts.LeaseTTL
	}
	return false
}
