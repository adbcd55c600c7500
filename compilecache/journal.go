package compilecache

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// journalFile is the append-only record log of one cache directory, shared by every
// process that opens the directory. Appends, repairs and truncation happen under an
// exclusive flock of the file; compaction and repair replace the file by rename, and a
// process that finds the path pointing at another inode reopens it. A read-only
// journalFile opens the file O_RDONLY, takes only shared locks, never creates nor
// repairs, and reads a file that does not exist (yet) as empty.
type journalFile struct {
	dir      string
	log      *zap.Logger
	readonly bool
	perm     fs.FileMode // of the files it writes
	mu       sync.Mutex  // guards everything below
	f        *os.File    // nil: read-only and there is no journal file
	ino      uint64
	off      int64 // bytes of the file applied to entries
	live     map[Key]*Entry
	// recordsBytes is the sum of the journal's record sizes; liveBytes those of the
	// latest Put of each live entry: compaction runs when the first far exceeds the second
	recordsBytes, liveBytes int64
	// reported is the damage (inode, offset) last logged by a reader that does not
	// repair, so that a refresh does not log it again
	reported [2]uint64
}

func (j *journalFile) path() string { return filepath.Join(j.dir, "journal") }

// errReplaced: the caller replaced the journal file; locked runs fn again on the new one.
var errReplaced = errors.New("journal file replaced")

// open opens the journal and replays it; a writer creates it and repairs damage.
func (j *journalFile) open() error {
	if err := j.reopen(); err != nil {
		return err
	}
	if j.readonly {
		return j.locked(syscall.LOCK_SH, func() error { return j.catchUp(false) })
	}
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
// When fn replaces the file itself it returns errReplaced, and runs again under the lock
// of the new file.
func (j *journalFile) locked(how int, fn func() error) error {
	for attempt := 0; ; attempt++ {
		if attempt >= 100 {
			return errors.New("the journal file keeps being replaced")
		}
		f := j.f
		if f == nil {
			// read-only with no journal file: look again, it may have been created
			if err := j.reopen(); err != nil {
				return err
			}
			if f = j.f; f == nil {
				return nil
			}
		}
		if err := flock(f, how); err != nil {
			return fmt.Errorf("locking the journal: %w", err)
		}
		st, err := os.Stat(j.path())
		if err == nil && inode(st) == j.ino {
			err := fn()
			flock(f, syscall.LOCK_UN)
			if j.f != f {
				f.Close() // replaced by fn; its lock is released only now
			}
			if errors.Is(err, errReplaced) {
				continue
			}
			return err
		}
		flock(f, syscall.LOCK_UN)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// never run fn on a file the path no longer names: its records would be lost
		if err := j.reopen(); err != nil {
			return err
		}
		f.Close()
	}
}

// reopen opens the file the path names now (a writer creates it when missing) and resets
// the replay. The file it replaces stays open: the caller may hold its lock.
func (j *journalFile) reopen() error {
	f, err := j.openFile()
	if err != nil {
		if j.readonly && errors.Is(err, os.ErrNotExist) {
			j.f, j.ino, j.off, j.live, j.recordsBytes, j.liveBytes = nil, 0, 0, map[Key]*Entry{}, 0, 0
			return nil
		}
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	j.f, j.ino, j.off, j.live, j.recordsBytes, j.liveBytes = f, inode(st), 0, map[Key]*Entry{}, 0, 0
	return nil
}

func (j *journalFile) openFile() (*os.File, error) {
	if j.readonly {
		return os.Open(j.path())
	}
	for {
		f, err := os.OpenFile(j.path(), os.O_RDWR|os.O_APPEND, 0)
		if !errors.Is(err, os.ErrNotExist) {
			return f, err
		}
		f, err = os.OpenFile(j.path(), os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, j.perm)
		if errors.Is(err, os.ErrExist) {
			continue // created by another process meanwhile
		}
		if err != nil {
			return nil, err
		}
		// the umask may have narrowed the mode; the new name must survive a crash
		if err := f.Chmod(j.perm); err != nil {
			f.Close()
			return nil, err
		}
		if err := syncDir(j.dir); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// catchUp applies the records after j.off. A damaged record is skipped: replay resumes at
// the next valid one (parseRecords). With repair (exclusive lock held) a missing header
// is written, a torn tail is truncated, and other damage is repaired after a copy of the
// damaged file is kept beside it: damaged records between valid ones by rewriting the
// journal from the live entries, a damaged tail by truncation. Without repair the file
// is only read, and damage is logged once.
func (j *journalFile) catchUp(repair bool) error {
	if j.f == nil {
		return nil
	}
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
	badHeader := false
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
		state, herr := checkJournalHeader(h[:n])
		switch {
		case state == headerForeign && !repair:
			if j.report(0) {
				j.log.Warn("journal header unreadable: read as empty (read-only: not repaired)", zap.String("path", j.path()), zap.Error(herr), zap.String("cause", "journal-unreadable"))
			}
			return nil
		case state == headerForeign:
			copied := j.copyDamaged(st.Size() > journalHeaderSize)
			j.log.Warn("journal header unreadable: starting an empty journal", zap.String("path", j.path()), zap.Error(herr), zap.String("copy", copied), zap.String("cause", "journal-reset"))
			if err := j.f.Truncate(0); err != nil {
				return err
			}
			j.off = 0
			return j.catchUp(true)
		case state == headerDamaged:
			badHeader = true
		}
		j.off = journalHeaderSize
	}
	base := j.off
	buf := make([]byte, st.Size()-base)
	if _, err := j.f.ReadAt(buf, base); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	s := parseRecords(buf)
	for i := range s.recs {
		j.apply(&s.recs[i])
	}
	j.off = base + int64(s.end)
	if !badHeader && len(s.skipped) == 0 && s.tail == nil {
		return nil
	}
	return j.damaged(repair, base, badHeader, s)
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
	done := false
	return j.locked(syscall.LOCK_EX, func() error {
		if err := j.catchUp(true); err != nil {
			return err
		}
		if done || !force && (j.recordsBytes < 1<<20 || j.recordsBytes < 4*j.liveBytes) {
			return nil
		}
		done = true
		return j.rewriteLocked() // and replays the new file under its lock
	})
}
