//go:build !serveonly

package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"text/tabwriter"

	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/internal/roofline"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// rooflineMeasure says how --roofline measures the machine (tests measure less).
var rooflineMeasure = roofline.Options{}

// rooflinePlan is what kiln bench --roofline keeps from the compile: the model (for
// its shapes), the inputs (filled in place with stand-ins before the runs) and the
// plan's fused groups.
type rooflinePlan struct {
	model  *graph.Module
	inputs map[string]*tensor.Tensor
	stats  *engine.Stats
	cpu    *devcpu.Device
}

// compileForRoofline loads the model, opens the devices (the CPU alone: the roofline
// is the CPU's) and takes the executable and its plan from the journal (compiled into
// it on a miss; --cache off compiles here).
func compileForRoofline(path string, s shapeFlags, cf cacheFlags, openDevices func() (*deviceSet, error), co compileOptions) (*rooflinePlan, *engine.Built, error) {
	m, err := onnx.Load(path, onnx.Options{})
	if err != nil {
		return nil, nil, err
	}
	inputs, err := s.shapes(m)
	if err != nil {
		return nil, nil, err
	}
	ds, err := openDevices()
	if err != nil {
		return nil, nil, err
	}
	if ds.gpu != nil {
		return nil, nil, usageError{fmt.Errorf("--roofline measures the CPU: give no GPU --target")}
	}
	res, st, err := planOf(path, m, inputs, ds, cf, co)
	if err != nil {
		return nil, nil, err
	}
	return &rooflinePlan{model: m, inputs: inputs, stats: st, cpu: ds.cpu}, res, nil
}

// report measures the machine's roofline on threads threads, times every kernel over
// runs profiled runs and prints the table.
func (p *rooflinePlan) report(ctx context.Context, w io.Writer, machine *vm.VM, inputs []*tensor.Tensor, threads, runs int) error {
	works, why, err := kernelWork(p.model, p.inputs, p.stats)
	if err != nil {
		return err
	}
	meter, err := roofline.NewMeter(p.cpu)
	if err != nil {
		return err
	}
	defer meter.Close()
	opts := rooflineMeasure
	opts.Threads = threads
	mc, err := meter.Measure(opts)
	if err != nil {
		return err
	}
	kernels, secs, err := timeKernels(ctx, machine, inputs, runs, mc.Clock)
	if err != nil {
		return err
	}
	printRoofline(w, mc, rooflineRows(kernels, secs, p.stats, works, why), runs)
	return nil
}

// rooflineRow is one kernel of kiln bench --roofline's table.
type rooflineRow struct {
	kernel   string
	anchor   string  // the anchor of its first launch
	launches int     // per inference
	secs     float64 // per launch: the median over the profiled runs
	work     roofline.Work
	why      string // when its work is not counted: why
}

// kernelWork counts each kernel's work per launch from the plan's groups and the
// model's shapes at the benchmark's inputs: a kernel launched for groups of different
// work, or whose nodes the passes made (no node of the model has their name), is not
// counted, with the reason.
func kernelWork(m *graph.Module, inputs map[string]*tensor.Tensor, st *engine.Stats) (map[string]roofline.Work, map[string]string, error) {
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		return nil, nil, usageError{err}
	}
	c := graph.Clone(m)
	bind := passes.Pipeline{{Name: "bind-dims", Run: passes.BindDims}}
	if err := bind.Run(&passes.Context{Dims: dims}, c); err != nil {
		return nil, nil, err
	}
	byName := map[string]*graph.Node{}
	seen := map[string]int{}
	c.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			byName[n.String()] = n
			seen[n.String()]++
		}
	})
	works, why := map[string]roofline.Work{}, map[string]string{}
	for _, g := range st.Groups {
		if why[g.Kernel] != "" {
			continue
		}
		var nodes []*graph.Node
		for _, name := range append([]string{g.Anchor}, g.Fused...) {
			switch n, ok := byName[name]; {
			case !ok:
				why[g.Kernel] = fmt.Sprintf("%s is not a node of the model (the passes made it)", name)
			case seen[name] > 1:
				why[g.Kernel] = fmt.Sprintf("%d nodes of the model are %s", seen[name], name)
			default:
				nodes = append(nodes, n)
			}
		}
		if why[g.Kernel] != "" {
			delete(works, g.Kernel)
			continue
		}
		w, err := roofline.GroupWork(nodes)
		if err != nil {
			why[g.Kernel] = err.Error()
			delete(works, g.Kernel)
			continue
		}
		if prev, ok := works[g.Kernel]; ok && prev != w {
			why[g.Kernel] = fmt.Sprintf("launched for %s and for %s", prev.Shape, w.Shape)
			delete(works, g.Kernel)
			continue
		}
		works[g.Kernel] = w
	}
	return works, why, nil
}

