package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// Status of one case.
type Status string

const (
	Pass        Status = "pass"
	Fail        Status = "fail"
	Unsupported Status = "unsupported"
	// BadData: the case's test data contradicts its model or ONNX's rules (baddata.go).
	BadData Status = "baddata"
)

// Result of one case.
type Result struct {
	Case    string  `json:"case"`
	Status  Status  `json:"status"`
	Reason  string  `json:"reason,omitempty"`
	MaxErr  float64 `json:"max_err,omitempty"`
	Seconds float64 `json:"seconds"`
}

// Engine evaluates a loaded module on named inputs, returning results in Main.Results order.
type Engine func(ctx context.Context, m *graph.Module, inputs map[string]ref.Value) ([]ref.Value, error)

// RefEngine evaluates with the reference evaluator.
func RefEngine(ctx context.Context, m *graph.Module, inputs map[string]ref.Value) ([]ref.Value, error) {
	return ref.Eval(m, inputs, ref.Options{Context: ctx})
}

// Options configure a run.
type Options struct {
	Engine    Engine
	Tolerance Tolerance
	Timeout   time.Duration // per case; 0 means 60s
	Filter    *regexp.Regexp
}

// FindCases expands each path into case folders: a folder holding model.onnx is a case;
// otherwise its immediate subfolders that hold model.onnx are (symlinks to folders
// followed, as a zoo assembled from links is). Cases are sorted by name.
func FindCases(paths []string) ([]string, error) {
	var cases []string
	for _, p := range paths {
		if isCase(p) {
			cases = append(cases, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		found := 0
		for _, e := range entries {
			if sub := filepath.Join(p, e.Name()); isCase(sub) {
				cases = append(cases, sub)
				found++
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%s holds no test case (no model.onnx in it or its subfolders)", p)
		}
	}
	sort.Strings(cases)
	return cases, nil
}

func isCase(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "model.onnx"))
	return err == nil && !st.IsDir()
}

// RunCase runs every data set of one case.
func RunCase(dir string, opts Options) (res Result) {
	start := time.Now()
	res = Result{Case: filepath.Base(dir)}
	defer func() {
		if r := recover(); r != nil {
			res.Status, res.Reason = Fail, fmt.Sprintf("panic: %v", r)
		}
		res.Seconds = time.Since(start).Seconds()
	}()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- Result{Status: Fail, Reason: fmt.Sprintf("panic: %v", r)}
			}
		}()
		done <- runCase(ctx, dir, opts)
	}()
	select {
	case r := <-done:
		res.Status, res.Reason, res.MaxErr = r.Status, r.Reason, r.MaxErr
	case <-ctx.Done():
		res.Status, res.Reason = Fail, fmt.Sprintf("timed out after %v", timeout)
	}
	return res
}

func runCaseSets(ctx context.Context, dir string, opts Options, fix func(*graph.Module)) Result {
	m, err := onnx.Load(filepath.Join(dir, "model.onnx"), onnx.Options{})
	if err == nil && fix != nil {
		fix(m)
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), filepath.Join(dir, "model.onnx")+": ")
		if errors.Is(err, onnx.ErrUnsupported) {
			return Result{Status: Unsupported, Reason: msg}
		}
		return Result{Status: Fail, Reason: "load: " + msg}
	}
	sets, err := dataSets(dir)
	if err != nil {
		return Result{Status: Fail, Reason: err.Error()}
	}
	if len(sets) == 0 {
		return Result{Status: Fail, Reason: "no test_data_set_N folders"}
	}
	worst, note := 0.0, ""
	for _, set := range sets {
		r := runSet(ctx, m, set, opts)
		if r.Status != Pass {
			if len(sets) > 1 {
				r.Reason = filepath.Base(set) + ": " + r.Reason
			}
			return r
		}
		worst = max(worst, r.MaxErr)
		if r.Reason != "" {
			note = r.Reason // what the pass compared (RandomPass)
		}
	}
	return Result{Status: Pass, Reason: note, MaxErr: worst}
}

// runCase runs every data set of one case; a case in knownDefects that does not pass,
// and passes with the defect's fix applied to its model, is BadData with the defect.
func runCase(ctx context.Context, dir string, opts Options) Result {
	r := runCaseSets(ctx, dir, opts, nil)
	if d, ok := knownDefects[filepath.Base(dir)]; ok && r.Status == Fail {
		// the defect is proven when the model with the generator's attributes passes
		if fixed := runCaseSets(ctx, dir, opts, d.fix); fixed.Status == Pass {
			return Result{Status: BadData, Reason: d.why + " (as stored: " + r.Reason + ")", MaxErr: r.MaxErr}
		}
	}
	return r
}

// isDir reports whether path is a folder, symlinks followed.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// dataSets lists test_data_set_N folders (symlinks followed) in numeric order.
func dataSets(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type set struct {
		n    int
		path string
	}
	var sets []set
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if s, ok := strings.CutPrefix(e.Name(), "test_data_set_"); ok && isDir(path) {
			if n, err := strconv.Atoi(s); err == nil {
				sets = append(sets, set{n, path})
			}
		}
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].n < sets[j].n })
	out := make([]string, len(sets))
	for i, s := range sets {
		out[i] = s.path
	}
	return out, nil
}

// numbered lists prefix_K.pb files of a data set in K order.
func numbered(set, prefix string) []string {
	var out []string
	for k := 0; ; k++ {
		p := filepath.Join(set, fmt.Sprintf("%s_%d.pb", prefix, k))
		if _, err := os.Stat(p); err != nil {
			return out
		}
		out = append(out, p)
	}
}

