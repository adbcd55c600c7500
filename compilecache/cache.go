package compilecache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
)

// Policy says how a journal is used.
type Policy string

const (
	PolicyOn       Policy = "on"       // read entries, write new ones
	PolicyReadOnly Policy = "readonly" // read entries, never write (a baked-in cache)
	PolicyRedo     Policy = "redo"     // ignore existing entries, rebuild and overwrite
	PolicyOff      Policy = "off"      // no journal at all
)

// ParsePolicy reads a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyOn, PolicyReadOnly, PolicyRedo, PolicyOff:
		return p, nil
	}
	return "", fmt.Errorf("cache policy %q: want on, readonly, redo or off", s)
}

// ErrMiss is wrapped by Get when there is no usable entry; the message says why.
var ErrMiss = errors.New("no cache entry")

// Options configure a journal.
type Options struct {
	Dir    string // required
	Policy Policy // "" means on
	// Budget bounds the bytes of blob files; entries are evicted by last use (0: none).
	Budget int64
	Log    *zap.Logger // nil: no logging
	// LeaseTTL is how long a build lock holds without renewal (0: 30s).
	LeaseTTL time.Duration
	// Poll is how often a process waiting for another's build looks (0: 50ms).
	Poll time.Duration
}

// Entry is one live entry of the journal.
type Entry struct {
	Key      Key
	Blob     Digest
	Size     int64 // content bytes
	Stored   int64 // blob file bytes
	Label    string
	Material Material
	Created  time.Time
	LastUse  time.Time

	recordBytes int64
}

// Stats count what happened since Open.
type Stats struct {
	Hits, Misses, Corrupt, Builds, Waits, Evictions int64
}

// Outcome says how Do produced its blob.
type Outcome int

const (
	Hit      Outcome = iota // found in the journal
	Built                   // built here and published
	Shared                  // built by another goroutine of this process for the same key
	Waited                  // built by another process, which held the build lock
	Uncached                // built here, not published (policy off, readonly or redo failure)
)

var outcomeNames = [...]string{"hit", "built", "shared", "waited", "uncached"}

func (o Outcome) String() string { return outcomeNames[o] }

// Result is what Do returns.
type Result struct {
	Blob    *Blob
	Key     Key
	Outcome Outcome
	Miss    string // why the journal had no usable entry (empty on a hit)
}

// Journal is one cache directory: journal file, blobs, locks, quarantine.
type Journal struct {
	dir         string
	opts        Options
	log         *zap.Logger
	jf          *journalFile
	enc         *zstd.Encoder
	dec         *zstd.Decoder
	sf          singleflight.Group
	host, owner string
	stats       struct{ hits, misses, corrupt, builds, waits, evictions atomic.Int64 }
}

// useGranularity: a hit writes a use record only when the last one is older.
const useGranularity = time.Minute

// Open opens (creating) the journal in opts.Dir, truncating a torn tail. With policy
// off it returns a journal that builds every time and touches no files.
func Open(opts Options) (*Journal, error) {
	if opts.Policy == "" {
		opts.Policy = PolicyOn
	}
	if _, err := ParsePolicy(string(opts.Policy)); err != nil {
		return nil, err
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	j := &Journal{dir: opts.Dir, opts: opts, log: log}
	host, _ := os.Hostname()
	j.host = host
	j.owner = fmt.Sprintf("%s:%d:%d", host, os.Getpid(), time.Now().UnixNano())
	if opts.Policy == PolicyOff {
		return j, nil
	}
	if opts.Dir == "" {
		return nil, errors.New("compilecache: no directory")
	}
	var err error
	if j.enc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1)); err != nil {
		return nil, err
	}
	if j.dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<34)); err != nil {
		return nil, err
	}
	for _, d := range []string{"", "blobs", "locks", "quarantine"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			if opts.Policy == PolicyReadOnly && d != "" {
				continue
			}
			return nil, fmt.Errorf("compilecache: %w", err)
		}
	}
	j.jf = &journalFile{dir: opts.Dir, log: log}
	if err := j.jf.open(); err != nil {
		return nil, fmt.Errorf("compilecache: opening %s: %w", opts.Dir, err)
	}
	return j, nil
}

// Close releases the journal file.
func (j *Journal) Close() error {
	if j.jf == nil || j.jf.f == nil {
		return nil
	}
	return j.jf.f.Close()
}

// Policy is the journal's policy.
func (j *Journal) Policy() Policy { return j.opts.Policy }

// Dir is the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// Stats returns the counters.
func (j *Journal) Stats() Stats {
	s := &j.stats
	return Stats{s.hits.Load(), s.misses.Load(), s.corrupt.Load(), s.builds.Load(), s.waits.Load(), s.evictions.Load()}
}

