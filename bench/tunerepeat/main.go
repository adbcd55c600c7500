// Command tunerepeat measures how repeatable the tuner's measurements are: it takes the
// valid candidates of one task of a measurement log (kiln tune --record-measurements),
// measures them again several times with each clock, alternating the clocks, through the
// tuner's measuring child (kiln tune-measure, three candidates beside the defaults per
// request, as a tuning round measures them), and prints for each clock the Spearman
// correlation of every two repeats and the mean over candidates of the standard
// deviation of their log speedups across repeats.
//
//	go run ./bench/tunerepeat --kiln /tmp/kiln --log bert_tiny.jsonl --anchor ff2 \
//	    --inputs 'input_ids=1,128;attention_mask=1,128;token_type_ids=1,128'
package main

import (
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kilnrt/kiln/tune"
)

func main() {
	kiln := flag.String("kiln", "kiln", "the kiln binary whose tune-measure child measures")
	logPath := flag.String("log", "", "a measurement log (.jsonl or .jsonl.gz)")
	zoo := flag.String("zoo", os.Getenv("KILN_ZOO"), "what $KILN_ZOO in the log's model paths stands for")
	anchor := flag.String("anchor", "", "the first task whose anchor contains this")
	n := flag.Int("n", 21, "candidates measured (a seeded draw of the task's valid ones)")
	repeats := flag.Int("repeats", 3, "measurements of every candidate with each clock")
	reps := flag.Int("reps", 5, "profiled runs per executable in a request")
	threads := flag.Int("threads", 1, "threads the kernels run on")
	clocks := flag.String("clocks", "wall,auto", "clocks compared (tune.Request.Clock; auto: the thread CPU clock on one thread)")
	inputs := flag.String("inputs", "", "input shapes, NAME=D,D;NAME=D,D")
	journal := flag.String("journal", "", "journal directory for the kernel objects (default: a temporary one)")
	flag.Parse()
	if err := run(*kiln, *logPath, *zoo, *anchor, *n, *repeats, *reps, *threads, strings.Split(*clocks, ","), *inputs, *journal); err != nil {
		fmt.Fprintln(os.Stderr, "tunerepeat:", err)
		os.Exit(1)
	}
}

func run(kiln, logPath, zoo, anchor string, n, repeats, reps, threads int, clocks []string, inputs, journal string) error {
	task, cands, err := candidates(logPath, anchor, n)
	if err != nil {
		return err
	}
	shapes, err := parseShapes(inputs)
	if err != nil {
		return err
	}
	if journal == "" {
		if journal, err = os.MkdirTemp("", "tunerepeat-"); err != nil {
			return err
		}
		defer os.RemoveAll(journal)
	}
	model := strings.ReplaceAll(task.Model, "$KILN_ZOO", zoo)
	fmt.Printf("%s %s: %d candidates, %d threads, %d repetitions per request\n", task.Anchor, task.Workload, len(cands), threads, reps)
	child := tune.Child{Command: []string{kiln, "tune-measure"}, Timeout: 10 * time.Minute}
	got := map[string][][]float64{}
	for r := 0; r < repeats; r++ {
		for _, clock := range clocks {
			req := tune.Request{Model: model, Inputs: shapes, Journal: journal, Threads: threads, Seed: 2, Reps: reps}
			if clock != "auto" {
				req.Clock = clock
			}
			sp, err := measure(child, req, task.Workload, cands)
			if err != nil {
				return err
			}
			got[clock] = append(got[clock], sp)
			fmt.Printf("repeat %d, clock %s: %.3f\n", r, clock, sp)
		}
	}
	for _, clock := range clocks {
		v := got[clock]
		var rhos []string
		for a := range v {
			for b := a + 1; b < len(v); b++ {
				rhos = append(rhos, fmt.Sprintf("%.3f", tune.Spearman(v[a], v[b])))
			}
		}
		fmt.Printf("clock %s: repeat-to-repeat Spearman %s; mean sd of log speedup %.3f\n", clock, strings.Join(rhos, " "), spread(v))
	}
	return nil
}

// measure is the candidates' speedups over the defaults, three to a request.
func measure(child tune.Child, req tune.Request, workload string, cands []tune.Candidate) ([]float64, error) {
	sp := make([]float64, len(cands))
	for i := 0; i < len(cands); i += 3 {
		r := req
		r.Assignments = []tune.Assignment{{}}
		for j := i; j < min(i+3, len(cands)); j++ {
			r.Assignments = append(r.Assignments, tune.Assignment{workload: cands[j]})
		}
		resp, err := child.Measure(context.Background(), r)
		if err != nil {
			return nil, err
		}
		d := resp.Results[0].Seconds[workload]
		for j := i; j < min(i+3, len(cands)); j++ {
			if c := resp.Results[j-i+1].Seconds[workload]; c > 0 && d > 0 {
				sp[j] = d / c
			}
		}
	}
	return sp, nil
}

// spread is the mean over candidates of the standard deviation of their log speedups
// across repeats.
func spread(v [][]float64) float64 {
	if len(v) < 2 {
		return math.NaN()
	}
	sum := 0.0
	for i := range v[0] {
		var s, sq float64
		for _, r := range v {
			x := math.Log(math.Max(r[i], 1e-9))
			s, sq = s+x, sq+x*x
		}
		k := float64(len(v))
		sum += math.Sqrt(math.Max(sq-s*s/k, 0) / (k - 1))
	}
	return sum / float64(len(v[0]))
}

// candidates are n valid candidates of the log's first task whose anchor contains
// anchor, drawn with a fixed seed.
func candidates(path, anchor string, n int) (tune.MeasuredTask, []tune.Candidate, error) {
	f, err := os.Open(path)
	if err != nil {
		return tune.MeasuredTask{}, nil, err
	}
	defer f.Close()
	var rd io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if rd, err = gzip.NewReader(f); err != nil {
			return tune.MeasuredTask{}, nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	tasks, trials, err := tune.ReadMeasurements(rd)
	if err != nil {
		return tune.MeasuredTask{}, nil, err
	}
	for _, t := range tasks {
		if !strings.Contains(t.Anchor, anchor) {
			continue
		}
		var out []tune.Candidate
		seen := map[string]bool{}
		for _, tr := range trials[t.Workload] {
			if tr.Speedup <= 0 || seen[tr.Candidate] {
				continue
			}
			seen[tr.Candidate] = true
			s, k, _ := strings.Cut(tr.Candidate, "{")
			out = append(out, tune.Candidate{Strategy: s, Knobs: strings.TrimSuffix(k, "}")})
		}
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return t, out[:min(n, len(out))], nil
	}
	return tune.MeasuredTask{}, nil, fmt.Errorf("%s: no task's anchor contains %q", path, anchor)
}

// parseShapes reads NAME=D,D;NAME=D,D.
func parseShapes(s string) (map[string][]int64, error) {
	out := map[string][]int64{}
	if s == "" {
		return out, nil
	}
	for _, p := range strings.Split(s, ";") {
		name, dims, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("input %q: want NAME=D,D", p)
		}
		for _, d := range strings.Split(dims, ",") {
			v, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", p, err)
			}
			out[name] = append(out[name], v)
		}
	}
	return out, nil
}
