package tune

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels"
)

// fakeMeasurer times one workload "w" whose speedup is a known function of knobs A and
// B (16 values each), best at A=11, B=5: no compile, no noise.
type fakeMeasurer struct{}

func fakeSpeedup(k kernels.Knobs) float64 {
	a, b := float64(k["A"]-11), float64(k["B"]-5)
	return max(2-(a*a+b*b)/12, 0.1)
}

func (fakeMeasurer) Measure(_ context.Context, req Request) (*Response, error) {
	vals := make([]int64, 16)
	for i := range vals {
		vals[i] = int64(i)
	}
	resp := &Response{Target: "fake"}
	if req.Space {
		resp.Kernels = []Kernel{{Workload: "w", Anchor: "fake", Strategy: "s", Launches: 1, Features: make([]float64, numLoopFeatures),
			Space: []engine.TuneOption{{Strategy: "s", Knobs: []engine.TuneKnob{{Name: "A", Values: vals, Default: 0}, {Name: "B", Values: vals, Default: 0}}}}}}
	}
	for _, a := range req.Assignments {
		res := Result{Seconds: map[string]float64{"w": 1 / fakeSpeedup(kernels.Knobs{"A": 0, "B": 0})}, Total: 1}
		if c, ok := a["w"]; ok {
			k, err := kernels.ParseKnobs(c.Knobs)
			if err != nil {
				return nil, err
			}
			res.Seconds["w"], res.Applied = 1/fakeSpeedup(k), []string{"w"}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// TestCostModelGuidedSearchBeatsRandomSearch: on a known speedup surface, the search
// with the GBDT cost model finds faster candidates within 25 trials than random
// search with the same seeds (summed over eight seeds).
func TestCostModelGuidedSearchBeatsRandomSearch(t *testing.T) {
	var guided, random float64
	for seed := uint64(1); seed <= 8; seed++ {
		for _, randomOnly := range []bool{false, true} {
			rep, err := Run(context.Background(), Options{Model: "fake", Measurer: fakeMeasurer{}, Trials: 25, PerRound: 2, Seed: seed, randomOnly: randomOnly})
			if err != nil {
				t.Fatal(err)
			}
			best := rep.Tasks[0].BestSpeedup
			if randomOnly {
				random += best
			} else {
				guided += best
			}
		}
	}
	t.Logf("mean best speedup: guided %.3f, random %.3f", guided/8, random/8)
	if !(guided > random) {
		t.Fatalf("guided search found ×%.3f on average, random ×%.3f: the cost model does not help", guided/8, random/8)
	}
}

// TestMeasurementLogHoldsEveryTaskAndTrial: a run with a measurement log writes its
// task with its space and features, and one line per measured candidate with the
// speedup the run saw, which ReadMeasurements reads back.
func TestMeasurementLogHoldsEveryTaskAndTrial(t *testing.T) {
	var log bytes.Buffer
	rep, err := Run(context.Background(), Options{Model: "fake", Measurer: fakeMeasurer{}, Trials: 20, PerRound: 2, Seed: 1, Measurements: &log})
	if err != nil {
		t.Fatal(err)
	}
	tasks, trials, err := ReadMeasurements(&log)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].Workload != "w" || len(tasks[0].Space) != 1 || len(tasks[0].Features) != numLoopFeatures {
		t.Fatalf("tasks %+v", tasks)
	}
	got := trials["w"]
	if len(got) != rep.Trials || rep.Trials != 20 {
		t.Fatalf("%d trials logged, the run measured %d", len(got), rep.Trials)
	}
	for i, tr := range got {
		h := rep.Tasks[0].history[i]
		k, _ := kernels.ParseKnobs(h.c.Knobs)
		if tr.Candidate != h.c.String() || tr.Speedup != h.speedup || math.Abs(tr.Speedup-fakeSpeedup(k)/fakeSpeedup(kernels.Knobs{"A": 0, "B": 0})) > 1e-9 {
			t.Fatalf("trial %d logged %+v, measured %s ×%v", i, tr, h.c, h.speedup)
		}
	}
}