// Entries lists the live entries, most recently used first.
func (j *Journal) Entries() ([]Entry, error) {
	if j.jf == nil {
		return nil, nil
	}
	if err := j.jf.refresh(); err != nil {
		return nil, err
	}
	es := j.jf.snapshot()
	sort.Slice(es, func(a, b int) bool { return es[a].LastUse.After(es[b].LastUse) })
	return es, nil
}

// Get returns the verified content of m's entry, or an error wrapping ErrMiss that says
// why there is none (no entry and which components differ from the closest, or the
// entry was damaged and is now quarantined).
func (j *Journal) Get(m Material) (*Blob, error) {
	if j.jf == nil {
		return nil, fmt.Errorf("%w: the cache is off", ErrMiss)
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
		return nil, fmt.Errorf("%w: %s", ErrMiss, j.closest(m))
	}
	e, b, live, err := j.readEntry(e, false)
	if err == nil && !live {
		return nil, fmt.Errorf("%w: entry %s was evicted meanwhile", ErrMiss, k.Short())
	}
	if err != nil {
		cause := err.Error()
		switch {
		case errors.Is(err, os.ErrNotExist):
			cause = "blob missing" // and the entry is dropped
		case errors.Is(err, ErrCorrupt):
			j.quarantine(e, cause)
		}
		return nil, fmt.Errorf("%w: entry %s was unusable (%s)", ErrMiss, k.Short(), cause)
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

// closest explains a miss: the entry of the same kind (and label, when one has it)
// sharing the most components, and the components that differ.
func (j *Journal) closest(m Material) string {
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
		return fmt.Sprintf("no %s entry in the journal", m.Kind)
	}
	return fmt.Sprintf("no entry for this key; the closest, %s (%s), differs in %s", best.Key.Short(), best.Label, strings.Join(m.Diff(best.Material), ", "))
}

// quarantine moves a damaged entry's blob aside and drops every entry that names it
// (they share the damaged content), in one locked step.
func (j *Journal) quarantine(e Entry, cause string) {
	j.stats.corrupt.Add(1)
	j.log.Warn("cache entry corrupt: quarantined, rebuilding", zap.String("key", e.Key.Short()), zap.String("label", e.Label), zap.String("cause", cause))
	if j.opts.Policy == PolicyReadOnly {
		return
	}
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
		if err := os.Rename(blobPath(j.dir, e.Blob), dst); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
	if err != nil {
		j.log.Warn("journal append failed", zap.Error(err))
	}
}

// maxPublishAttempts bounds how often a Put writes its blob again because GC or an
// eviction removed it (or its temporary file) before the record went in.
const maxPublishAttempts = 8

var testHookPutBlobReady func() // tests: runs between a Put's blob write (or look) and its record

// Put publishes content under m: the blob first (atomically, shared with any entry of
// the same content), then the journal record. rawFrom > 0 lets the bytes from there on
// be stored raw (mappable) when they do not compress.
func (j *Journal) Put(m Material, label string, content []byte, rawFrom int) error {
	if j.jf == nil || j.opts.Policy == PolicyReadOnly {
		return fmt.Errorf("compilecache: the journal is %s", j.opts.Policy)
	}
	data, d := encodeBlob(j.enc, content, rawFrom)
	path := blobPath(j.dir, d)
	k := m.Key()
	for attempt := 0; ; attempt++ {
		if st, err := os.Stat(path); err != nil || st.Size() != int64(len(data)) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := writeAtomic(filepath.Dir(path), path, data); err != nil {
				if errors.Is(err, os.ErrNotExist) && attempt < maxPublishAttempts {
					continue // GC (with a short grace) removed the temporary file: again
				}
				return fmt.Errorf("compilecache: publishing blob: %w", err)
			}
		}
		if testHookPutBlobReady != nil {
			testHookPutBlobReady()
		}
		r := &record{typ: recPut, key: k, time: time.Now().UnixNano(), blob: d, size: int64(len(content)), stored: int64(len(data)), label: label, mat: m}
		published := false
		err := j.jf.update(func() error {
			// blobs are removed under this lock, and only while no live entry names them:
			// a blob that is here now stays until the record appended here is dropped
			if _, err := os.Stat(path); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // removed since we looked (evicted with its last entry, or an orphan)
				}
				return err
			}
			published = true
			return j.jf.writeLocked(true, r)
		})
		if err != nil {
			return fmt.Errorf("compilecache: %w", err)
		}
		if published {
			break
		}
		if attempt >= maxPublishAttempts {
			return fmt.Errorf("compilecache: blob %s removed again and again while publishing", d.String()[:12])
		}
	}
	if j.opts.Budget > 0 {
		j.evict(k, j.opts.Budget)
	}
	if err := j.jf.compact(false); err != nil {
		j.log.Warn("journal compaction failed", zap.Error(err))
	}
	return nil
}