// readInputs reads a data set's input_K.pb files as m's inputs, by position; the
// inputs after them with a default take it.
func readInputs(m *graph.Module, set string) (map[string]ref.Value, error) {
	inFiles := numbered(set, "input")
	params := m.Main.Params
	if len(inFiles) > len(params) {
		return nil, fmt.Errorf("%d input files for %d graph inputs", len(inFiles), len(params))
	}
	inputs := map[string]ref.Value{}
	for k, f := range inFiles {
		d, err := onnx.ReadData(f, params[k].Type)
		if err != nil {
			return nil, fmt.Errorf("input %d: %v", k, err)
		}
		inputs[params[k].Name] = toValue(d, params[k].Type)
	}
	for _, p := range params[len(inFiles):] {
		if d := m.Defaults[p.Name]; d != nil {
			inputs[p.Name] = d
		}
	}
	return inputs, nil
}

func runSet(ctx context.Context, m *graph.Module, set string, opts Options) Result {
	inputs, err := readInputs(m, set)
	if err != nil {
		return Result{Status: Fail, Reason: err.Error()}
	}
	if why := declaredMismatch(m, inputs); why != "" {
		return Result{Status: BadData, Reason: why}
	}
	random := randomRun(m, inputs)
	got, err := opts.Engine(ctx, m, inputs)
	if err != nil {
		if errors.Is(err, ref.ErrUnsupported) || errors.Is(err, ErrCompiledUnsupported) || errors.Is(err, kernels.ErrNoKernel) || errors.Is(err, codegen.ErrUnsupported) {
			return Result{Status: Unsupported, Reason: err.Error()}
		}
		return Result{Status: Fail, Reason: err.Error()}
	}
	outFiles := numbered(set, "output")
	if len(outFiles) > len(got) {
		return Result{Status: Fail, Reason: fmt.Sprintf("%d expected outputs, model returned %d", len(outFiles), len(got))}
	}
	if random != "" {
		return compareRandom(m, got, outFiles, random)
	}
	worst := 0.0
	for k, f := range outFiles {
		d, err := onnx.ReadData(f, m.Main.Results[k].Type)
		if err != nil {
			return Result{Status: Fail, Reason: fmt.Sprintf("output %d: %v", k, err)}
		}
		if d.Tensor != nil {
			if t, ok := got[k].(*tensor.Tensor); ok {
				d.Tensor = reinterpretBF16(d.Tensor, t.DType)
			}
		}
		if mm := compareValue(got[k], d, opts.Tolerance); mm != nil {
			if t, ok := got[k].(*tensor.Tensor); ok && d.Tensor != nil {
				if why := truncatedBF16(t, d.Tensor, inputs); why != "" {
					return Result{Status: BadData, Reason: fmt.Sprintf("output %d (%s): %s", k, m.Main.Results[k].Name, why)}
				}
			}
			return Result{Status: Fail, Reason: fmt.Sprintf("output %d (%s): %s", k, m.Main.Results[k].Name, mm.Reason), MaxErr: mm.MaxErr}
		}
		if t, ok := got[k].(*tensor.Tensor); ok && t.DType.IsFloat() {
			worst = max(worst, maxAbsDiff(t, d.Tensor))
		}
	}
	return Result{Status: Pass, MaxErr: worst}
}

func maxAbsDiff(a, b *tensor.Tensor) float64 {
	if b == nil {
		return 0
	}
	x, y := a.Float64s(), b.Float64s()
	m := 0.0
	for i := range x {
		if d := x[i] - y[i]; d > m {
			m = d
		} else if -d > m {
			m = -d
		}
	}
	return m
}

// toValue converts decoded data into an evaluator value.
func toValue(d *onnx.Data, hint graph.Type) ref.Value {
	switch {
	case d.Tensor != nil:
		return reinterpretBF16(d.Tensor, hint.DType)
	case d.Sequence != nil:
		return &ref.Sequence{Elem: d.Sequence.Elem, Items: d.Sequence.Items}
	case d.Optional != nil:
		o := &ref.Optional{}
		if hint.Elem != nil {
			o.Elem = *hint.Elem
		}
		if d.Optional.Value != nil {
			var eh graph.Type
			if hint.Elem != nil {
				eh = *hint.Elem
			}
			o.V = toValue(d.Optional.Value, eh)
		}
		return o
	}
	return nil
}

// Summary counts results.
type Summary struct{ Passed, Failed, Skipped, BadData int }

// Summarize counts passes, failures, skips (unsupported) and inconsistent test data.
func Summarize(rs []Result) Summary {
	var s Summary
	for _, r := range rs {
		switch r.Status {
		case Pass:
			s.Passed++
		case Fail:
			s.Failed++
		case BadData:
			s.BadData++
		default:
			s.Skipped++
		}
	}
	return s
}

// String is the closing line: "N passed, N failed, N skipped", then ", N with
// inconsistent test data" when there are such cases.
func (s Summary) String() string {
	line := fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped)
	if s.BadData > 0 {
		line += fmt.Sprintf(", %d with inconsistent test data", s.BadData)
	}
	return line
}

// reinterpretBF16 reads uint16 data as bfloat16 bits where bfloat16 is expected: older
// ONNX test data stores bfloat16 tensors with data_type UINT16.
func reinterpretBF16(t *tensor.Tensor, want tensor.DType) *tensor.Tensor {
	u, ok := t.Data.([]uint16)
	if !ok || want != tensor.BFloat16 {
		return t
	}
	b := make([]tensor.BFloat16Bits, len(u))
	for i, x := range u {
		b[i] = tensor.BFloat16Bits(x)
	}
	return tensor.MustFromSlice(t.Shape, b)
}
