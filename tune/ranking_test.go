package tune

import (
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestSpearmanOfKnownOrders(t *testing.T) {
	for _, c := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{[]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		{[]float64{1, 2, 3, 4, 5}, []float64{2, 1, 4, 3, 5}, 0.8},
		{[]float64{1, 2, 2, 3}, []float64{1, 2, 2, 3}, 1},
	} {
		if got := Spearman(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Spearman(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// heldOut says whether a candidate is in the test part of a task's measurements: a
// fixed hash of the workload and the candidate, about one in three.
func heldOut(workload, candidate string) bool {
	h := fnv.New32a()
	h.Write([]byte(workload + "|" + candidate))
	return h.Sum32()%3 == 0
}

// rankedOp says whether a task is one of the convolution and matrix product tasks
// the ranking is checked on.
func rankedOp(workload string) bool {
	for _, p := range []string{"conv-", "matmul-", "gemm-", "fusedmatmul-"} {
		if strings.HasPrefix(workload, p) {
			return true
		}
	}
	return false
}

// rankCheck is one recorded run's ranking: the held-out candidates of its convolution
// and matrix product tasks, pooled and by task.
type rankCheck struct {
	file          string
	trained       int
	pooled        float64
	n             int
	tasks         map[string]float64 // tasks with at least 12 held-out candidates
	taskN         map[string]int
	pred, measure []float64
}

// rankHeldOut trains the cost model as the tuner trains it (every task of the run, the
// tuner's encoding, invalid candidates as a large slowdown) on the candidates of a
// measurement log that heldOut leaves in, and ranks the valid held-out candidates of
// its convolution and matrix product tasks.
func rankHeldOut(t *testing.T, path string) rankCheck {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tasks, trials, err := ReadMeasurements(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var x, hx [][]float64
	var y, hy []float64
	var hw []string
	for _, task := range tasks {
		if len(task.Features) != numLoopFeatures {
			t.Fatalf("%s: task %s has %d features, the model reads %d: record the measurements again", path, task.Workload, len(task.Features), numLoopFeatures)
		}
		sp := space{opts: task.Space}
		for _, tr := range trials[task.Workload] {
			enc := sp.encode(point{opt: tr.Opt, vals: tr.Vals}, task.Features)
			if !heldOut(task.Workload, tr.Candidate) {
				x, y = append(x, enc), append(y, logSpeedup(tr.Speedup))
			} else if tr.Speedup > 0 && rankedOp(task.Workload) {
				hx, hy, hw = append(hx, enc), append(hy, tr.Speedup), append(hw, task.Workload)
			}
		}
	}
	m := FitGBDT(x, y, DefaultGBDT)
	rc := rankCheck{file: filepath.Base(path), trained: len(y), n: len(hy), tasks: map[string]float64{}, taskN: map[string]int{}, measure: hy}
	byTask := map[string][2][]float64{}
	for i := range hx {
		p := m.Predict(hx[i])
		rc.pred = append(rc.pred, p)
		e := byTask[hw[i]]
		e[0], e[1] = append(e[0], p), append(e[1], hy[i])
		byTask[hw[i]] = e
	}
	rc.pooled = Spearman(rc.pred, rc.measure)
	for w, e := range byTask {
		if len(e[0]) >= 12 {
			rc.tasks[w], rc.taskN[w] = Spearman(e[0], e[1]), len(e[0])
		}
	}
	return rc
}

// TestCostModelRanksHeldOutMeasurementsAboveChance: on measurements kiln tune
// --record-measurements recorded on the zoo's models (testdata/measurements, machine B
// of BENCHMARKS.md under the load of the other users), a cost model trained on two
// thirds of a run's candidates ranks the other third of its convolution and matrix
// product tasks, pooled, with a Spearman correlation of at least 0.25 (each run with 30
// held-out candidates or more; better than chance at p < 0.05). The correlations, by
// run and by task, are logged (BENCHMARKS.md, "Auto-tuning: the cost model's ranking").
func TestCostModelRanksHeldOutMeasurementsAboveChance(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "measurements", "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no recorded measurements in testdata/measurements")
	}
	checked := 0
	for _, path := range files {
		rc := rankHeldOut(t, path)
		names := make([]string, 0, len(rc.tasks))
		for w := range rc.tasks {
			names = append(names, w)
		}
		sort.Strings(names)
		for _, w := range names {
			t.Logf("%s %s: %d held out, Spearman %.3f", rc.file, w, rc.taskN[w], rc.tasks[w])
		}
		t.Logf("%s: trained on %d, %d conv and matmul candidates held out, pooled Spearman %.3f", rc.file, rc.trained, rc.n, rc.pooled)
		if rc.n < 30 {
			continue
		}
		checked++
		if !(rc.pooled >= 0.25) {
			t.Errorf("%s: pooled held-out Spearman %.3f, want at least 0.25", rc.file, rc.pooled)
		}
	}
	if checked == 0 {
		t.Fatal(fmt.Sprintf("no run with 30 held-out convolution or matrix product candidates in %v", files))
	}
}
