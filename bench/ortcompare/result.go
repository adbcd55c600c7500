package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Result is the one-line JSON summary that `kiln bench --json` and bench/ort/bench.js
// print after their timed iterations. Latencies are milliseconds per inference.
type Result struct {
	// Engine is "kiln" or "ort".
	Engine string `json:"engine"`
	// P50 is the median latency.
	P50 float64 `json:"p50_ms"`
	// P90 is the 90th percentile latency.
	P90 float64 `json:"p90_ms"`
	// P99 is the 99th percentile latency.
	P99 float64 `json:"p99_ms"`
	// Min is the fastest iteration.
	Min float64 `json:"min_ms"`
	// Mean is the arithmetic mean latency.
	Mean float64 `json:"mean_ms"`
	// Iters is the number of timed iterations.
	Iters int `json:"iters"`
	// Threads is the intra-op thread count the engine ran with.
	Threads int `json:"threads"`
	// CompileS is kiln's compile_s field (absent for ORT).
	CompileS *float64 `json:"compile_s,omitempty"`
}

// wireResult mirrors Result with pointers, so that missing required fields are told
// apart from zeros.
type wireResult struct {
	Engine   *string  `json:"engine"`
	P50      *float64 `json:"p50_ms"`
	P90      *float64 `json:"p90_ms"`
	P99      *float64 `json:"p99_ms"`
	Min      *float64 `json:"min_ms"`
	Mean     *float64 `json:"mean_ms"`
	Iters    *int     `json:"iters"`
	Threads  *int     `json:"threads"`
	CompileS *float64 `json:"compile_s"`
}

// errNoResult reports output without a JSON summary line.
var errNoResult = errors.New("no JSON result line in the output")

// resultLine returns the last non-empty line of out that starts with '{': engines may
// log before their summary, and the summary is the last thing they print.
func resultLine(out []byte) ([]byte, error) {
	lines := bytes.Split(out, []byte{'\n'})
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 0 && l[0] == '{' {
			return l, nil
		}
	}
	return nil, errNoResult
}

// parseResult finds the summary line in an engine's stdout, decodes it and checks it
// against what was asked: the engine's name, and the iteration and thread counts when
// they are positive. It returns the decoded result and the raw line.
func parseResult(out []byte, engine string, iters, threads int) (Result, json.RawMessage, error) {
	line, err := resultLine(out)
	if err != nil {
		return Result{}, nil, fmt.Errorf("%s: %w (stdout: %q)", engine, err, tail(string(out), 200))
	}
	var w wireResult
	if err := json.Unmarshal(line, &w); err != nil {
		return Result{}, nil, fmt.Errorf("%s: decoding result line %q: %w", engine, tail(string(line), 200), err)
	}
	var missing []string
	for _, f := range []struct {
		name string
		nil  bool
	}{
		{"engine", w.Engine == nil}, {"p50_ms", w.P50 == nil}, {"p90_ms", w.P90 == nil},
		{"p99_ms", w.P99 == nil}, {"min_ms", w.Min == nil}, {"mean_ms", w.Mean == nil},
		{"iters", w.Iters == nil}, {"threads", w.Threads == nil},
	} {
		if f.nil {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return Result{}, nil, fmt.Errorf("%s: result line %q lacks %s", engine, tail(string(line), 200), strings.Join(missing, ", "))
	}
	r := Result{
		Engine: *w.Engine, P50: *w.P50, P90: *w.P90, P99: *w.P99, Min: *w.Min, Mean: *w.Mean,
		Iters: *w.Iters, Threads: *w.Threads, CompileS: w.CompileS,
	}
	switch {
	case r.Engine != engine:
		return r, nil, fmt.Errorf("%s: result line is from engine %q", engine, r.Engine)
	case iters > 0 && r.Iters != iters:
		return r, nil, fmt.Errorf("%s: ran %d iterations, asked for %d", engine, r.Iters, iters)
	case threads > 0 && r.Threads != threads:
		return r, nil, fmt.Errorf("%s: ran on %d threads, asked for %d", engine, r.Threads, threads)
	}
	for _, v := range []float64{r.P50, r.P90, r.P99, r.Min, r.Mean} {
		if !(v > 0) || math.IsInf(v, 0) {
			return r, nil, fmt.Errorf("%s: implausible latency in %q", engine, tail(string(line), 200))
		}
	}
	if !(r.Min <= r.P50 && r.P50 <= r.P90 && r.P90 <= r.P99) {
		return r, nil, fmt.Errorf("%s: percentiles out of order in %q", engine, tail(string(line), 200))
	}
	return r, json.RawMessage(slices.Clone(line)), nil
}

// median returns the median of xs (the mean of the middle two for an even count), or
// NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// tail returns at most the last n bytes of s, trimmed, marked with "..." when cut.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// lastLines returns the last n non-empty lines of s joined by " | ", for error messages.
func lastLines(s string, n int) string {
	var keep []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append(keep, l)
		}
	}
	slices.Reverse(keep)
	return strings.Join(keep, " | ")
}
