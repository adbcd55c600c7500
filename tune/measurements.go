package tune

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kilnrt/kiln/engine"
)

// A measurement log (Options.Measurements) is a tuning run's data for studying the cost
// model away from the machine: JSON lines, a MeasuredTask for each task when the run
// starts, then a MeasuredTrial for each candidate measured, in order. The features are
// those of the features.go that wrote them; a log is only comparable with a model of
// the same feature count.
type MeasuredTask struct {
	Model    string
	Workload string
	Anchor   string
	Threads  int
	Clock    string    `json:",omitempty"` // what the times are (Response.Clock)
	Seconds  float64   // the default schedule's time per inference
	Features []float64 // the default schedule's loop-IR features
	Space    []engine.TuneOption
}

// MeasuredTrial is one candidate of a task: its point in the task's space (a strategy
// index and one value index per knob), and its measured speedup over the default (0:
// invalid).
type MeasuredTrial struct {
	Workload  string
	Candidate string
	Opt       int
	Vals      []int
	Speedup   float64
}

// measurementLine is one line of a measurement log: exactly one field set.
type measurementLine struct {
	Task  *MeasuredTask  `json:",omitempty"`
	Trial *MeasuredTrial `json:",omitempty"`
}

// logTasks writes the run's tasks to the measurement log.
func (r *runner) logTasks() error {
	for _, t := range r.rep.Tasks {
		if err := r.logLine(measurementLine{Task: &MeasuredTask{Model: r.o.Model, Workload: t.Workload, Anchor: t.Anchor,
			Threads: r.rep.Threads, Clock: r.rep.Clock, Seconds: t.Seconds, Features: t.Features, Space: t.space.opts}}); err != nil {
			return err
		}
	}
	return nil
}

// logTrial writes one measured candidate to the measurement log; a log that fails to
// take it stops the logging (the run goes on) and is reported at the end.
func (r *runner) logTrial(t *Task, p point, c Candidate, speedup float64) {
	if r.logErr != nil {
		return
	}
	r.logErr = r.logLine(measurementLine{Trial: &MeasuredTrial{Workload: t.Workload, Candidate: c.String(), Opt: p.opt, Vals: p.vals, Speedup: speedup}})
}

func (r *runner) logLine(l measurementLine) error {
	if r.o.Measurements == nil {
		return nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		panic("BUG: a measurement line does not marshal: " + err.Error())
	}
	if _, err := r.o.Measurements.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("tune: measurement log: %w", err)
	}
	return nil
}

// ReadMeasurements reads a measurement log: its tasks and their trials, by workload.
func ReadMeasurements(rd io.Reader) ([]MeasuredTask, map[string][]MeasuredTrial, error) {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	var tasks []MeasuredTask
	trials := map[string][]MeasuredTrial{}
	for n := 1; dec.More(); n++ {
		var l measurementLine
		if err := dec.Decode(&l); err != nil {
			return nil, nil, fmt.Errorf("tune: measurement log line %d: %w", n, err)
		}
		switch {
		case l.Task != nil && l.Trial == nil:
			tasks = append(tasks, *l.Task)
		case l.Trial != nil && l.Task == nil:
			trials[l.Trial.Workload] = append(trials[l.Trial.Workload], *l.Trial)
		default:
			return nil, nil, fmt.Errorf("tune: measurement log line %d: neither a task nor a trial", n)
		}
	}
	return tasks, trials, nil
}