// timeKernels runs the model runs times, profiled by clock (the goroutine locked to its
// thread for the thread's CPU time), and returns each kernel's launches in one run and
// the median over the runs of its time per launch, in seconds.
func timeKernels(ctx context.Context, machine *vm.VM, inputs []*tensor.Tensor, runs int, clock roofline.Clock) ([]vm.KernelTime, []float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var kernels []vm.KernelTime
	var per [][]float64
	for range max(runs, 1) {
		p := vm.Profile{Clock: clock.Now}
		if _, err := machine.RunProfiled(ctx, inputs, &p); err != nil {
			return nil, nil, err
		}
		if kernels == nil {
			kernels, per = p.Kernels, make([][]float64, len(p.Kernels))
		}
		for i, k := range p.Kernels {
			if k.Launches > 0 {
				per[i] = append(per[i], k.Total.Seconds()/float64(k.Launches))
			}
		}
	}
	secs := make([]float64, len(kernels))
	for i, s := range per {
		if len(s) > 0 {
			slices.Sort(s)
			secs[i] = s[len(s)/2]
		}
	}
	return kernels, secs, nil
}

// rooflineRows joins the kernels' times with their work and the plan's anchors,
// ordered by time per inference, longest first.
func rooflineRows(kernels []vm.KernelTime, secs []float64, st *engine.Stats, works map[string]roofline.Work, why map[string]string) []rooflineRow {
	anchor := map[string]string{}
	for _, g := range st.Groups {
		if _, ok := anchor[g.Kernel]; !ok {
			anchor[g.Kernel] = g.Anchor
		}
	}
	var rows []rooflineRow
	for i, k := range kernels {
		if k.Launches == 0 {
			continue
		}
		r := rooflineRow{kernel: k.Name, anchor: anchor[k.Name], launches: k.Launches, secs: secs[i], work: works[k.Name], why: why[k.Name]}
		if _, ok := works[k.Name]; !ok && r.why == "" {
			r.why = "not in the plan"
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b rooflineRow) int {
		ta, tb := a.secs*float64(a.launches), b.secs*float64(b.launches)
		switch {
		case ta > tb:
			return -1
		case ta < tb:
			return 1
		}
		return 0
	})
	return rows
}

// printRoofline prints the machine's roofline, then a line per kernel: time per
// launch, launches per inference, kind and shape, work, achieved rates and the share
// of the roofline reached, and which roof bounds it.
func printRoofline(out io.Writer, mc roofline.Machine, rows []rooflineRow, runs int) {
	fmt.Fprintf(out, "roofline on %s, %d thread(s): FMA peak %.1f GFLOP/s (%d-bit FMA chains), memory bandwidth %.1f GB/s (STREAM triad over 3 arrays of %d MiB, 12 bytes per element), each the median of repetitions timed by %s\n",
		mc.Name, mc.Threads, mc.PeakFLOPs/1e9, mc.VectorBits, mc.Bandwidth/1e9, mc.ArrayBytes>>20, mc.Clock)
	fmt.Fprintf(out, "kernels timed by %s per launch, the median over %d runs; FLOPs: 2 per multiply-add of a Conv, ConvTranspose, MatMul or Gemm (epilogues and other ops not counted); bytes: inputs read once + outputs written once; %%roof: the roofline's least time over the time taken (above 100%%: the data came from the caches, faster than memory)\n", mc.Clock, runs)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ms/launch\tlaunches\tkind\tshape\tMFLOP\tMB\tGFLOP/s\tGB/s\t%roof\tbound\tkernel: anchor")
	var total, bound float64
	for _, r := range rows {
		ms := 1000 * r.secs
		total += r.secs * float64(r.launches)
		if r.why != "" {
			fmt.Fprintf(w, "%.4f\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t%s: %s (not counted: %s)\n", ms, r.launches, r.kernel, r.anchor, r.why)
			continue
		}
		kind, side := r.work.Kind, "memory"
		if kind == "" {
			kind = "other"
		}
		if float64(r.work.FLOPs)/mc.PeakFLOPs > float64(r.work.Bytes)/mc.Bandwidth {
			side = "FMA"
		}
		bound += mc.Bound(r.work) * float64(r.launches)
		gflops, gbs := 0.0, 0.0
		if r.secs > 0 {
			gflops, gbs = float64(r.work.FLOPs)/r.secs/1e9, float64(r.work.Bytes)/r.secs/1e9
		}
		shape := r.work.Shape
		if shape == "" {
			shape = "-"
		}
		fmt.Fprintf(w, "%.4f\t%d\t%s\t%s\t%.2f\t%.3f\t%.2f\t%.2f\t%.1f%%\t%s\t%s: %s\n", ms, r.launches, kind, shape,
			float64(r.work.FLOPs)/1e6, float64(r.work.Bytes)/1e6, gflops, gbs, 100*mc.Fraction(r.work, r.secs), side, r.kernel, r.anchor)
	}
	w.Flush()
	share := 0.0
	if total > 0 {
		share = 100 * bound / total
	}
	fmt.Fprintf(out, "kernel time per inference: %.3f ms; the counted kernels' roofline bounds sum to %.3f ms (%.1f%% of it)\n", 1000*total, 1000*bound, share)
}
