package compilecache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// journalFile is the append-only record log of one cache directory, shared by every
// process that opens the directory. Appends and truncation happen under an exclusive
// flock of the file; compaction replaces the file by rename, and a process that finds
// the path pointing at another inode reopens it.
type journalFile struct {
	dir  string
	log  *zap.Logger
	mu   sync.Mutex // guards everything below
	f    *os.File
	ino  uint64
	off  int64 // bytes of the file applied to entries
	live map[Key]*Entry
	// recordsBytes is the sum of the journal's record sizes; liveBytes those of the
	// latest Put of each live entry: compaction runs when the first far exceeds the second
	recordsBytes, liveBytes int64
}

func (j *journalFile) path() string { return filepath.Join(j.dir, "journal") }

// open opens (creating) the journal and replays it, truncating a torn or damaged tail.
func (j *journalFile) open() error {
	f, err := os.OpenFile(j.path(), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	j.f, j.ino, j.off, j.live, j.recordsBytes, j.liveBytes = f, inode(st), 0, map[Key]*Entry{}, 0, 0
	return j.locked(syscall.LOCK_EX, func() error { return j.catchUp(true) })
}

func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Ino
	}
	return 0
}

// locked runs fn under a flock of the journal, first reopening the file if compaction
// replaced it. The check holds: a file is replaced only by a holder of its exclusive
// lock, so once this process holds a lock on the file the path names, it stays named.
func (j *journalFile) locked(how int, fn func() error) error {
	for attempt := 0; ; attempt++ {
		if err := flock(j.f, how); err != nil {
			return fmt.Errorf("locking the journal: %w", err)
		}
		st, err := os.Stat(j.path())
		if err == nil && inode(st) == j.ino {
			defer flock(j.f, syscall.LOCK_UN)
			return fn()
		}
		flock(j.f, syscall.LOCK_UN)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// never run fn on a file the path no longer names: its records would be lost
		if attempt >= 100 {
			return errors.New("the journal file keeps being replaced")
		}
		old, err := j.reopen()
		if err != nil {
			return err
		}
		old.Close()
	}
}

