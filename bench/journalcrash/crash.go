package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// config is one crash test.
type config struct {
	Kills    int    // SIGKILLs to deliver
	Dir      string // the cache directory
	Seed     int64  // the schedule (delays, one or two writers, writer seeds)
	Exe      string // the binary to start in writer mode (this program, or the test binary)
	Progress io.Writer
	// MaxDelay caps how long a writer runs before its kill (0: 2s).
	MaxDelay time.Duration
}

// summary is what a crash test saw.
type summary struct {
	Rounds, Kills, TwoWriterRounds int
	KilledBeforeOpen               int // writers killed before their journal opened
	Events                         map[byte]int
	WriterLogs                     map[string]int // writers' log messages (with cause), counted
	Truncated                      int            // torn tails truncated by the checker's Open
	WriterTruncated                int            // ... by writers
	Checked                        int            // entries read back and compared by the checker
	Entries, BlobFiles, Orphans    int            // at the end
	JournalBytes                   int64
	JournalReplaced                int // rounds after which the journal was another file (compaction)
	Stats                          compilecache.Stats
	Wall                           time.Duration
}

func (s *summary) String() string {
	var b strings.Builder
	ev := func(c byte) int { return s.Events[c] }
	fmt.Fprintf(&b, "kills                 %d in %d rounds (%d with two writers; %d writers killed before their journal opened)\n", s.Kills, s.Rounds, s.TwoWriterRounds, s.KilledBeforeOpen)
	fmt.Fprintf(&b, "writers observed      %d puts returned, %d Do builds published (%d waited, %d shared, %d hits), %d gets checked, %d misses, %d GCs (%d evicted), %d verifies\n",
		ev(evPut), ev(evBuilt), ev(evWaited), ev(evShared), ev(evDoHit), ev(evHit), ev(evMiss), ev(evGC), ev(evEvicted), ev(evVerify))
	fmt.Fprintf(&b, "torn tails truncated  %d by the checker's Open, %d by writers\n", s.Truncated, s.WriterTruncated)
	fmt.Fprintf(&b, "journal replaced      after %d rounds (compaction)\n", s.JournalReplaced)
	fmt.Fprintf(&b, "checker               %d entry reads compared; its Stats: corrupt %d, evictions %d, misses %d\n",
		s.Checked, s.Stats.Corrupt, s.Stats.Evictions, s.Stats.Misses)
	fmt.Fprintf(&b, "corrupt               %d (checker Stats.Corrupt) + %d (writers' quarantine log lines)\n", s.Stats.Corrupt, s.WriterLogs[msgCorrupt])
	fmt.Fprintf(&b, "at the end            %d entries, %d blob files (%d unreferenced), journal %d bytes\n", s.Entries, s.BlobFiles, s.Orphans, s.JournalBytes)
	if len(s.WriterLogs) > 0 {
		keys := make([]string, 0, len(s.WriterLogs))
		for k := range s.WriterLogs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("writer log lines     ")
		for _, k := range keys {
			fmt.Fprintf(&b, " %q×%d", k, s.WriterLogs[k])
		}
		b.WriteString("\n")
	}
	if s.Wall > 0 {
		fmt.Fprintf(&b, "wall time             %s\n", s.Wall.Round(time.Millisecond))
	}
	return b.String()
}

const msgCorrupt = "cache entry corrupt: quarantined, rebuilding"

// child is one running writer.
type child struct {
	cmd    *exec.Cmd
	events eventCounter
	stderr bytes.Buffer
}

type eventCounter map[byte]int

func (c eventCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		c[b]++
	}
	return len(p), nil
}

func (cfg *config) start(seed uint64) (*child, error) {
	c := &child{events: eventCounter{}}
	c.cmd = exec.Command(cfg.Exe)
	c.cmd.Env = append(os.Environ(), writerEnv+"="+cfg.Dir, writerSeedEnv+"="+strconv.FormatUint(seed, 10))
	c.cmd.Stdout, c.cmd.Stderr = c.events, &c.stderr
	return c, c.cmd.Start()
}

