package tune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kilnrt/kiln/compilecache"
)

// Options configure a tuning run.
type Options struct {
	Model   string             // the model file
	Inputs  map[string][]int64 // input shapes to tune for
	Threads int                // 0: every core
	// Journal receives the records (nil: none written); its directory also keeps the
	// children's kernel objects.
	Journal  *compilecache.Journal
	Measurer Measurer
	// Trials bounds the candidates measured (0: no bound); Budget the run's time (0:
	// none). At least one of them must be set.
	Trials int
	Budget time.Duration
	// PerRound is how many assignments one measurement compiles and times beside the
	// reference (0: 3); Reps the profiled runs of each (0: 5).
	PerRound, Reps int
	// MaxTasks bounds the tasks tuned, the most expensive first (0: 24).
	MaxTasks int
	// MinSpeedup is the least confirmed speedup a record is written for (0: 1.03).
	MinSpeedup float64
	Seed       uint64
	Progress   func(Progress) // nil: no reports
	// Measurements, when set, receives the run's tasks and every measured candidate
	// as a measurement log (measurements.go), for studying the cost model.
	Measurements io.Writer
	// randomOnly turns the cost model off (tests compare the search with and without)
	randomOnly bool
}

// Progress is a tuning run's state after each measurement.
type Progress struct {
	Trials, Invalid int
	Elapsed, ETA    time.Duration // ETA: to the budget or the trial bound (0: unknown)
	Tasks           []*Task
}

// Task is one workload being tuned: the kernel, its share of the model's kernel time,
// and what was found.
type Task struct {
	Kernel
	Seconds     float64 // per inference, default schedule, reference run
	Share       float64 // of the model's kernel time
	Trials      int
	Invalid     int
	Best        Candidate
	BestSpeedup float64 // 1: the default is the best found
	Confirmed   float64 // the best's speedup measured again at the end (0: not yet)
	Recorded    bool
	// Failures counts the invalid candidates by reason (its first line, shortened).
	Failures map[string]int `json:",omitempty"`
	space    space
	seen     map[string]bool
	history  []trial
}

// trial is one measured candidate.
type trial struct {
	p       point
	c       Candidate
	speedup float64 // 0: invalid
	why     string
}

// Report is a finished run.
type Report struct {
	Tasks           []*Task
	Trials, Invalid int
	Target          string // the fingerprint records were written for
	Threads         int    // the thread count they were measured at
	Clock           string // what the kernels were timed by (Response.Clock)
	Reference       float64
	Took            time.Duration
}

// ErrNoTasks: nothing in the model has a search space.
var ErrNoTasks = errors.New("no tunable kernels")

// Run tunes the model: it measures the defaults (the tasks and their times), then in
// rounds measures candidates of the tasks, drawing tasks by their share of the model's
// kernel time, each candidate chosen by the cost model among mutations of the task's
// best candidates and random points (random alone until the model has data). A
// candidate that fails to build, crashes, hangs or computes a wrong result is recorded
// invalid and the run goes on. At the end the best candidates are measured again
// together and those still faster by MinSpeedup become records in the journal.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Trials <= 0 && o.Budget <= 0 {
		return nil, errors.New("tune: give a trial count or a time budget")
	}
	o.PerRound = cmp0(o.PerRound, 3)
	o.Reps = cmp0(o.Reps, 5)
	o.MaxTasks = cmp0(o.MaxTasks, 24)
	if o.MinSpeedup == 0 {
		o.MinSpeedup = 1.03
	}
	start := time.Now()
	r := &runner{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x74756e65)), start: start}
	ref, err := o.Measurer.Measure(ctx, r.request(true, nil))
	if err != nil {
		return nil, fmt.Errorf("tune: measuring the defaults: %w", err)
	}
	r.rep = &Report{Target: ref.Target, Threads: ref.Threads, Clock: ref.Clock, Reference: ref.Results[0].Total}
	total := 0.0
	for _, s := range ref.Results[0].Seconds {
		total += s
	}
	for _, k := range ref.Kernels {
		sp := space{opts: k.Space}
		if len(sp.opts) == 0 || !sp.tunable() || ref.Results[0].Seconds[k.Workload] <= 0 {
			continue
		}
		t := &Task{Kernel: k, Seconds: ref.Results[0].Seconds[k.Workload], BestSpeedup: 1, space: sp, seen: map[string]bool{}}
		t.Share = t.Seconds / math.Max(total, 1e-12)
		t.Best = sp.candidate(sp.defaultPoint())
		t.seen[t.Best.String()] = true
		r.rep.Tasks = append(r.rep.Tasks, t)
	}
	sort.SliceStable(r.rep.Tasks, func(i, j int) bool { return r.rep.Tasks[i].Seconds > r.rep.Tasks[j].Seconds })
	if len(r.rep.Tasks) > o.MaxTasks {
		r.rep.Tasks = r.rep.Tasks[:o.MaxTasks]
	}
	if len(r.rep.Tasks) == 0 {
		return nil, fmt.Errorf("tune: %s: %w", o.Model, ErrNoTasks)
	}
	if err := r.logTasks(); err != nil {
		return nil, err
	}
	r.report()
	for !r.done() {
		if err := ctx.Err(); err != nil {
			break
		}
		if err := r.round(ctx); err != nil {
			return nil, err
		}
		r.report()
	}
	if err := r.confirm(ctx); err != nil {
		return nil, err
	}
	r.rep.Took = time.Since(start)
	return r.rep, r.logErr
}

