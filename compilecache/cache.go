package compilecache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
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

// ErrMiss is matched (errors.Is) by the *MissError Get returns when there is no usable
// entry; its Cause says why.
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
	Miss    MissCause // why the journal had no usable entry (Kind MissNone on a hit)
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
	perm        perms  // of what this process creates in the directory
	readOnlyWhy string // why a writer's policy was turned read-only ("" when it was not)
	leaseMu     sync.Mutex
	leases      map[string]leaseSeen // far-future build locks seen, by path (lock.go)
	stats       struct{ hits, misses, corrupt, builds, waits, evictions atomic.Int64 }
}

// useGranularity: a hit writes a use record only when the last one is older.
const useGranularity = time.Minute

// Open opens the journal in opts.Dir. With policy on or redo it creates the directory
// and the journal when missing and repairs damage (Journal doc); when this process may not
// write there (a cache filled by another user, a read-only volume) it uses the journal
// read-only and says so in the log. With policy readonly it never writes: the journal is
// opened O_RDONLY under shared locks, and a missing directory or journal is an empty
// cache. With policy off it returns a journal that builds every time and touches no
// files. A directory others could write is refused (ErrUnsafeDir).
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
	j := &Journal{dir: opts.Dir, opts: opts, log: log, leases: map[string]leaseSeen{}}
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
	if opts.Policy != PolicyReadOnly {
		if err := j.prepare(); err != nil {
			if !isPermission(err) {
				return nil, fmt.Errorf("compilecache: %w", err)
			}
			j.readOnlyBecause(err)
		}
	}
	if j.opts.Policy == PolicyReadOnly {
		st, err := os.Stat(opts.Dir)
		if errors.Is(err, os.ErrNotExist) {
			log.Warn("no cache directory: every compile is built and not kept", zap.String("dir", opts.Dir), zap.String("policy", string(opts.Policy)))
			j.jf = &journalFile{dir: opts.Dir, log: log, readonly: true, live: map[Key]*Entry{}}
			return j, nil
		}
		if err != nil {
			return nil, fmt.Errorf("compilecache: %w", err)
		}
		j.perm = permsOf(st)
	}
	if err := checkTrusted(opts.Dir); err != nil {
		return nil, fmt.Errorf("compilecache: %w", err)
	}
	j.jf = &journalFile{dir: opts.Dir, log: log, readonly: j.opts.Policy == PolicyReadOnly, perm: j.perm.file}
	err = j.jf.open()
	if err != nil && !j.jf.readonly && isPermission(err) {
		j.readOnlyBecause(err)
		j.jf = &journalFile{dir: opts.Dir, log: log, readonly: true, perm: j.perm.file}
		err = j.jf.open()
	}
	if err != nil {
		return nil, fmt.Errorf("compilecache: opening %s: %w", opts.Dir, err)
	}
	if !j.jf.readonly {
		j.cleanTemp()
	}
	return j, nil
}

// prepare creates the cache directory and its subdirectories (a writer's Open).
func (j *Journal) prepare() error {
	dir := j.opts.Dir
	if err := ensureDirAll(dir); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	j.perm = permsOf(st)
	for _, d := range []string{"blobs", "locks", "quarantine", "tmp"} {
		if _, err := ensureDir(filepath.Join(dir, d), j.perm); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyBecause turns a writer's journal read-only: this process may not write the
// directory.
func (j *Journal) readOnlyBecause(err error) {
	j.log.Warn("the cache directory is not writable by this process: using it read-only", zap.String("dir", j.opts.Dir),
		zap.String("policy", string(j.opts.Policy)), zap.Error(err))
	j.readOnlyWhy = fmt.Sprintf("policy %s, but %v", j.opts.Policy, err)
	j.opts.Policy = PolicyReadOnly
}

// writable returns an error saying why this journal cannot be written, or nil.
func (j *Journal) writable(what string) error {
	switch {
	case j.jf == nil:
		return fmt.Errorf("compilecache: %s needs a journal (policy %s)", what, j.opts.Policy)
	case j.readOnlyWhy != "":
		return fmt.Errorf("compilecache: %s needs a writable journal (%s)", what, j.readOnlyWhy)
	case j.opts.Policy == PolicyReadOnly:
		return fmt.Errorf("compilecache: %s needs a writable journal (policy readonly)", what)
	}
	return nil
}

// Close releases the journal file.
func (j *Journal) Close() error {
	if j.jf == nil || j.jf.f == nil {
		return nil
	}
	return j.jf.f.Close()
}

// Policy is the journal's policy: readonly also when a writer's directory turned out not
// to be writable by this process.
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