// Do returns m's content from the journal or builds it: once per key in this process
// (concurrent callers share the build) and, through the build lock, once per key among
// the processes sharing the directory (waiters poll for the published entry and build
// themselves if the owner gives up).
func (j *Journal) Do(ctx context.Context, m Material, label string, build func(context.Context) ([]byte, int, error)) (Result, error) {
	k := m.Key()
	res := Result{Key: k}
	if j.jf == nil {
		content, _, err := build(ctx)
		res.Blob, res.Outcome, res.Miss = &Blob{head: content}, Uncached, "the cache is off"
		return res, err
	}
	if j.opts.Policy != PolicyRedo {
		b, err := j.Get(m)
		if err == nil {
			j.stats.hits.Add(1)
			res.Blob, res.Outcome = b, Hit
			return res, nil
		}
		if !errors.Is(err, ErrMiss) {
			return res, err
		}
		res.Miss = strings.TrimPrefix(err.Error(), ErrMiss.Error()+": ")
	} else {
		res.Miss = "policy redo"
	}
	j.stats.misses.Add(1)
	logMiss := j.log.Info
	if m.Kind == KindKernel { // one line per kernel would drown the executable's
		logMiss = j.log.Debug
	}
	logMiss("cache miss", zap.String("key", k.Short()), zap.String("label", label), zap.String("kind", string(m.Kind)), zap.String("cause", res.Miss))
	if j.opts.Policy == PolicyReadOnly {
		content, _, err := build(ctx)
		j.stats.builds.Add(1)
		res.Blob, res.Outcome = &Blob{head: content}, Uncached
		return res, err
	}
	v, err, shared := j.sf.Do(k.String(), func() (any, error) { return j.buildLocked(ctx, m, label, build) })
	if err != nil {
		return res, err
	}
	r := v.(Result)
	res.Blob, res.Outcome = r.Blob, r.Outcome
	if shared && r.Outcome == Built {
		res.Outcome = Shared
	}
	return res, nil
}

// buildLocked builds under the cross-process lock, or waits for its holder.
func (j *Journal) buildLocked(ctx context.Context, m Material, label string, build func(context.Context) ([]byte, int, error)) (Result, error) {
	k := m.Key()
	waited := false
	for {
		l, holder, err := j.tryLock(k)
		if err != nil {
			// no lock directory (read-only volume) or another I/O failure: build anyway
			j.log.Warn("build lock unavailable; building without it", zap.String("key", k.Short()), zap.Error(err))
		}
		if l != nil || err != nil {
			if l != nil {
				defer l.release()
			}
			if waited || j.opts.Policy != PolicyRedo {
				if b, err := j.Get(m); err == nil { // published between our miss and the lock
					j.stats.waits.Add(1)
					return Result{Blob: b, Outcome: Waited}, nil
				}
			}
			content, rawFrom, err := build(ctx)
			if err != nil {
				return Result{}, err
			}
			j.stats.builds.Add(1)
			if err := j.Put(m, label, content, rawFrom); err != nil {
				j.log.Warn("publishing to the journal failed; serving the build", zap.String("key", k.Short()), zap.Error(err))
				return Result{Blob: &Blob{head: content}, Outcome: Uncached}, nil
			}
			return Result{Blob: &Blob{head: content}, Outcome: Built}, nil
		}
		if !waited {
			j.log.Info("waiting for another process's build", zap.String("key", k.Short()), zap.String("label", label), zap.String("owner", holder.Owner))
			waited = true
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(j.opts.Poll):
		}
		if e, ok := j.entryNow(k); ok {
			if b, err := j.Get(m); err == nil {
				j.stats.waits.Add(1)
				return Result{Blob: b, Outcome: Waited}, nil
			}
			_ = e
		}
	}
}

func (j *Journal) entryNow(k Key) (Entry, bool) {
	if err := j.jf.refresh(); err != nil {
		return Entry{}, false
	}
	return j.jf.lookup(k)
}

// Invalidate quarantines m's entry (the caller found its content unusable, e.g. an
// executable that does not decode); the next lookup misses.
func (j *Journal) Invalidate(m Material, cause string) {
	if j.jf == nil {
		return
	}
	if e, ok := j.jf.lookup(m.Key()); ok {
		j.quarantine(e, cause)
	}
}