func cmp0(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

type runner struct {
	o     Options
	rng   *rand.Rand
	rep   *Report
	start time.Time
	model *GBDT
	nfit  int
	// exhausted: a round found no fresh candidate
	exhausted bool
	logErr    error // the measurement log's failure
}

func (r *runner) request(space bool, as []Assignment) Request {
	dir := ""
	if r.o.Journal != nil && r.o.Journal.Policy() != compilecache.PolicyOff {
		dir = r.o.Journal.Dir()
	}
	return Request{Model: r.o.Model, Inputs: r.o.Inputs, Journal: dir, Threads: r.o.Threads, Seed: r.o.Seed + 1,
		Reps: r.o.Reps, Space: space, Assignments: append([]Assignment{{}}, as...)}
}

func (r *runner) done() bool {
	if r.o.Trials > 0 && r.rep.Trials >= r.o.Trials {
		return true
	}
	if r.o.Budget > 0 && time.Since(r.start) >= r.o.Budget {
		return true
	}
	if r.exhausted {
		return true
	}
	// every point of every task measured
	for _, t := range r.rep.Tasks {
		if len(t.seen) < t.space.size() {
			return false
		}
	}
	return true
}

func (r *runner) report() {
	if r.o.Progress == nil {
		return
	}
	p := Progress{Trials: r.rep.Trials, Invalid: r.rep.Invalid, Elapsed: time.Since(r.start), Tasks: r.rep.Tasks}
	switch {
	case r.o.Budget > 0:
		p.ETA = max(r.o.Budget-p.Elapsed, 0)
	case r.o.Trials > 0 && r.rep.Trials > 0:
		p.ETA = time.Duration(float64(p.Elapsed) / float64(r.rep.Trials) * float64(r.o.Trials-r.rep.Trials))
	}
	r.o.Progress(p)
}

// pending is a candidate in a round's assignment.
type pending struct {
	task *Task
	p    point
	c    Candidate
}

// round measures PerRound assignments, each giving a fresh candidate to several tasks
// drawn by their share of the time.
func (r *runner) round(ctx context.Context) error {
	r.fit()
	var as []Assignment
	var cands [][]pending
	for a := 0; a < r.o.PerRound; a++ {
		left := r.o.Trials - r.rep.Trials - countPending(cands)
		if r.o.Trials > 0 && left <= 0 {
			break
		}
		asg := Assignment{}
		var ps []pending
		for _, t := range r.drawTasks(min(len(r.rep.Tasks), 4)) {
			if r.o.Trials > 0 && len(ps) >= left {
				break
			}
			p, ok := r.next(t)
			if !ok {
				continue
			}
			c := t.space.candidate(p)
			t.seen[c.String()] = true
			asg[t.Workload] = c
			ps = append(ps, pending{task: t, p: p, c: c})
		}
		if len(ps) > 0 {
			as, cands = append(as, asg), append(cands, ps)
		}
	}
	if len(as) == 0 {
		r.exhausted = true // no fresh candidate found for any task
		return nil
	}
	return r.measure(ctx, as, cands)
}

func countPending(c [][]pending) int {
	n := 0
	for _, ps := range c {
		n += len(ps)
	}
	return n
}

// measure runs the assignments and records each candidate's outcome; assignments that
// fail are measured again candidate by candidate, halving on crashes, so that only the
// candidate at fault is invalid.
func (r *runner) measure(ctx context.Context, as []Assignment, cands [][]pending) error {
	resp, err := r.o.Measurer.Measure(ctx, r.request(false, as))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, ErrCrashed) && !errors.Is(err, ErrHung) {
			return err
		}
		if len(as) == 1 && len(cands[0]) == 1 {
			r.record(cands[0][0], 0, err.Error())
			return nil
		}
		return r.split(ctx, cands, err)
	}
	base := defaults(resp, as)
	var retry [][]pending
	for i, ps := range cands {
		res := resp.Results[i+1]
		if res.Err != "" || res.Wrong != "" {
			if len(ps) == 1 {
				r.record(ps[0], 0, res.Err+res.Wrong)
			} else {
				for _, p := range ps {
					retry = append(retry, []pending{p})
				}
			}
			continue
		}
		for _, p := range ps {
			if !slices.Contains(res.Applied, p.task.Workload) {
				r.record(p, 0, "not applicable: the strategy refused the kernel")
				continue
			}
			d, c := base[p.task.Workload], res.Seconds[p.task.Workload]
			if d <= 0 || c <= 0 {
				r.record(p, 0, "no time measured")
				continue
			}
			r.record(p, d/c, "")
		}
	}
	if len(retry) > 0 {
		return r.measureEach(ctx, retry)
	}
	return nil
}

