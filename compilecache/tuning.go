package compilecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// TuningRecord is the best measured schedule of one kernel structure (a workload) on one
// target and device: the strategy and knob assignment to build it with, and its speedup
// over the default schedule measured side by side, with the number of threads its
// parallel loops ran on (a schedule's speed depends on it). Records live in tuning/ of
// the journal directory, one file per (workload, target, threads).
type TuningRecord struct {
	Workload string  // the kernel's structural key (the compiler's workload key)
	Target   string  // the target and device fingerprint it was measured on
	Threads  int     // the threads parallel loops ran on when it was measured (0: unknown)
	Strategy string  // the strategy to build with
	Knobs    string  // its knob assignment, canonical ("KC=128,MC=4"; empty: defaults)
	Speedup  float64 // default time / this schedule's time, measured side by side
	Trials   int     // candidates measured for the workload
	Label    string  `json:",omitempty"` // a node it was tuned on, for people
}

// ErrBadTuning: a tuning record that does not check (damaged, or not a record).
var ErrBadTuning = errors.New("invalid tuning record")

const tuningDir = "tuning"

// name is the record's file name: the SHA-256 of its target, workload and thread
// count (a record of unknown thread count, written by a kiln whose records had none,
// keeps the name of its target and workload alone, so it still reads back; the engine
// applies it at no thread count).
func (r TuningRecord) name() string {
	key := r.Target + "\x00" + r.Workload
	if r.Threads != 0 {
		key += "\x00" + strconv.Itoa(r.Threads)
	}
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:]) + ".rec"
}

// encode frames the record: the CRC-32C of the JSON body in hex, a newline, the body.
func (r TuningRecord) encode() []byte {
	body, err := json.Marshal(r)
	if err != nil {
		panic("BUG: a tuning record does not marshal: " + err.Error())
	}
	return append([]byte(fmt.Sprintf("%08x\n", crc32.Checksum(body, castagnoli))), body...)
}

// decodeTuning checks a record file's frame, body and name.
func decodeTuning(name string, data []byte) (TuningRecord, error) {
	var r TuningRecord
	sum, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || len(sum) != 8 {
		return r, fmt.Errorf("%w: %s: no checksum line", ErrBadTuning, name)
	}
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || uint32(want) != crc32.Checksum(body, castagnoli) {
		return r, fmt.Errorf("%w: %s: checksum mismatch", ErrBadTuning, name)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: %s: %v", ErrBadTuning, name, err)
	}
	if r.Workload == "" || r.Target == "" || r.Strategy == "" || !(r.Speedup > 0) || r.Threads < 0 || r.name() != name {
		return r, fmt.Errorf("%w: %s: incomplete, or named for another workload", ErrBadTuning, name)
	}
	return r, nil
}

// PutTuning keeps r as its workload's record on its target and thread count unless the
// record there has a higher speedup; it reports whether r was kept. A journal with policy off keeps
// nothing.
func (j *Journal) PutTuning(r TuningRecord) (bool, error) {
	if j.opts.Policy == PolicyOff {
		return false, nil
	}
	if err := j.writable("tuning record"); err != nil {
		return false, err
	}
	if r.Workload == "" || r.Target == "" || r.Strategy == "" || !(r.Speedup > 0) || r.Threads < 0 {
		return false, fmt.Errorf("%w: workload %q on %q: strategy, target, a positive speedup and a thread count of at least 0 are required", ErrBadTuning, r.Workload, r.Target)
	}
	dir := filepath.Join(j.dir, tuningDir)
	if _, err := ensureDir(dir, j.perm); err != nil {
		return false, err
	}
	path := filepath.Join(dir, r.name())
	if data, err := os.ReadFile(path); err == nil {
		if old, err := decodeTuning(r.name(), data); err == nil && old.Speedup >= r.Speedup {
			return false, nil
		}
	}
	return true, writeAtomic(dir, path, r.encode(), j.perm.file)
}

// TuningRecords returns the records measured on target (at every thread count),
// sorted by workload and thread count. A record
// file that does not check is moved to quarantine/ (left in place by a reader) and
// never returned; records of other targets are not read past their name.
func (j *Journal) TuningRecords(target string) ([]TuningRecord, error) {
	all, err := j.allTuning()
	if err != nil {
		return nil, err
	}
	var out []TuningRecord
	for _, r := range all {
		if r.Target == target {
			out = append(out, r)
		}
	}
	return out, nil
}

// AllTuningRecords returns the records of every target, sorted by workload (damaged
// ones are quarantined as by TuningRecords).
func (j *Journal) AllTuningRecords() ([]TuningRecord, error) { return j.allTuning() }

// allTuning reads every record that checks, quarantining the others.
func (j *Journal) allTuning() ([]TuningRecord, error) {
	if j.opts.Policy == PolicyOff {
		return nil, nil
	}
	dir := filepath.Join(j.dir, tuningDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("compilecache: tuning records: %w", err)
	}
	var out []TuningRecord
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".rec") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err == nil {
			var r TuningRecord
			if r, err = decodeTuning(e.Name(), data); err == nil {
				out = append(out, r)
				continue
			}
		}
		j.quarantineTuning(path, err)
	}
	slices.SortFunc(out, func(a, b TuningRecord) int {
		if c := strings.Compare(a.Workload, b.Workload); c != 0 {
			return c
		}
		return a.Threads - b.Threads
	})
	return out, nil
}

// quarantineTuning moves a record file that does not check aside.
func (j *Journal) quarantineTuning(path string, cause error) {
	j.stats.corrupt.Add(1)
	if j.jf == nil || j.jf.readonly {
		j.log.Warn("tuning record invalid: ignored (read-only)", zap.String("file", path), zap.Error(cause))
		return
	}
	j.log.Warn("tuning record invalid: quarantined, not applied", zap.String("file", path), zap.Error(cause))
	dst := filepath.Join(j.dir, "quarantine", fmt.Sprintf("tuning-%s-%d", filepath.Base(path), time.Now().UnixNano()))
	if err := os.Rename(path, dst); err != nil {
		j.log.Warn("tuning record: quarantine failed", zap.Error(err))
		return
	}
	_ = errors.Join(syncDir(filepath.Dir(path)), syncDir(filepath.Dir(dst)))
}

// TuningDigest names a set of records in a journal key: "none" for no records, else
// the first 16 hex digits of the SHA-256 of their canonical lines.
func TuningDigest(recs []TuningRecord) string {
	if len(recs) == 0 {
		return "none"
	}
	lines := make([]string, len(recs))
	for i, r := range recs {
		lines[i] = r.Target + "\x00" + r.Workload + "\x00" + strconv.Itoa(r.Threads) + "\x00" + r.Strategy + "\x00" + r.Knobs
	}
	slices.Sort(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:8])
}
