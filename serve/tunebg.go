package serve

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// backgroundTuner runs Options.Tune: it counts each model version's executions per
// input shape signature (saw, from variantWaiting), and while the server is idle
// (idleGate) tunes the version executed most that is not tuned yet, one session at a
// time, for its most executed shapes; when the session wrote records it rebuilds the
// version's executables and swaps them in (swapTuned). A version is tuned once per
// content digest: a swapped-in version has the digest of the one it replaces.
type backgroundTuner struct {
	svc  *Service
	o    TuneOptions
	gate *idleGate
	wg   sync.WaitGroup

	mu      sync.Mutex
	traffic map[string]*traffic // by tuneKey
	done    map[string]bool     // tuned (or given up on), by tuneKey

	trials  *prometheus.CounterVec // model, outcome (valid, invalid)
	speedup *prometheus.GaugeVec   // model
	swaps   *prometheus.CounterVec // model
	running prometheus.GaugeFunc
}

// traffic is one model version's executions.
type traffic struct {
	m      *model
	n      int64
	shapes map[string]*shapeCount // by shape key
}

type shapeCount struct {
	shapes map[string][]int64
	n      int64
}

func newBackgroundTuner(s *Service, o TuneOptions) *backgroundTuner {
	o = o.withDefaults()
	bt := &backgroundTuner{svc: s, o: o, gate: newIdleGate(s.ctx, o.IdleAfter, o.Duty, o.Now),
		traffic: map[string]*traffic{}, done: map[string]bool{},
		trials: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_tune_trials_total",
			Help: "Candidates measured by background tuning, by outcome (valid, invalid)."}, []string{"model", "outcome"}),
		speedup: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kiln_tune_speedup",
			Help: "Measured speedup of the executable rebuilt with the model's tuning records over the one it replaced."}, []string{"model"}),
		swaps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_tune_swaps_total",
			Help: "Executables rebuilt with new tuning records and swapped in."}, []string{"model"}),
	}
	bt.running = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kiln_tune_running",
		Help: "1 while background tuning measures or rebuilds (the server is idle), 0 otherwise."}, func() float64 {
		if bt.gate.working() {
			return 1
		}
		return 0
	})
	return bt
}

func tuneKey(m *model) string { return fmt.Sprintf("%s/%d@%s", m.name, m.version, m.src.Digest) }

// saw counts an execution of m with the shapes (nil receiver: tuning is off).
func (bt *backgroundTuner) saw(m *model, shapes map[string][]int64, key string) {
	if bt == nil || m.src == nil {
		return
	}
	k := tuneKey(m)
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if bt.done[k] {
		return
	}
	t := bt.traffic[k]
	if t == nil {
		t = &traffic{shapes: map[string]*shapeCount{}}
		bt.traffic[k] = t
	}
	t.m = m
	t.n++
	sc := t.shapes[key]
	if sc == nil {
		if len(t.shapes) >= 16 { // a bound on what is remembered; the most executed come first anyway
			return
		}
		sc = &shapeCount{shapes: shapes}
		t.shapes[key] = sc
	}
	sc.n++
}

// next is the untuned version executed most (at least MinExecutions times) that is
// still served, and its shape signatures, most executed first.
func (bt *backgroundTuner) next() (*model, []map[string][]int64, string) {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	var best *traffic
	var bestKey string
	for k, t := range bt.traffic {
		if bt.done[k] || t.n < bt.o.MinExecutions || !t.m.serving() {
			continue
		}
		if best == nil || t.n > best.n || (t.n == best.n && k < bestKey) {
			best, bestKey = t, k
		}
	}
	if best == nil {
		return nil, nil, ""
	}
	scs := make([]*shapeCount, 0, len(best.shapes))
	for _, sc := range best.shapes {
		scs = append(scs, sc)
	}
	sort.SliceStable(scs, func(i, j int) bool { return scs[i].n > scs[j].n })
	var sigs []map[string][]int64
	for _, sc := range scs {
		sigs = append(sigs, sc.shapes)
	}
	return best.m, sigs, bestKey
}

// serving reports whether the version is READY and not retired.
func (m *model) serving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.retired && m.state == StateReady
}

func (bt *backgroundTuner) start() {
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		bt.loop()
	}()
}

// loop tunes one version after another until the service closes.
func (bt *backgroundTuner) loop() {
	ctx := bt.svc.ctx
	for ctx.Err() == nil {
		m, sigs, key := bt.next()
		if m == nil {
			select {
			case <-ctx.Done():
			case <-time.After(bt.o.IdleAfter):
			}
			continue
		}
		bt.session(ctx, m, sigs)
		bt.mu.Lock()
		bt.done[key] = true
		delete(bt.traffic, key)
		bt.mu.Unlock()
	}
}