// defaults is each workload's default time in a measurement, from the reference's and
// every valid assignment's that left the workload's default kernel in place (each a
// timing of that same kernel in the same run): on the wall clock the fastest of them,
// which discounts a disturbed reference; on the thread CPU clock, which the machine's
// load does not disturb, their mean (the least of several would favour rounds with more
// copies).
func defaults(resp *Response, as []Assignment) map[string]float64 {
	if resp.Clock == ClockThreadCPU {
		sum, n := map[string]float64{}, map[string]float64{}
		forDefaults(resp, as, func(w string, sec float64) { sum[w] += sec; n[w]++ })
		for w := range sum {
			sum[w] /= n[w]
		}
		return sum
	}
	base := map[string]float64{}
	forDefaults(resp, as, func(w string, sec float64) {
		if b, ok := base[w]; !ok || sec < b {
			base[w] = sec
		}
	})
	return base
}

// forDefaults calls f with every timing of a workload's default kernel in a
// measurement.
func forDefaults(resp *Response, as []Assignment, f func(w string, sec float64)) {
	for i, res := range resp.Results {
		if res.Err != "" || res.Wrong != "" {
			continue
		}
		for w, sec := range res.Seconds {
			if i > 0 && slices.Contains(res.Applied, w) {
				continue
			}
			if _, given := as[max(i-1, 0)][w]; i > 0 && given {
				continue // assigned, even if the strategy refused it: not the same kernel for sure
			}
			f(w, sec)
		}
	}
}

// split measures halves of a failed round's candidates, each candidate alone in its
// assignment.
func (r *runner) split(ctx context.Context, cands [][]pending, cause error) error {
	var singles [][]pending
	for _, ps := range cands {
		for _, p := range ps {
			singles = append(singles, []pending{p})
		}
	}
	if len(singles) == 1 {
		r.record(singles[0][0], 0, cause.Error())
		return nil
	}
	h := len(singles) / 2
	if err := r.measureEach(ctx, singles[:h]); err != nil {
		return err
	}
	return r.measureEach(ctx, singles[h:])
}

func (r *runner) measureEach(ctx context.Context, singles [][]pending) error {
	as := make([]Assignment, len(singles))
	for i, s := range singles {
		as[i] = Assignment{s[0].task.Workload: s[0].c}
	}
	return r.measure(ctx, as, singles)
}

// record notes a candidate's outcome (speedup 0: invalid, with why).
func (r *runner) record(p pending, speedup float64, why string) {
	t := p.task
	t.Trials++
	r.rep.Trials++
	if speedup <= 0 {
		t.Invalid++
		r.rep.Invalid++
		if t.Failures == nil {
			t.Failures = map[string]int{}
		}
		line, _, _ := strings.Cut(why, "\n")
		if len(line) > 160 {
			line = line[:160] + "…"
		}
		t.Failures[line]++
	} else if speedup > t.BestSpeedup {
		t.Best, t.BestSpeedup = p.c, speedup
	}
	t.history = append(t.history, trial{p: p.p, c: p.c, speedup: speedup, why: why})
	r.logTrial(t, p.p, p.c, speedup)
}

// drawTasks draws n distinct tasks with probability proportional to their share of the
// time (tasks whose space is exhausted are skipped).
func (r *runner) drawTasks(n int) []*Task {
	var pool []*Task
	for _, t := range r.rep.Tasks {
		if len(t.seen) < t.space.size() {
			pool = append(pool, t)
		}
	}
	var out []*Task
	for len(out) < n && len(pool) > 0 {
		sum := 0.0
		for _, t := range pool {
			sum += t.Share + 1e-3
		}
		x := r.rng.Float64() * sum
		i := 0
		for ; i < len(pool)-1; i++ {
			x -= pool[i].Share + 1e-3
			if x <= 0 {
				break
			}
		}
		out = append(out, pool[i])
		pool = slices.Delete(pool, i, i+1)
	}
	return out
}