// reopen opens the file the path names now and resets the replay; it returns the file it
// replaced (still open: the caller may hold its lock).
func (j *journalFile) reopen() (*os.File, error) {
	f, err := os.OpenFile(j.path(), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	old := j.f
	j.f, j.ino, j.off, j.live, j.recordsBytes, j.liveBytes = f, inode(st), 0, map[Key]*Entry{}, 0, 0
	return old, nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// catchUp applies the records after j.off. With repair (exclusive lock held) a missing
// header is written and a damaged tail is truncated; without, reading stops before it.
func (j *journalFile) catchUp(repair bool) error {
	st, err := j.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == j.off && j.off > 0 {
		return nil
	}
	if st.Size() < j.off {
		// cut below what was applied (only a reset of an unreadable journal does that):
		// replay from the start
		j.off, j.live, j.recordsBytes, j.liveBytes = 0, map[Key]*Entry{}, 0, 0
	}
	if j.off == 0 {
		h := make([]byte, journalHeaderSize)
		n, _ := j.f.ReadAt(h, 0)
		if n == 0 && st.Size() == 0 {
			if !repair {
				return nil
			}
			if _, err := j.f.Write(journalHeader()); err != nil {
				return err
			}
			j.off = journalHeaderSize
			return j.f.Sync()
		}
		if err := checkJournalHeader(h[:n]); err != nil {
			if !repair {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			j.log.Warn("journal header unreadable: starting an empty journal", zap.String("path", j.path()), zap.Error(err), zap.String("cause", "journal-reset"))
			if err := j.f.Truncate(0); err != nil {
				return err
			}
			j.off = 0
			return j.catchUp(true)
		}
		j.off = journalHeaderSize
	}
	buf := make([]byte, st.Size()-j.off)
	if _, err := j.f.ReadAt(buf, j.off); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	recs, good, damaged := parseRecords(buf)
	for i := range recs {
		j.apply(&recs[i])
	}
	j.off += int64(good)
	if damaged != nil && repair {
		j.log.Warn("journal tail damaged: truncated", zap.String("path", j.path()), zap.Int64("offset", j.off),
			zap.Int("bytes", len(buf)-good), zap.String("why", damaged.Error()), zap.String("cause", "journal-truncated"))
		if err := j.f.Truncate(j.off); err != nil {
			return err
		}
		return j.f.Sync()
	}
	return nil
}

// apply folds one record into the live entries.
func (j *journalFile) apply(r *record) {
	size := int64(r.n)
	j.recordsBytes += size
	switch r.typ {
	case recPut:
		if old, ok := j.live[r.key]; ok {
			j.liveBytes -= old.recordBytes
		}
		e := &Entry{Key: r.key, Blob: r.blob, Size: r.size, Stored: r.stored, Label: r.label, Material: r.mat,
			Created: r.when(), LastUse: r.when(), recordBytes: size}
		j.live[r.key] = e
		j.liveBytes += size
	case recUse:
		if e, ok := j.live[r.key]; ok && r.when().After(e.LastUse) {
			e.LastUse = r.when()
		}
	case recDrop:
		if e, ok := j.live[r.key]; ok && !r.when().Before(e.Created) {
			j.liveBytes -= e.recordBytes
			delete(j.live, r.key)
		}
	}
}

// update runs fn under the exclusive lock (and j.mu), after catching up with (and
// repairing) what other processes wrote: fn sees j.live current and may write records
// with writeLocked. Everything that must not interleave with another process's change
// happens in one update: appending a put only while its blob exists, removing a blob only
// while no live entry names it, dropping an entry only while it is the one looked at.
func (j *journalFile) update(fn func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.locked(syscall.LOCK_EX, func() error {
		if err := j.catchUp(true); err != nil {
			return err
		}
		return fn()
	})
}

// writeLocked appends records (inside update); with sync they are on disk when it
// returns.
func (j *journalFile) writeLocked(sync bool, recs ...*record) error {
	var b []byte
	for _, r := range recs {
		b = append(b, r.frame()...)
	}
	if _, err := j.f.Write(b); err != nil {
		// a short write leaves a torn tail; the next append or open truncates it
		return fmt.Errorf("appending to the journal: %w", err)
	}
	if sync {
		if err := j.f.Sync(); err != nil {
			return err
		}
	}
	return j.catchUp(false)
}

// referencedLocked says whether a live entry names blob d (inside update).
func (j *journalFile) referencedLocked(d Digest) bool {
	for _, e := range j.live {
		if e.Blob == d {
			return true
		}
	}
	return false
}

// append writes records under the exclusive lock.
func (j *journalFile) append(sync bool, recs ...*record) error {
	return j.update(func() error { return j.writeLocked(sync, recs...) })
}

// dropRecord drops e: timed no earlier than e's creation, so replay applies it.
func dropRecord(e *Entry, reason string) *record {
	return &record{typ: recDrop, key: e.Key, time: max(time.Now().UnixNano(), e.Created.UnixNano()), reason: reason}
}

// refresh applies what other processes appended (under a shared lock).
func (j *journalFile) refresh() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.locked(syscall.LOCK_SH, func() error { return j.catchUp(false) })
}

// snapshot copies the live entries.
func (j *journalFile) snapshot() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Entry, 0, len(j.live))
	for _, e := range j.live {
		out = append(out, *e)
	}
	return out
}

func (j *journalFile) lookup(k Key) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.live[k]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// compact rewrites the journal with one Put (and last use) per live entry when the
// records are more than four times what the live entries need.
func (j *journalFile) compact(force bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.locked(syscall.LOCK_EX, func() error {
		if err := j.catchUp(true); err != nil {
			return err
		}
		if !force && (j.recordsBytes < 1<<20 || j.recordsBytes < 4*j.liveBytes) {
			return nil
		}
		b := journalHeader()
		for _, e := range j.live {
			put := record{typ: recPut, key: e.Key, time: e.Created.UnixNano(), blob: e.Blob, size: e.Size, stored: e.Stored, label: e.Label, mat: e.Material}
			b = append(b, put.frame()...)
			if e.LastUse.After(e.Created) {
				use := record{typ: recUse, key: e.Key, time: e.LastUse.UnixNano()}
				b = append(b, use.frame()...)
			}
		}
		if err := writeAtomic(j.dir, j.path(), b); err != nil {
			return err
		}
		// the old file stays locked (by locked) until this returns; processes waiting on
		// it then find the path naming the new file and reopen
		old, err := j.reopen()
		if err != nil {
			return err
		}
		defer old.Close()
		return j.catchUp(false)
	})
}

// writeAtomic publishes data at path: a temporary file in dir, fsync, rename, fsync of
// the directory. Readers see the old file or the whole new one.
func writeAtomic(dir, path string, data []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
