package serve

import (
	"context"
	"time"
)

// Background tuning (tunebg.go): with Options.Tune.Tuner set, the service tunes the
// models that receive traffic while it is idle, and swaps in executables rebuilt with
// the new tuning records.

// Tuner tunes a model's kernels for input shapes where it is served and writes the
// tuning records to the journal that the engine's compiles read, so the model's next
// compile (keyed by the records' digest) applies them. kiln serve passes one built on
// package tune; serve does not import the tuner (it compiles and measures models).
type Tuner interface {
	Tune(ctx context.Context, job TuneJob) (TuneResult, error)
}

// TuneJob is one tuning session for a model version.
type TuneJob struct {
	Model  string             // "name/version", for logs and errors
	Path   string             // the model file, as Engine.Open read it
	Shapes map[string][]int64 // the input shapes served most
	// Budget is the time the session may spend measuring (time under Gate); Trials
	// bounds the candidates measured (0: none but the budget).
	Budget time.Duration
	Trials int
	// Threads is what the measured kernels run on.
	Threads int
	// Gate admits measurements: every measurement runs under a context Gate.Acquire
	// returned, which ends when an inference arrives; the tuner measures it again at
	// the next idle time.
	Gate Gate
	// Progress reports the trials measured so far (cumulative; may be nil).
	Progress func(trials, invalid int)
}

// TuneResult is what a session did.
type TuneResult struct {
	Trials, Invalid int
	Records         int // tuning records written (or improved) in the journal
}

// Gate admits background work while the server is idle.
type Gate interface {
	// Acquire waits until the server is idle (or ctx ends) and returns a context that
	// ends when the next inference arrives, and release, to call when the work is
	// done.
	Acquire(ctx context.Context) (context.Context, func(), error)
}

// TuneOptions configure background tuning (Options.Tune).
type TuneOptions struct {
	// Tuner runs the sessions; nil: no background tuning (the default).
	Tuner Tuner
	// IdleAfter is how long no inference must have been in flight or queued before
	// the server counts as idle (0: 2s).
	IdleAfter time.Duration
	// Duty is the fraction of the idle time tuning may use, in (0, 1] (0: 1): after a
	// measurement that took d the next waits (1-Duty)/Duty·d.
	Duty float64
	// Threads is what the measured kernels run on (0: 1).
	Threads int
	// Budget is each model's measuring time (0: 10m); Trials bounds its candidates
	// (0: only the budget does).
	Budget time.Duration
	Trials int
	// MinExecutions is how many executions a model version needs before it is tuned
	// (0: 1).
	MinExecutions int64
	// Now is the clock of the idle detection (nil: time.Now).
	Now func() time.Time
}

func (o TuneOptions) withDefaults() TuneOptions {
	if o.IdleAfter <= 0 {
		o.IdleAfter = 2 * time.Second
	}
	if o.Duty <= 0 || o.Duty > 1 {
		o.Duty = 1
	}
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.Budget <= 0 {
		o.Budget = 10 * time.Minute
	}
	if o.MinExecutions <= 0 {
		o.MinExecutions = 1
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