// next is the task's next candidate: with a trained cost model, the best-scored of
// mutations of its three best candidates and random points (a quarter of the time a
// random point, to keep exploring); a random point before.
func (r *runner) next(t *Task) (point, bool) {
	fresh := func(p point) bool { return !t.seen[t.space.candidate(p).String()] }
	if r.model == nil || r.rng.IntN(4) == 0 {
		for i := 0; i < 64; i++ {
			if p := t.space.random(r.rng); fresh(p) {
				return p, true
			}
		}
		return point{}, false
	}
	parents := []point{t.space.defaultPoint()}
	hist := slices.Clone(t.history)
	sort.SliceStable(hist, func(i, j int) bool { return hist[i].speedup > hist[j].speedup })
	for i := 0; i < len(hist) && i < 3; i++ {
		if hist[i].speedup > 0 {
			parents = append(parents, hist[i].p)
		}
	}
	var best point
	bestScore, found := math.Inf(-1), false
	for i := 0; i < 48; i++ {
		var p point
		if i%4 == 3 {
			p = t.space.random(r.rng)
		} else {
			p = t.space.mutate(parents[r.rng.IntN(len(parents))], r.rng)
			if r.rng.IntN(2) == 0 {
				p = t.space.mutate(p, r.rng)
			}
		}
		if !fresh(p) {
			continue
		}
		if s := r.model.Predict(t.space.encode(p, t.Features)); s > bestScore {
			best, bestScore, found = p, s, true
		}
	}
	return best, found
}

// fit retrains the cost model on every valid trial so far (log speedup; invalid
// candidates as a large slowdown), once there are at least 8.
func (r *runner) fit() {
	var x [][]float64
	var y []float64
	for _, t := range r.rep.Tasks {
		for _, h := range t.history {
			x = append(x, t.space.encode(h.p, t.Features))
			y = append(y, logSpeedup(h.speedup))
		}
	}
	if len(y) < 8 || len(y) == r.nfit || r.o.randomOnly {
		return
	}
	r.model, r.nfit = FitGBDT(x, y, DefaultGBDT), len(y)
}

// logSpeedup is the cost model's target for a measured speedup: its log, and for an
// invalid candidate (0) the log of a large slowdown.
func logSpeedup(s float64) float64 {
	if s > 0 {
		return math.Log(s)
	}
	return math.Log(0.25)
}

// confirm measures the tasks' best candidates again, all in one assignment, twice
// beside two copies of the defaults, with twice the repetitions; a task's confirmed
// speedup is the faster default over the faster candidate, and a record is written
// for those still MinSpeedup faster.
func (r *runner) confirm(ctx context.Context) error {
	asg := Assignment{}
	var tasks []*Task
	for _, t := range r.rep.Tasks {
		if t.BestSpeedup >= r.o.MinSpeedup {
			asg[t.Workload] = t.Best
			tasks = append(tasks, t)
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	req := r.request(false, []Assignment{asg, {}, asg})
	req.Reps *= 2
	resp, err := r.o.Measurer.Measure(context.WithoutCancel(ctx), req)
	if err != nil {
		// the candidates passed alone; together they are not trusted
		return nil
	}
	for _, res := range resp.Results {
		if res.Err != "" || res.Wrong != "" {
			return nil
		}
	}
	fastest := func(w string, i, j int) float64 {
		a, b := resp.Results[i].Seconds[w], resp.Results[j].Seconds[w]
		if a <= 0 || b <= 0 {
			return max(a, b)
		}
		return min(a, b)
	}
	for _, t := range tasks {
		d, c := fastest(t.Workload, 0, 2), fastest(t.Workload, 1, 3)
		if d <= 0 || c <= 0 || !slices.Contains(resp.Results[1].Applied, t.Workload) {
			continue
		}
		t.Confirmed = d / c
		if t.Confirmed < r.o.MinSpeedup || r.o.Journal == nil || r.rep.Target == "" {
			continue
		}
		kept, err := r.o.Journal.PutTuning(compilecache.TuningRecord{Workload: t.Workload, Target: r.rep.Target, Threads: r.rep.Threads, Strategy: t.Best.Strategy,
			Knobs: t.Best.Knobs, Speedup: t.Confirmed, Trials: t.Trials, Label: t.Anchor})
		if err != nil {
			return err
		}
		t.Recorded = kept
	}
	return nil
}
