package compilecache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Get returns the verified content of m's entry, or a *MissError (wrapping ErrMiss) whose
// cause says why there is none (no entry and which components differ from the closest,
// or the entry was damaged and is now quarantined).
func (j *Journal) Get(m Material) (*Blob, error) {
	if j.jf == nil {
		return nil, missErr(MissOff, "")
	}
	k := m.Key()
	e, ok := j.jf.lookup(k)
	if !ok {
		if err := j.jf.refresh(); err != nil {
			return nil, err
		}
		e, ok = j.jf.lookup(k)
	}
	if !ok {
		return nil, &MissError{Cause: j.closest(m)}
	}
	e, b, live, err := j.readEntry(e, false)
	if err == nil && !live {
		return nil, missErr(MissEvicted, fmt.Sprintf("entry %s was evicted meanwhile", k.Short()))
	}
	if err != nil {
		kind, cause := MissUnreadable, err.Error()
		switch {
		case errors.Is(err, os.ErrNotExist):
			kind, cause = MissBlobMissing, "blob missing" // and the entry is dropped
		case errors.Is(err, ErrCorrupt):
			kind = MissCorrupt
			j.quarantine(e, cause)
		}
		return nil, missErr(kind, fmt.Sprintf("entry %s was unusable (%s)", k.Short(), cause))
	}
	if time.Since(e.LastUse) > useGranularity && j.opts.Policy != PolicyReadOnly {
		_ = j.jf.append(false, &record{typ: recUse, key: k, time: time.Now().UnixNano()})
	}
	return b, nil
}

// readEntry reads e's blob (with full, hashing all of it). A blob file that is not there
// is settled under the journal's lock: another process may have evicted the entry
// (live is false: no damage, nothing to do) or replaced it (the current entry is read
// instead); only an entry that still names a missing blob is an error, and it is
// dropped. Other errors are returned as they are: the caller quarantines ErrCorrupt.
func (j *Journal) readEntry(e Entry, full bool) (Entry, *Blob, bool, error) {
	for attempt := 0; ; attempt++ {
		b, err := readBlob(j.dec, blobPath(j.dir, e.Blob), e.Blob, full)
		if err == nil && int64(b.Len()) != e.Size {
			err = fmt.Errorf("%w: blob has %d bytes, the journal says %d", ErrCorrupt, b.Len(), e.Size)
		}
		if err == nil || !errors.Is(err, os.ErrNotExist) || attempt == 2 {
			return e, b, true, err
		}
		cur, live, missing, serr := j.missingBlob(e)
		switch {
		case serr != nil:
			return e, nil, true, serr
		case !live:
			return e, nil, false, nil
		case missing:
			return e, nil, true, err
		}
		e = cur
	}
}

// missingBlob looks again, under the exclusive lock, at an entry whose blob file was not
// found: it returns the key's current entry (live: there is one) and whether that is
// still e with its blob still missing, in which case (unless read-only) it drops it in
// the same locked step, so that a Put of the key by another process cannot come between.
func (j *Journal) missingBlob(e Entry) (cur Entry, live, missing bool, err error) {
	check := func(c *Entry) {
		if c == nil {
			return
		}
		cur, live = *c, true
		if c.Blob != e.Blob || !c.Created.Equal(e.Created) {
			return // replaced meanwhile: read the current one
		}
		if _, err := os.Stat(blobPath(j.dir, e.Blob)); err == nil {
			return // published again
		}
		missing = true
	}
	if j.opts.Policy == PolicyReadOnly {
		if err := j.jf.refresh(); err != nil {
			return cur, false, false, err
		}
		if c, ok := j.jf.lookup(e.Key); ok {
			check(&c)
		}
		return cur, live, missing, nil
	}
	err = j.jf.update(func() error {
		check(j.jf.live[e.Key])
		if !missing {
			return nil
		}
		return j.jf.writeLocked(true, dropRecord(j.jf.live[e.Key], "blob missing"))
	})
	return cur, live, missing, err
}

// closest explains an absent entry: the entry of the same kind (and label, when one has
// it) sharing the most components, and the components that differ.
func (j *Journal) closest(m Material) MissCause {
	var best *Entry
	bestScore := -1
	es := j.jf.snapshot()
	for i := range es {
		e := &es[i]
		if e.Material.Kind != m.Kind {
			continue
		}
		score := len(m.Parts) - len(m.Diff(e.Material))
		if v, _ := m.Get("model"); v != "" {
			if w, _ := e.Material.Get("model"); w == v {
				score += 1000
			}
		}
		if score > bestScore {
			best, bestScore = e, score
		}
	}
	if best == nil {
		return MissCause{Kind: MissAbsent, Detail: fmt.Sprintf("no %s entry in the journal", m.Kind)}
	}
	diff := m.Diff(best.Material)
	return MissCause{Kind: MissAbsent, Differs: diff,
		Detail: fmt.Sprintf("no entry for this key; the closest, %s (%s), differs in %s", best.Key.Short(), best.Label, strings.Join(diff, ", "))}
}

// quarantine moves a damaged entry's blob aside and drops every entry that names it
// (they share the damaged content), in one locked step.
func (j *Journal) quarantine(e Entry, cause string) {
	j.stats.corrupt.Add(1)
	if j.opts.Policy == PolicyReadOnly {
		j.log.Warn("cache entry corrupt: left in place (read-only), building without it", zap.String("key", e.Key.Short()), zap.String("label", e.Label), zap.String("cause", cause))
		return
	}
	j.log.Warn("cache entry corrupt: quarantined, rebuilding", zap.String("key", e.Key.Short()), zap.String("label", e.Label), zap.String("cause", cause))
	dst := filepath.Join(j.dir, "quarantine", fmt.Sprintf("%s-%d", e.Blob, time.Now().UnixNano()))
	err := j.jf.update(func() error {
		var drops []*record
		for _, x := range j.jf.live {
			if x.Blob == e.Blob {
				drops = append(drops, dropRecord(x, "quarantined: "+cause))
			}
		}
		// the records first: a crash between the two leaves an unreferenced blob, not an
		// entry without one
		if len(drops) > 0 {
			if err := j.jf.writeLocked(true, drops...); err != nil {
				return err
			}
		}
		if err := os.Rename(blobPath(j.dir, e.Blob), dst); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		}
		// both directories changed: the move must survive a crash like the records
		return errors.Join(syncDir(filepath.Dir(blobPath(j.dir, e.Blob))), syncDir(filepath.Dir(dst)))
	})
	if err != nil {
		j.log.Warn("journal append failed", zap.Error(err))
	}
}
