package tune

import (
	"github.com/kilnrt/kiln/engine"
)

// Candidate is one schedule for one workload: a strategy and its knob assignment in
// canonical form ("KC=128,MC=4").
type Candidate struct {
	Strategy string
	Knobs    string `json:",omitempty"`
}

func (c Candidate) String() string {
	if c.Knobs == "" {
		return c.Strategy
	}
	return c.Strategy + "{" + c.Knobs + "}"
}

// Assignment gives some workloads a candidate; the others keep their default.
type Assignment map[string]Candidate

// Request is one measurement: the model compiled under each assignment, each run on the
// same random inputs; Assignments[0] is the reference the others' outputs are checked
// against (normally the empty assignment: the defaults).
type Request struct {
	Model   string             // the model file
	Inputs  map[string][]int64 // input shapes the executables are specialized to
	Journal string             // journal directory for kernel objects ("": none)
	Threads int                // 0: every core
	Seed    uint64             // of the random inputs
	Reps    int                // profiled runs of each executable, interleaved
	// Space asks for the reference's kernels, with their search spaces.
	Space bool
	// Clock is how kernels are timed: "" the thread's CPU time when the kernels run on
	// one thread (ClockThreadCPU), else the wall clock; ClockWall the wall clock always.
	Clock       string `json:",omitempty"`
	Assignments []Assignment
}

// The clocks a measurement's kernel times are read from (Request.Clock, Response.Clock).
const (
	// ClockThreadCPU: the measuring thread's CPU time of each launch, the median of the
	// repetitions. Kernels on one thread run on the thread that launches them, so this
	// is their run time without the time other processes held the core.
	ClockThreadCPU = "thread-cpu"
	// ClockWall: the wall time of each launch, the fastest of the repetitions (other
	// processes only ever add to it). Kernels on several threads are timed so: the
	// caller's CPU time would leave out the workers'.
	ClockWall = "wall"
)

// Response is a measurement's result: one Result per assignment, in order, and with
// Request.Space the reference's kernels.
type Response struct {
	Target  string // the target and device fingerprint records of it are for
	Threads int    // the threads the kernels' parallel loops ran on
	Clock   string // ClockThreadCPU or ClockWall: what Result.Seconds measure
	Results []Result
	Kernels []Kernel `json:",omitempty"`
}

// Result is one assignment's measurement. Err says why it has no times (a build or run
// failure); Wrong why its outputs are not the reference's. Seconds are per inference,
// by workload, on the Response's clock (the median of the repetitions' thread CPU
// times, or the fastest of their wall times); Total the median wall time of a run.
type Result struct {
	Err     string             `json:",omitempty"`
	Wrong   string             `json:",omitempty"`
	Seconds map[string]float64 `json:",omitempty"`
	Total   float64
	// Applied are the workloads whose kernel was built with the assignment's candidate
	// (a candidate the strategies could not build leaves the default).
	Applied []string `json:",omitempty"`
}

// Kernel is one workload of the reference: the node it was built for, its strategy,
// how many times an inference launches it, and its search space.
type Kernel struct {
	Workload string
	Anchor   string
	Strategy string
	Launches int
	Space    []engine.TuneOption
	Features []float64 // of its default schedule's loop IR (features.go)
}
