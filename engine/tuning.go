package engine

import (
	"github.com/kilnrt/kiln/compilecache"
)

// Tuning is what a compile takes from tuning: the records to apply, by workload (the
// compiler's structural key of a kernel), and whether to report each kernel's search
// space (Group.Space) for a tuner.
type Tuning struct {
	Records map[string]compilecache.TuningRecord
	Space   bool
}

// Record returns the record for a workload (none on a nil Tuning).
func (t *Tuning) Record(workload string) (compilecache.TuningRecord, bool) {
	if t == nil {
		return compilecache.TuningRecord{}, false
	}
	r, ok := t.Records[workload]
	return r, ok
}

// TuneOption is one strategy of a kernel's search space and its knobs.
type TuneOption struct {
	Strategy string
	Knobs    []TuneKnob `json:",omitempty"`
}

// TuneKnob is one knob of a strategy: its legal values and the default rule's value.
type TuneKnob struct {
	Name    string
	Values  []int64
	Default int64
}

// tuning is the records this engine's compiles may apply: Config.Records or else the
// journal's, those measured on the engine's target and device and at the thread count
// its parallel loops run on (Threads; none with Config.NoTuning). A record measured at
// another thread count is not applied: a schedule's parallel split and working set per
// thread are what tuning chose, and they are right for the threads they ran on only.
func (e *Engine) tuning() ([]compilecache.TuningRecord, *Tuning) {
	var all []compilecache.TuningRecord
	switch {
	case e.cfg.NoTuning:
		return nil, nil
	case e.cfg.Records != nil:
		all = e.cfg.Records
	case e.cfg.Journal != nil:
		// an unreadable tuning directory costs the records, never the compile
		all, _ = e.cfg.Journal.TuningRecords(e.TargetFingerprint())
	}
	var recs []compilecache.TuningRecord
	for _, r := range all {
		if r.Target == e.TargetFingerprint() && r.Threads == e.Threads() {
			recs = append(recs, r)
		}
	}
	return recs, tuningOf(recs)
}

// tuningOf is the compile's view of recs (nil for none).
func tuningOf(recs []compilecache.TuningRecord) *Tuning {
	if len(recs) == 0 {
		return nil
	}
	t := &Tuning{Records: map[string]compilecache.TuningRecord{}}
	for _, r := range recs {
		t.Records[r.Workload] = r
	}
	return t
}

// Threads is the thread count the engine's CPU kernels run on (the device's, or the
// host's for a GPU target), which selects the tuning records applied.
func (e *Engine) Threads() int {
	if n := e.cfg.Device.Info().Threads; n > 0 || e.cfg.Host == nil {
		return n
	}
	return e.cfg.Host.Info().Threads
}

// TuningRecords are the records the engine's compiles may apply now (kiln inspect).
func (e *Engine) TuningRecords() []compilecache.TuningRecord {
	recs, _ := e.tuning()
	return recs
}