// loggingGate is the idle gate as a tuning session sees it: it logs the pauses' ends.
type loggingGate struct {
	bt    *backgroundTuner
	label string
	seen  int
}

func (g *loggingGate) Acquire(ctx context.Context) (context.Context, func(), error) {
	wctx, release, err := g.bt.gate.Acquire(ctx)
	if err == nil {
		if n := g.bt.gate.pausesSoFar(); n > g.seen {
			g.seen = n
			g.bt.svc.log.Info("tuning resumes: the server is idle", zap.String("model", g.label))
		}
	}
	return wctx, release, err
}

// session tunes m for its shapes and, when records were written, swaps in the rebuilt
// executables.
func (bt *backgroundTuner) session(ctx context.Context, m *model, sigs []map[string][]int64) {
	label := fmt.Sprintf("%s/%d", m.name, m.version)
	log := bt.svc.log.With(zap.String("model", m.name), zap.Int64("version", m.version))
	log.Info("tuning starts", zap.Any("shapes", sigs[0]), zap.Duration("budget", bt.o.Budget), zap.Int("trials", bt.o.Trials),
		zap.Int("threads", bt.o.Threads), zap.Float64("duty", bt.o.Duty))
	var last [2]int
	job := TuneJob{Model: label, Path: m.path, Shapes: sigs[0], Budget: bt.o.Budget, Trials: bt.o.Trials, Threads: bt.o.Threads,
		Gate: &loggingGate{bt: bt, label: label, seen: bt.gate.pausesSoFar()},
		Progress: func(trials, invalid int) {
			valid := (trials - invalid) - (last[0] - last[1])
			bt.trials.WithLabelValues(m.name, "valid").Add(float64(max(valid, 0)))
			bt.trials.WithLabelValues(m.name, "invalid").Add(float64(max(invalid-last[1], 0)))
			last = [2]int{trials, invalid}
		}}
	start := time.Now()
	res, err := bt.o.Tuner.Tune(ctx, job)
	if job.Progress != nil && res.Trials > last[0] {
		job.Progress(res.Trials, res.Invalid)
	}
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		log.Warn("tuning failed", zap.Error(err))
		return
	case res.Records == 0:
		log.Info("tuning found nothing faster", zap.Int("trials", res.Trials), zap.Int("invalid", res.Invalid), zap.Duration("took", time.Since(start)))
		return
	}
	log.Info("tuning wrote records: rebuilding", zap.Int("trials", res.Trials), zap.Int("invalid", res.Invalid), zap.Int("records", res.Records),
		zap.Duration("took", time.Since(start)))
	if err := bt.swapTuned(ctx, m, sigs); err != nil && ctx.Err() == nil {
		log.Warn("tuned executable not swapped in", zap.Error(err))
	}
}

// errPaused: an inference arrived while the rebuild or its measurement ran.
var errPaused = errors.New("paused: an inference arrived")

// swapTuned rebuilds m's executables (the journal keys them with the new records'
// digest), measures the rebuilt one against the one serving, and swaps them in:
// each try runs while the server is idle, and one that an inference interrupts is
// thrown away and made again at the next idle time.
func (bt *backgroundTuner) swapTuned(ctx context.Context, m *model, sigs []map[string][]int64) error {
	for {
		wctx, release, err := bt.gate.Acquire(ctx)
		if err != nil {
			return err
		}
		err = bt.svc.rebuildTuned(wctx, m, sigs, func(speedup float64) {
			bt.speedup.WithLabelValues(m.name).Set(speedup)
			bt.swaps.WithLabelValues(m.name).Inc()
		})
		release()
		if errors.Is(err, errPaused) && ctx.Err() == nil {
			bt.svc.log.Info("tuning paused: a request arrived during the rebuild", zap.String("model", m.name), zap.Int64("version", m.version))
			continue
		}
		return err
	}
}

// describe and collect add background tuning's series to Metrics.
func (bt *backgroundTuner) describe(ch chan<- *prometheus.Desc) {
	if bt == nil {
		return
	}
	bt.trials.Describe(ch)
	bt.speedup.Describe(ch)
	bt.swaps.Describe(ch)
	bt.running.Describe(ch)
}

func (bt *backgroundTuner) collect(ch chan<- prometheus.Metric) {
	if bt == nil {
		return
	}
	bt.trials.Collect(ch)
	bt.speedup.Collect(ch)
	bt.swaps.Collect(ch)
	bt.running.Collect(ch)
}
