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

// tuning is the records this engine's compiles apply: Config.Records or else the
// journal's, those measured on the engine's target and device (none with
// Config.NoTuning). The
// key's tuning component is their digest, so a new or better record makes the next
// lookup a miss and the executable is built again with it.
func (e *Engine) tuning() ([]compilecache.TuningRecord, *Tuning) {
	var recs []compilecache.TuningRecord
	switch {
	case e.cfg.NoTuning:
		return nil, nil
	case e.cfg.Records != nil:
		for _, r := range e.cfg.Records {
			if r.Target == e.TargetFingerprint() {
				recs = append(recs, r)
			}
		}
	case e.cfg.Journal != nil:
		// an unreadable tuning directory costs the records, never the compile
		recs, _ = e.cfg.Journal.TuningRecords(e.TargetFingerprint())
	}
	if len(recs) == 0 {
		return nil, nil
	}
	t := &Tuning{Records: map[string]compilecache.TuningRecord{}}
	for _, r := range recs {
		t.Records[r.Workload] = r
	}
	return recs, t
}

// TuningRecords are the records the engine's compiles apply now (kiln inspect).
func (e *Engine) TuningRecords() []compilecache.TuningRecord {
	recs, _ := e.tuning()
	return recs
}
