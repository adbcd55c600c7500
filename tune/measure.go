package tune

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// MeasureOptions are a measuring process's environment beyond its request.
type MeasureOptions struct {
	// Backends replaces the compiler's backend table (nil: compiler.DefaultBackends);
	// tests add deliberately broken strategies through it.
	Backends compiler.Backends
}

// Measure runs a request in this process: it compiles the model under every
// assignment (two at a time), runs each executable once on the same random inputs and
// checks its outputs against the reference's, then times the valid ones in
// interleaved, profiled runs. It is what the measuring child runs; a candidate kernel
// that crashes takes this process with it.
func Measure(ctx context.Context, req Request, opts MeasureOptions) (*Response, error) {
	if len(req.Assignments) == 0 {
		return nil, fmt.Errorf("tune: a request without assignments")
	}
	mod, err := onnx.Load(req.Model, onnx.Options{})
	if err != nil {
		return nil, err
	}
	t, err := target.HostChecked()
	if err != nil {
		return nil, err
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: req.Threads})
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	eng, err := engine.New(engine.Config{Target: t, Device: dev, NoTuning: true})
	if err != nil {
		return nil, err
	}
	var j *compilecache.Journal
	if req.Journal != "" {
		if j, err = compilecache.Open(compilecache.Options{Dir: req.Journal}); err != nil {
			return nil, err
		}
		defer j.Close()
	}
	dims, err := engine.DimsFromShapes(mod, req.Inputs)
	if err != nil {
		return nil, err
	}
	resp := &Response{Target: eng.TargetFingerprint(), Threads: eng.Threads(), Results: make([]Result, len(req.Assignments))}
	builds := make([]*compiler.Result, len(req.Assignments))
	features := map[string][]float64{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(2)
	for i, a := range req.Assignments {
		g.Go(func() error {
			tuning := &engine.Tuning{Records: map[string]compilecache.TuningRecord{}, Space: i == 0 && req.Space}
			for w, c := range a {
				tuning.Records[w] = compilecache.TuningRecord{Workload: w, Target: eng.TargetFingerprint(), Strategy: c.Strategy, Knobs: c.Knobs, Speedup: 1}
			}
			o := compiler.Options{Dims: dims, CPU: dev, Cache: j, Tuning: tuning, Backends: opts.Backends, Context: gctx, Name: req.Model}
			if i == 0 {
				o.Lowered = func(w string, f *loopir.PrimFunc) {
					mu.Lock()
					features[w] = loopFeatures(f)
					mu.Unlock()
				}
			}
			res, err := compiler.Build(mod, t, o)
			if err != nil {
				resp.Results[i].Err = "build: " + err.Error()
				return nil
			}
			builds[i] = res
			for _, gr := range res.Stats.Groups {
				if gr.Tuned != "" && !slices.Contains(resp.Results[i].Applied, gr.Workload) {
					resp.Results[i].Applied = append(resp.Results[i].Applied, gr.Workload)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if builds[0] == nil {
		return nil, fmt.Errorf("tune: the reference does not build: %s", resp.Results[0].Err)
	}
	if req.Space {
		resp.Kernels = kernelsOf(builds[0].Stats.Groups, features)
	}
	inputs, err := randomInputs(builds[0].Exe, req.Inputs, req.Seed)
	if err != nil {
		return nil, err
	}
	vms := make([]*vm.VM, len(builds))
	defer func() {
		for _, m := range vms {
			if m != nil {
				m.Close()
			}
		}
	}()
	var ref []*tensor.Tensor
	for i, b := range builds {
		if b == nil {
			continue
		}
		r := &resp.Results[i]
		m, err := eng.LoadExecutable(b.Exe)
		if err != nil {
			r.Err = "load: " + err.Error()
			continue
		}
		out, err := m.Run(ctx, inputs)
		if err != nil {
			m.Close()
			r.Err = "run: " + err.Error()
			continue
		}
		if i == 0 {
			ref = out
		} else if why := differs(out, ref); why != "" {
			m.Close()
			r.Wrong = why
			continue
		}
		vms[i] = m
	}
	if vms[0] == nil {
		return nil, fmt.Errorf("tune: the reference does not run: %s", resp.Results[0].Err)
	}
	timeRuns(ctx, req, builds, vms, inputs, resp)
	return resp, nil
}

// timeRuns runs the valid executables req.Reps times each, interleaved (rotating which
// goes first), and fills each result's times: per workload, with the kernels on one
// thread, the median of the repetitions' thread CPU times (the goroutine locked to its
// thread meanwhile), else the fastest repetition's wall time (on a shared machine other
// processes only ever add time, so the minimum is the least disturbed measurement);
// and the median wall time of a run.
func timeRuns(ctx context.Context, req Request, builds []*compiler.Result, vms []*vm.VM, inputs []*tensor.Tensor, resp *Response) {
	reps := max(req.Reps, 1)
	secs := make([]map[string][]float64, len(vms))
	walls := make([][]float64, len(vms))
	var clock func() time.Duration
	if resp.Threads == 1 && req.Clock != ClockWall {
		clock = vm.ThreadCPUClock()
	}
	resp.Clock = ClockWall
	if clock != nil {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		resp.Clock = ClockThreadCPU
	}
	for r := 0; r < reps; r++ {
		for k := range vms {
			i := (k + r) % len(vms)
			if vms[i] == nil {
				continue
			}
			p := vm.Profile{Clock: clock}
			t0 := time.Now()
			if _, err := vms[i].RunProfiled(ctx, inputs, &p); err != nil {
				resp.Results[i].Err = "run: " + err.Error()
				vms[i].Close()
				vms[i] = nil
				continue
			}
			walls[i] = append(walls[i], time.Since(t0).Seconds())
			if secs[i] == nil {
				secs[i] = map[string][]float64{}
			}
			for w, s := range perWorkload(builds[i].Stats.Groups, &p) {
				secs[i][w] = append(secs[i][w], s)
			}
		}
	}
	for i := range vms {
		if vms[i] == nil {
			continue
		}
		r := &resp.Results[i]
		r.Total = median(walls[i])
		r.Seconds = map[string]float64{}
		for w, v := range secs[i] {
			if clock != nil {
				r.Seconds[w] = median(v)
			} else {
				r.Seconds[w] = slices.Min(v)
			}
		}
	}
}

// perWorkload sums a profiled run's kernel times by workload (a kernel shared by two
// workloads counts for both).
func perWorkload(groups []engine.Group, p *vm.Profile) map[string]float64 {
	byKernel := map[string][]string{}
	for _, g := range groups {
		if g.Workload != "" && !slices.Contains(byKernel[g.Kernel], g.Workload) {
			byKernel[g.Kernel] = append(byKernel[g.Kernel], g.Workload)
		}
	}
	out := map[string]float64{}
	for _, k := range p.Kernels {
		for _, w := range byKernel[k.Name] {
			out[w] += k.Total.Seconds()
		}
	}
	return out
}

// kernelsOf lists a compile's workloads in order of first launch.
func kernelsOf(groups []engine.Group, features map[string][]float64) []Kernel {
	var out []Kernel
	at := map[string]int{}
	for _, g := range groups {
		if g.Workload == "" {
			continue
		}
		if i, ok := at[g.Workload]; ok {
			out[i].Launches++
			continue
		}
		at[g.Workload] = len(out)
		out = append(out, Kernel{Workload: g.Workload, Anchor: g.Anchor, Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"),
			Launches: 1, Space: g.Space, Features: features[g.Workload]})
	}
	return out
}

// randomInputs are the executable's inputs, in order: floats uniform in [-1, 1) from
// seed, integers and booleans zero (valid as indices), shapes from the executable or,
// for its free dims, from shapes.
func randomInputs(exe *vm.Executable, shapes map[string][]int64, seed uint64) ([]*tensor.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6e))
	var out []*tensor.Tensor
	for _, in := range exe.Inputs {
		dims := in.Shape
		if s, ok := shapes[in.Name]; ok {
			dims = s
		}
		shape := make(tensor.Shape, len(dims))
		for i, d := range dims {
			if d < 0 {
				return nil, fmt.Errorf("tune: input %q has a free dim: give its shape", in.Name)
			}
			shape[i] = int(d)
		}
		t := tensor.New(in.DType, shape)
		if v, ok := t.Data.([]float32); ok {
			for i := range v {
				v[i] = rng.Float32()*2 - 1
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// differs says how outputs differ from the reference's ("" when they agree): float32
// within 1e-3 relative to each element plus 1e-4 of the tensor's largest magnitude,
// other types exactly.
func differs(out, ref []*tensor.Tensor) string {
	if len(out) != len(ref) {
		return fmt.Sprintf("%d outputs, the reference has %d", len(out), len(ref))
	}
	for k := range out {
		a, b := out[k], ref[k]
		if a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) {
			return fmt.Sprintf("output %d is %v%v, the reference's %v%v", k, a.DType, a.Shape, b.DType, b.Shape)
		}
		av, aok := a.Data.([]float32)
		bv, bok := b.Data.([]float32)
		if !aok || !bok {
			if a.String() != b.String() {
				return fmt.Sprintf("output %d differs", k)
			}
			continue
		}
		scale := 0.0
		for _, x := range bv {
			scale = math.Max(scale, math.Abs(float64(x)))
		}
		for i := range av {
			x, y := float64(av[i]), float64(bv[i])
			if math.IsNaN(x) && math.IsNaN(y) {
				continue
			}
			if !(math.Abs(x-y) <= 1e-3*math.Abs(y)+1e-4*scale) {
				return fmt.Sprintf("output %d element %d: %g, the reference computes %g", k, i, x, y)
			}
		}
	}
	return ""
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