// kill delivers SIGKILL and reaps the writer; a writer that already exited by itself
// failed.
func (c *child) kill(s *summary) error {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	err := c.cmd.Wait()
	ws, _ := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		why := exitNames[ws.ExitStatus()]
		if why == "" {
			why = fmt.Sprint(err)
		}
		return fmt.Errorf("writer %d stopped by itself before the kill (exit %d: %s):\n%s", c.cmd.Process.Pid, ws.ExitStatus(), why, tail(c.stderr.String(), 4000))
	}
	s.Kills++
	if c.events[evOpen] == 0 {
		s.KilledBeforeOpen++
	}
	for k, v := range c.events {
		s.Events[k] += v
	}
	return c.logs(s)
}

// logs counts a killed writer's log lines; one that reports damage or a failed write
// fails the test.
func (c *child) logs(s *summary) error {
	sc := bufio.NewScanner(bytes.NewReader(c.stderr.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			if len(bytes.TrimSpace(line)) > 0 {
				return fmt.Errorf("writer %d wrote %q", c.cmd.Process.Pid, tail(c.stderr.String(), 4000))
			}
			continue
		}
		msg, _ := m["msg"].(string)
		cause, _ := m["cause"].(string)
		key := msg
		if cause != "" && !strings.Contains(cause, " ") {
			key += " (" + cause + ")"
		}
		s.WriterLogs[key]++
		if cause == "journal-truncated" {
			s.WriterTruncated++
		}
		if cause == "journal-damaged" || cause == "journal-unreadable" {
			// a kill tears the last append; it never damages a complete record
			return fmt.Errorf("writer %d logged %s", c.cmd.Process.Pid, line)
		}
		switch msg {
		case msgCorrupt, "journal header unreadable: starting an empty journal",
			"journal append failed", "journal compaction failed", "publishing to the journal failed; serving the build",
			"build lock unavailable; building without it":
			return fmt.Errorf("writer %d logged %s", c.cmd.Process.Pid, line)
		}
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// delay is how long a writer runs before its kill: mostly under 150ms (kills during
// startup, Open and the first appends), sometimes longer, so GC, compaction and big
// blobs are under way.
func (cfg *config) delay(r *rand.Rand) time.Duration {
	max := cfg.MaxDelay
	if max <= 0 {
		max = 2 * time.Second
	}
	var d time.Duration
	switch p := r.IntN(10); {
	case p < 7:
		d = time.Duration(r.Int64N(int64(150 * time.Millisecond)))
	case p < 9:
		d = 150*time.Millisecond + time.Duration(r.Int64N(int64(450*time.Millisecond)))
	default:
		d = 600*time.Millisecond + time.Duration(r.Int64N(int64(1400*time.Millisecond)))
	}
	return min(d, max)
}

// run is the crash test: rounds of one or two writers killed, each followed by a check.
func run(cfg config) (*summary, error) {
	s := &summary{Events: map[byte]int{}, WriterLogs: map[string]int{}}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return s, err
	}
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6a6f75726e616c))
	var ino uint64
	for s.Kills < cfg.Kills {
		s.Rounds++
		n := 1
		if cfg.Kills-s.Kills >= 2 && r.IntN(3) == 0 {
			n = 2
			s.TwoWriterRounds++
		}
		var cs []*child
		for range n {
			c, err := cfg.start(r.Uint64())
			if err != nil {
				return s, fmt.Errorf("round %d: starting a writer: %w", s.Rounds, err)
			}
			cs = append(cs, c)
		}
		var err error
		time.Sleep(cfg.delay(r))
		if n == 2 && r.IntN(2) == 0 {
			// kill one; the other goes on (repairing what its sibling left), then dies too
			err = errors.Join(err, cs[0].kill(s))
			time.Sleep(cfg.delay(r))
			err = errors.Join(err, cs[1].kill(s))
		} else {
			for _, c := range cs {
				c.cmd.Process.Signal(syscall.SIGKILL)
			}
			for _, c := range cs {
				err = errors.Join(err, c.kill(s))
			}
		}
		if err != nil {
			return s, fmt.Errorf("round %d: %w", s.Rounds, err)
		}
		if err := check(cfg.Dir, s); err != nil {
			return s, fmt.Errorf("round %d (after %d kills): %w", s.Rounds, s.Kills, err)
		}
		if st, err := os.Stat(filepath.Join(cfg.Dir, "journal")); err == nil {
			i := st.Sys().(*syscall.Stat_t).Ino
			if ino != 0 && i != ino {
				s.JournalReplaced++
			}
			ino = i
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "round %d: %d writer(s), %d kills, %d entries, %d puts so far\n", s.Rounds, n, s.Kills, s.Entries, s.Events[evPut]+s.Events[evBuilt])
		}
	}
	return s, final(cfg.Dir, s)
}

