//go:build !serveonly

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/internal/roofline"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// benchResult is what `kiln bench --json` prints (bench/ortcompare reads it).
type benchResult struct {
	Engine     string  `json:"engine"`
	Model      string  `json:"model"`
	Device     string  `json:"device"` // cpu, or the GPU target and device
	Threads    int     `json:"threads"`
	Iters      int     `json:"iters"`
	CompileS   float64 `json:"compile_s"`         // 0 when the journal had the executable
	LoadS      float64 `json:"load_s,omitempty"`  // time to the executable from the journal
	Journal    string  `json:"journal,omitempty"` // hit, built, waited, ... (empty: not used)
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	P99        float64 `json:"p99_ms"`
	Min        float64 `json:"min_ms"`
	Mean       float64 `json:"mean_ms"`
	Throughput float64 `json:"throughput_per_s"`
}

func benchCmd() *cobra.Command {
	var (
		threads, iters, warmup int
		maxTime, gap           time.Duration
		asJSON, quiet, profile bool
		withRoofline           bool
		boundsCheck, noTuning  bool
		shapeInputs            shapeFlags
		cf                     cacheFlags
		tf                     targetFlags
	)
	cmd := &cobra.Command{
		Use:   "bench MODEL|FILE.kiln",
		Short: "Time inferences on the compiled engine: p50/p90/p99/min latency and throughput after warm-up",
		Long: `Compile the model through the binary journal (timed when it compiles; --cache off
compiles every time) or load a .kiln executable, run warm-up
inferences, then time --iters inferences one after another on --threads threads.
Inputs come from --input/--input-dir; missing ones are random (floats in [-1, 1),
integers 0) with the shapes given by --dims.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			model, name, err := modelArg(args[0])
			if err != nil {
				return err
			}
			args = []string{model}
			r := benchResult{Engine: "kiln", Model: name, Threads: threads}
			var exe *vm.Executable
			var inputs map[string]*tensor.Tensor
			isKiln := isKilnFile(args[0])
			var ds *deviceSet
			open := func(tf targetFlags) (err error) {
				tf.profiling = profile
				if ds, err = tf.open(threads, !isKiln); err == nil {
					r.Device = ds.describe()
					if r.Threads <= 0 { // the CPU device's rule for --threads 0: every core
						r.Threads = runtime.NumCPU()
					}
				}
				return err
			}
			defer func() {
				if ds != nil {
					ds.Close()
				}
			}()
			var plan *rooflinePlan
			if withRoofline {
				if isKiln {
					return usageError{fmt.Errorf("%s is a compiled executable: --roofline counts each kernel's work from the model", args[0])}
				}
				if asJSON {
					return usageError{fmt.Errorf("--roofline prints a table, not JSON")}
				}
				var took *engine.Built
				openDevices := func() (*deviceSet, error) { err := open(tf); return ds, err }
				if plan, took, err = compileForRoofline(args[0], shapeInputs, cf, openDevices,
					compileOptions{quiet: quiet, level: defaultLevel, boundsCheck: boundsCheck, noTuning: noTuning}); err != nil {
					return err
				}
				exe, inputs, r.Journal = took.Exe, plan.inputs, took.Outcome.String()
				if took.Compiled() {
					r.CompileS = took.Took.Seconds()
				} else {
					r.LoadS = took.Took.Seconds()
				}
			} else if isKiln {
				if boundsCheck {
					return usageError{fmt.Errorf("%s is a compiled executable: --bounds-check applies when kiln compiles a model (kiln compile --bounds-check)", args[0])}
				}
				if exe, err = readKilnFile(args[0]); err != nil {
					return err
				}
				if inputs, err = exeInputs(exe, shapeInputs); err != nil {
					return err
				}
				if err := open(tf.forExecutable(exe)); err != nil {
					return err
				}
			} else if cf.policy != "off" {
				sig, err := onnx.LoadSignature(args[0])
				if err != nil {
					return err
				}
				if inputs, err = shapeInputs.shapes(sig); err != nil {
					return err
				}
				j, err := cf.open(newLogger(quiet || asJSON))
				if err != nil {
					return err
				}
				defer j.Close()
				if err := open(tf); err != nil {
					return err
				}
				c, err := compileCached(j, args[0], inputs, ds, compileOptions{quiet: quiet || asJSON, level: defaultLevel, boundsCheck: boundsCheck, noTuning: noTuning})
				if err != nil {
					return err
				}
				exe, r.Journal = c.Exe, c.Outcome.String()
				if c.Compiled() {
					r.CompileS = c.Took.Seconds()
				} else {
					r.LoadS = c.Took.Seconds()
				}
			} else {
				m, err := onnx.Load(args[0], onnx.Options{})
				if err != nil {
					return err
				}
				if inputs, err = shapeInputs.shapes(m); err != nil {
					return err
				}
				if err := open(tf); err != nil {
					return err
				}
				res, took, err := compileModel(m, inputs, ds, compileOptions{quiet: quiet || asJSON, level: defaultLevel, boundsCheck: boundsCheck})
				if err != nil {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				exe, r.CompileS = res.Exe, took.Seconds()
			}
			if err := fillInputs(exe, inputs); err != nil {
				return err
			}
			ordered, err := orderInputs(exe, inputs)
			if err != nil {
				return err
			}
			machine, err := loadOn(ds, exe)
			if err != nil {
				return err
			}
			defer machine.Close()
			ctx := context.Background()
			for i := 0; i < warmup; i++ {
				if _, err := machine.Run(ctx, ordered); err != nil {
					return err
				}
			}
			var times []float64
			start := time.Now()
			for i := 0; iters > 0 && i < iters || iters <= 0 && (i < 10 || time.Since(start) < maxTime); i++ {
				if gap > 0 {
					time.Sleep(gap)
				}
				t0 := time.Now()
				if _, err := machine.Run(ctx, ordered); err != nil {
					return err
				}
				times = append(times, float64(time.Since(t0).Nanoseconds())/1e6)
			}
			summarizeTimes(&r, times)
			w := cmd.OutOrStdout()
			if withRoofline {
				if err := plan.report(ctx, w, machine, ordered, r.Threads, max(r.Iters, 1)); err != nil {
					return err
				}
			} else if profile {
				// on one thread a host kernel runs on this goroutine's thread: its CPU
				// time leaves out the time other processes took the core
				clock := roofline.ClockFor(r.Threads)
				runtime.LockOSThread()
				p := vm.Profile{Clock: clock.Now}
				for i := 0; i < max(r.Iters, 1); i++ {
					if _, err := machine.RunProfiled(ctx, ordered, &p); err != nil {
						runtime.UnlockOSThread()
						return err
					}
				}
				runtime.UnlockOSThread()
				printProfile(w, &p, clock)
			}
			if asJSON {
				return json.NewEncoder(w).Encode(r)
			}
			if r.CompileS > 0 {
				fmt.Fprintf(w, "compile: %.2fs\n", r.CompileS)
			}
			if r.LoadS > 0 {
				fmt.Fprintf(w, "loaded from the journal in %.1f ms (no compile)\n", r.LoadS*1000)
			}
			on := fmt.Sprintf("%d threads", r.Threads)
			fmt.Fprintf(w, "%s on %s: %d inferences on %s: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, min %.3f ms, mean %.3f ms, %.1f inferences/s\n",
				r.Model, r.Device, r.Iters, on, r.P50, r.P90, r.P99, r.Min, r.Mean, r.Throughput)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&threads, "threads", 0, "threads for parallel kernels (0: every core)")
	f.IntVar(&iters, "iters", 0, "timed inferences (0: at least 10, for --max-time)")
	f.IntVar(&warmup, "warmup", 3, "untimed inferences first")
	f.DurationVar(&maxTime, "max-time", 2*time.Second, "with --iters 0, time inferences for this long")
	f.DurationVar(&gap, "gap", 0, "idle this long before each timed inference, as between a server's requests (0: back to back)")
	f.BoolVar(&asJSON, "json", false, "print one JSON line")
	f.BoolVar(&noTuning, "no-tuning", false, "build with the default schedules, ignoring the journal's tuning records (kiln tune)")
	f.BoolVar(&profile, "profile", false, "then time every kernel over as many runs and print the table")
	f.BoolVar(&withRoofline, "roofline", false, "then measure the machine's FMA peak and memory bandwidth on --threads threads, time every kernel over as many runs and print each one's FLOPs, bytes, GFLOP/s, GB/s and share of the roofline (CPU only)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no compile progress display")
	f.BoolVar(&boundsCheck, "bounds-check", false, boundsCheckHelp)
	shapeInputs.register(cmd)
	cf.register(f, "on")
	tf.register(cmd)
	return cmd
}

// fillInputs makes stand-ins for the inputs not given, from a static signature entry.
func fillInputs(exe *vm.Executable, inputs map[string]*tensor.Tensor) error {
	for _, in := range exe.Inputs {
		if _, ok := inputs[in.Name]; ok {
			continue
		}
		shape := make(tensor.Shape, len(in.Shape))
		for i, d := range in.Shape {
			if d < 0 {
				return usageError{fmt.Errorf("input %q has a dynamic shape %v: give it with --input or --input-dir", in.Name, in.Shape)}
			}
			shape[i] = int(d)
		}
		inputs[in.Name] = standIn(in.DType, shape)
	}
	return nil
}

// standIn is a benchmark input nobody gave: random floats in [-1, 1) (fixed seed), zero
// integers (valid as indices).
func standIn(dt tensor.DType, shape tensor.Shape) *tensor.Tensor {
	t := tensor.New(dt, shape)
	if v, ok := t.Data.([]float32); ok {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
	}
	return t
}

// summarizeTimes fills the latency percentiles and throughput.
func summarizeTimes(r *benchResult, ms []float64) {
	r.Iters = len(ms)
	if len(ms) == 0 {
		return
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	// linear interpolation between closest ranks (numpy's default, as bench/ort does)
	rank := func(p float64) float64 {
		x := p * float64(len(s)-1)
		lo := int(x)
		if lo+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[lo] + (x-float64(lo))*(s[lo+1]-s[lo])
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	r.P50, r.P90, r.P99, r.Min, r.Mean = rank(0.5), rank(0.9), rank(0.99), s[0], sum/float64(len(s))
	if r.Mean > 0 {
		r.Throughput = 1000 / r.Mean
	}
}

// printProfile prints kernels by total time, with their share of all kernel time.
func printProfile(w io.Writer, p *vm.Profile, clock roofline.Clock) {
	ks := slices.Clone(p.Kernels)
	slices.SortFunc(ks, func(a, b vm.KernelTime) int { return int(b.Total - a.Total) })
	var total time.Duration
	for _, k := range ks {
		total += k.Total
	}
	fmt.Fprintf(w, "kernel time per inference: %.3f ms over %d runs (CPU kernels timed by %s)\n", float64(total.Microseconds())/1000/float64(p.Runs), p.Runs, clock)
	for _, k := range ks {
		if k.Launches == 0 {
			continue
		}
		fmt.Fprintf(w, "  %6.2f%%  %9.3f ms  %3d launches/run  %s\n", 100*float64(k.Total)/float64(max(total, 1)),
			float64(k.Total.Microseconds())/1000/float64(p.Runs), k.Launches/p.Runs, k.Name)
	}
}
