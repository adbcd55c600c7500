package serve

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilnrt/kiln/serve/servetest"
)

// fakeTuner stands in for kiln serve's tuner: each trial is a 2 ms "measurement" under
// the gate; one the gate stops is counted as paused and done again. It reports one
// record written, so the service rebuilds and swaps.
type fakeTuner struct {
	trials   int
	hold     time.Duration // how long each measurement runs (0: 2ms)
	mu       sync.Mutex
	jobs     []TuneJob
	measured atomic.Int64
	paused   atomic.Int64
}

func (f *fakeTuner) Tune(ctx context.Context, job TuneJob) (TuneResult, error) {
	f.mu.Lock()
	f.jobs = append(f.jobs, job)
	f.mu.Unlock()
	hold := f.hold
	if hold == 0 {
		hold = 2 * time.Millisecond
	}
	n := 0
	for n < f.trials {
		gctx, release, err := job.Gate.Acquire(ctx)
		if err != nil {
			return TuneResult{Trials: n}, err
		}
		t := time.NewTimer(hold)
		select {
		case <-gctx.Done():
		case <-t.C:
		}
		t.Stop()
		stopped := gctx.Err() != nil
		release()
		if stopped {
			f.paused.Add(1)
			continue
		}
		n++
		f.measured.Add(1)
		job.Progress(n, 0)
	}
	return TuneResult{Trials: n, Records: 1}, nil
}