// check opens the journal after a kill, verifies it and reads every entry back.
func check(dir string, s *summary) error {
	core, logs := observer.New(zap.InfoLevel)
	j, err := compilecache.Open(compilecache.Options{Dir: dir, Log: zap.New(core)})
	if err != nil {
		return fmt.Errorf("open after the kill: %w", err)
	}
	defer j.Close()
	defer func() {
		st := j.Stats()
		s.Stats.Hits += st.Hits
		s.Stats.Misses += st.Misses
		s.Stats.Corrupt += st.Corrupt
		s.Stats.Builds += st.Builds
		s.Stats.Waits += st.Waits
		s.Stats.Evictions += st.Evictions
	}()
	countLogs := func() error {
		for _, e := range logs.TakeAll() {
			for _, f := range e.Context {
				if f.Key != "cause" {
					continue
				}
				switch f.String {
				case "journal-truncated":
					s.Truncated++
				case "journal-reset":
					return fmt.Errorf("the journal was reset: %s", e.Message)
				case "journal-damaged":
					return fmt.Errorf("a complete record was damaged (a kill only tears the last append): %s", e.Message)
				}
			}
		}
		return nil
	}
	if err := countLogs(); err != nil {
		return err
	}
	_, probs, err := j.Verify()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if len(probs) > 0 {
		var b strings.Builder
		for _, p := range probs {
			fmt.Fprintf(&b, "\n  entry %s (%s): %v", p.Entry.Key.Short(), p.Entry.Label, p.Err)
		}
		return fmt.Errorf("verify found %d damaged entries:%s", len(probs), b.String())
	}
	es, err := j.Entries()
	if err != nil {
		return fmt.Errorf("entries: %w", err)
	}
	for _, e := range es {
		seed, variant, err := parseMaterial(e.Material)
		if err != nil {
			return fmt.Errorf("entry %s: %w", e.Key.Short(), err)
		}
		id := contentDigest(seed)
		if e.Label != label(seed, variant) || e.Blob != id.d || e.Size != int64(id.n) {
			return fmt.Errorf("entry %s (%s): label %q, blob %s, %d bytes; written: %s, %d bytes", e.Key.Short(), label(seed, variant), e.Label, e.Blob.String()[:12], e.Size, id.d.String()[:12], id.n)
		}
		b, err := j.Get(e.Material)
		if err != nil {
			return fmt.Errorf("entry %s (%s) is listed but Get fails: %w", e.Key.Short(), e.Label, err)
		}
		if err := checkContent(seed, variant, b.Bytes()); err != nil {
			return fmt.Errorf("entry %s: %w", e.Key.Short(), err)
		}
		s.Checked++
	}
	s.Entries = len(es)
	if st := j.Stats(); st.Corrupt > 0 {
		return fmt.Errorf("%d corrupt entries met", st.Corrupt)
	}
	return countLogs()
}

// final counts what is left on disk.
func final(dir string, s *summary) error {
	j, err := compilecache.Open(compilecache.Options{Dir: dir, Policy: compilecache.PolicyReadOnly})
	if err != nil {
		return err
	}
	defer j.Close()
	es, err := j.Entries()
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, e := range es {
		live[e.Blob.String()] = true
	}
	blobs, _ := filepath.Glob(filepath.Join(dir, "blobs", "*", "*"))
	for _, b := range blobs {
		if name := filepath.Base(b); !strings.HasPrefix(name, ".tmp-") {
			s.BlobFiles++
			if !live[name] {
				s.Orphans++
			}
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "journal")); err == nil {
		s.JournalBytes = st.Size()
	}
	return nil
}
