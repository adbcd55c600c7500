package compilecache

import (
	"errors"
	"io"

	"go.uber.org/zap"
)

// damaged handles what catchUp found wrong after base: a header one bit off, runs of
// damaged records skipped between valid ones, a tail with no valid record. Without
// repair it logs the damage once (a torn tail not at all: a writer truncates it). With
// repair (exclusive lock held) it keeps a copy of the file and rewrites the journal from
// the live entries (skipped runs, header), or truncates the tail (with a copy unless
// the tail is a torn append).
func (j *journalFile) damaged(repair bool, base int64, badHeader bool, s scan) error {
	fields := damageFields(j.path(), base, badHeader, s)
	if !repair {
		if (badHeader || len(s.skipped) > 0 || !s.tail.torn) && j.report(uint64(j.off)) {
			j.log.Warn("journal damaged: damaged records skipped (read-only: not repaired)", append(fields, zap.String("cause", "journal-damaged"))...)
		}
		return nil
	}
	if badHeader || len(s.skipped) > 0 {
		copied := j.copyDamaged(true)
		if copied == "" {
			// no copy, no rewrite: the records after the damage were read, and appends
			// go after it
			j.log.Warn("journal damaged: damaged records skipped; no copy could be kept, so the file is left as it is", append(fields, zap.String("cause", "journal-damaged"))...)
			return nil
		}
		j.log.Warn("journal damaged: damaged records skipped, a copy kept, the journal rewritten from the live entries",
			append(fields, zap.String("copy", copied), zap.String("cause", "journal-damaged"))...)
		return j.rewriteLocked()
	}
	if s.tail.torn {
		j.log.Warn("journal tail damaged: truncated", append(fields, zap.String("cause", "journal-truncated"))...)
	} else {
		copied := j.copyDamaged(true)
		j.log.Warn("journal damaged: damaged last record truncated", append(fields, zap.String("copy", copied), zap.String("cause", "journal-damaged"))...)
	}
	if err := j.f.Truncate(j.off); err != nil {
		return err
	}
	return j.f.Sync()
}

// report says whether damage at (this file, off) is new to this reader, and notes it.
func (j *journalFile) report(off uint64) bool {
	k := [2]uint64{j.ino, off}
	if j.reported == k {
		return false
	}
	j.reported = k
	return true
}

func damageFields(path string, base int64, header bool, s scan) []zap.Field {
	f := []zap.Field{zap.String("path", path), zap.Bool("header", header), zap.Int("records_read", len(s.recs))}
	var skipped int
	for _, d := range s.skipped {
		skipped += d.n
	}
	if len(s.skipped) > 0 {
		f = append(f, zap.Int64("offset", base+int64(s.skipped[0].off)), zap.Int("skipped_runs", len(s.skipped)), zap.Int("skipped_bytes", skipped),
			zap.String("why", s.skipped[0].why))
	}
	if s.tail != nil {
		f = append(f, zap.Int64("tail_offset", base+int64(s.tail.off)), zap.Int("tail_bytes", s.tail.n), zap.String("tail_why", s.tail.why))
	}
	return f
}

// copyDamaged keeps a copy of the journal file beside it (when want) and returns its
// path, or "" when none was made.
func (j *journalFile) copyDamaged(want bool) string {
	if !want {
		return ""
	}
	st, err := j.f.Stat()
	if err == nil {
		data := make([]byte, st.Size())
		if _, err = j.f.ReadAt(data, 0); err == nil || errors.Is(err, io.EOF) {
			var path string
			if path, err = keepCopy(j.dir, data, j.perm); err == nil {
				return path
			}
		}
	}
	j.log.Warn("could not keep a copy of the damaged journal", zap.String("path", j.path()), zap.Error(err))
	return ""
}

// rewriteLocked replaces the journal (under its exclusive lock) by one Put (and last use)
// per live entry, and returns errReplaced: the caller's locked runs again on the new file.
func (j *journalFile) rewriteLocked() error {
	b := journalHeader()
	for _, e := range j.live {
		put := record{typ: recPut, key: e.Key, time: e.Created.UnixNano(), blob: e.Blob, size: e.Size, stored: e.Stored, label: e.Label, mat: e.Material}
		b = append(b, put.frame()...)
		if e.LastUse.After(e.Created) {
			use := record{typ: recUse, key: e.Key, time: e.LastUse.UnixNano()}
			b = append(b, use.frame()...)
		}
	}
	if err := writeAtomic(j.dir, j.path(), b, j.perm); err != nil {
		return err
	}
	// the old file stays locked (by locked) until it is closed; processes waiting on it
	// then find the path naming the new file and reopen
	if err := j.reopen(); err != nil {
		return err
	}
	return errReplaced
}