func (f *fakeTuner) jobsSoFar() []TuneJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.jobs)
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBackgroundTuningSwapsUnderSteadyLoadWithoutFailures: with a client sending
// requests with short pauses, background tuning measures its trials in the gaps, the
// model is rebuilt (the engine loads it again) and swapped in, the new version keeps
// the statistics, and not one request fails.
func TestBackgroundTuningSwapsUnderSteadyLoadWithoutFailures(t *testing.T) {
	repo, x, want := testRepo(t)
	eng := &servetest.Engine{}
	ft := &fakeTuner{trials: 12}
	s, err := New(Options{Repository: repo, Engine: eng, Instances: 2, Tune: TuneOptions{Tuner: ft, IdleAfter: 5 * time.Millisecond, Trials: 12}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ok, failed, wrong atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the steady load: a request, a short pause
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := s.Infer(context.Background(), request(x))
			switch {
			case err != nil:
				failed.Add(1)
				t.Log(err)
			case !near(resp.Outputs[0].Data, want):
				wrong.Add(1)
			default:
				ok.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	s.mu.RLock()
	before := s.models["mlp"][0]
	s.mu.RUnlock()
	swaps := func() float64 { return testutil.ToFloat64(s.tuner.swaps.WithLabelValues("mlp")) }
	waitFor(t, "the tuned executable's swap", func() bool { return swaps() >= 1 })
	okAtSwap := ok.Load()
	waitFor(t, "requests on the swapped-in version", func() bool { return ok.Load() >= okAtSwap+10 })
	close(stop)
	wg.Wait()

	if failed.Load() != 0 || wrong.Load() != 0 {
		t.Fatalf("%d requests failed and %d answered wrongly under background tuning (%d succeeded)", failed.Load(), wrong.Load(), ok.Load())
	}
	jobs := ft.jobsSoFar()
	if len(jobs) != 1 || jobs[0].Model != "mlp/1" || !slices.Equal(jobs[0].Shapes["x"], []int64{int64(x.Shape[0]), int64(x.Shape[1])}) {
		t.Fatalf("tuning sessions %+v, want one for mlp/1 with the served shape", jobs)
	}
	if got := testutil.ToFloat64(s.tuner.trials.WithLabelValues("mlp", "valid")); got != 12 || ft.measured.Load() != 12 {
		t.Errorf("kiln_tune_trials_total{outcome=valid} %v, measured %d, want 12", got, ft.measured.Load())
	}
	if swaps() != 1 {
		t.Errorf("%v swaps, want 1 (a version is tuned once)", swaps())
	}
	if n := eng.LoadsOf("mlp/1"); n < 2 {
		t.Errorf("mlp loaded %d times, want the rebuild too", n)
	}
	s.mu.RLock()
	after := s.models["mlp"][0]
	s.mu.RUnlock()
	if after == before || !before.retired {
		t.Fatalf("the version was not swapped (same model %v, old retired %v)", after == before, before.retired)
	}
	if got := after.stats.success.n.Load(); got < ok.Load() {
		t.Errorf("the swapped-in version counts %d successes, want the %d of both", got, ok.Load())
	}
}

// TestBackgroundTuningPausesWhenARequestArrives: a measurement running while the server
// is idle is stopped by the next request, which succeeds; kiln_tune_running follows.
func TestBackgroundTuningPausesWhenARequestArrives(t *testing.T) {
	repo, x, _ := testRepo(t)
	ft := &fakeTuner{trials: 1, hold: time.Hour}
	s, err := New(Options{Repository: repo, Engine: &servetest.Engine{}, Tune: TuneOptions{Tuner: ft, IdleAfter: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	running := func() float64 { return testutil.ToFloat64(s.tuner.running) }
	waitFor(t, "a measurement under the gate", func() bool { return running() == 1 })
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatalf("a request arriving during tuning: %v", err)
	}
	waitFor(t, "the measurement to stop", func() bool { return ft.paused.Load() == 1 })
	if ft.measured.Load() != 0 {
		t.Errorf("the interrupted measurement counted as measured")
	}
	waitFor(t, "tuning to resume when idle again", func() bool { return running() == 1 })
}

// TestLoadsAtStartAreNotTraffic: warm-up samples compile and run the model at start,
// but no request does, so background tuning has nothing to tune until one comes.
func TestLoadsAtStartAreNotTraffic(t *testing.T) {
	repo, x, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
model_warmup [ { name: "zeros" count: 2 inputs { key: "x" value: { data_type: TYPE_FP32 dims: [ 3, 8 ] zero_data: true } } } ]
`)
	ft := &fakeTuner{trials: 1}
	s, err := New(Options{Repository: repo, Engine: &servetest.Engine{}, LoadMode: LoadEager, Tune: TuneOptions{Tuner: ft, IdleAfter: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waitFor(t, "the load at start", func() bool {
		for _, st := range s.Index() {
			if st.Name == "mlp" && st.Compiled > 0 {
				return true
			}
		}
		return false
	})
	if m, _, _ := s.tuner.next(); m != nil {
		t.Fatalf("model %q counted as traffic after its load at start alone", m.name)
	}
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatal(err)
	}
	if m, sigs, _ := s.tuner.next(); m == nil || m.name != "mlp" || len(sigs) != 1 {
		t.Fatalf("after a request: next %v %v, want mlp with its shapes", m, sigs)
	}
}

// TestTuneOffByDefaultDoesNothing: without Options.Tune the service has no tuner,
// counts no traffic and exports no kiln_tune_* series.
func TestTuneOffByDefaultDoesNothing(t *testing.T) {
	repo, x, _ := testRepo(t)
	s, err := New(Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if _, err := s.Infer(context.Background(), request(x)); err != nil {
			t.Fatal(err)
		}
	}
	if s.tuner != nil {
		t.Fatal("a background tuner without Options.Tune.Tuner")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Metrics())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "kiln_tune_") {
			t.Errorf("series %s with tuning off", mf.GetName())
		}
	}
}

// TestIdleGateWaitsForIdleTimeAndStopsWorkOnArrival drives the idle detection with an
// injected clock: work is admitted only after IdleAfter with nothing in flight, an
// arrival ends the work's context, and the duty cycle rests in proportion.
func TestIdleGateWaitsForIdleTimeAndStopsWorkOnArrival(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	admitted := func(g *idleGate) (context.Context, func(), bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		w, release, err := g.Acquire(ctx)
		return w, release, err == nil
	}
	g := newIdleGate(context.Background(), time.Second, 1, clock)
	if _, _, ok := admitted(g); ok {
		t.Fatal("admitted before the server was idle for IdleAfter")
	}
	advance(time.Second)
	w, release, ok := admitted(g)
	if !ok {
		t.Fatal("not admitted after IdleAfter idle")
	}
	if !g.arrive() || w.Err() == nil || g.pausesSoFar() != 1 {
		t.Fatalf("an arrival did not stop the work (ctx %v, pauses %d)", w.Err(), g.pausesSoFar())
	}
	release()
	advance(time.Hour)
	if _, _, ok := admitted(g); ok {
		t.Fatal("admitted while a request is in flight")
	}
	g.depart()
	advance(500 * time.Millisecond)
	if _, _, ok := admitted(g); ok {
		t.Fatal("admitted before IdleAfter since the last request left")
	}
	advance(600 * time.Millisecond)
	if _, release, ok := admitted(g); !ok {
		t.Fatal("not admitted IdleAfter after the last request left")
	} else {
		release()
	}

	half := newIdleGate(context.Background(), time.Second, 0.5, clock)
	advance(time.Second)
	_, release, ok = admitted(half)
	if !ok {
		t.Fatal("duty 0.5: not admitted when idle")
	}
	advance(2 * time.Second) // the work took 2s: it rests 2s
	release()
	advance(1900 * time.Millisecond)
	if _, _, ok := admitted(half); ok {
		t.Fatal("duty 0.5: admitted during the rest")
	}
	advance(200 * time.Millisecond)
	if _, _, ok := admitted(half); !ok {
		t.Fatal("duty 0.5: not admitted after the rest")
	}
}
