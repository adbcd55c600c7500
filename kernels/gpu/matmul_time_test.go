package gpu_test

import (
	"math"
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// oneThreadPerOutput is the lowered case l (a MatMul of two n×n matrices) as the
// reduction rule schedules it (gpu.ScheduleReduce on the op's definition, as if the
// tiled rule did not come first): one thread per output element, its K loop over
// global memory.
func oneThreadPerOutput(t *testing.T, l *lowered, tg target.Target, n int64) *lowered {
	t.Helper()
	in := []kernels.Input{
		{T: te.Placeholder("in0", tensor.Float32, loopir.Int(n), loopir.Int(n))},
		{T: te.Placeholder("in1", tensor.Float32, loopir.Int(n), loopir.Int(n))},
	}
	block, err := gpu.BlockSize(tg)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := kernels.Generic(kernels.Default(), "matmul_per_output", l.nodes[0], in, func(s *schedule.Schedule) error {
		return gpu.ScheduleReduce(s, block)
	})
	if err != nil {
		t.Fatal(err)
	}
	impl.Strategy = "gpu-reduce"
	low, err := passes.GPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	naive := *l
	naive.impl = impl
	if naive.f, naive.launch, err = passes.DeriveLaunch(low); err != nil {
		t.Fatal(err)
	}
	return &naive
}

// bestLaunch is the best time of five launches (each to Sync) of l's kernel on d, after
// one to warm up.
func bestLaunch(t *testing.T, d devices.Device, k devices.Kernel, l *lowered) time.Duration {
	t.Helper()
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	for _, p := range l.f.Params {
		n, ok := p.Elements().(*loopir.IntImm)
		if !ok {
			t.Fatalf("%s has no constant size", p.Name)
		}
		b, err := d.Alloc(n.V * int64(p.DT.Size()))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	var g devices.Geometry
	for i := range 3 {
		g.Grid[i], _ = l.at(l.launch.Grid[i], nil)
		g.Block[i], _ = l.at(l.launch.Block[i], nil)
	}
	best := time.Duration(1 << 62)
	for i := range 6 {
		start := time.Now()
		if err := d.Launch(k, g, bufs, nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); i > 0 && took < best {
			best = took
		}
	}
	return best
}

// TestMatMulTiledAgainstOneThreadPerOutputOnOpenCL runs a 256×256×256 product on the
// OpenCL device with the tiled kernel and with the reduction rule's (one thread per
// output element, its K loop over global memory) and checks both against the
// reference; with -v it logs their times (the best of five launches each) and the
// ratio: a measurement to read, not an assertion.
func TestMatMulTiledAgainstOneThreadPerOutputOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	tg := openclTarget(t, d)
	const n = 256
	c := gcase{name: "matmul_256", op: graph.OpMatMul, args: []graph.Type{ty(t, tensor.Float32, "256", "256"), ty(t, tensor.Float32, "256", "256")}}
	tiled := lowerTiled(t, c, tg)
	naive := oneThreadPerOutput(t, tiled, tg, n)
	times := map[string]time.Duration{}
	for _, l := range []*lowered{tiled, naive} {
		mod, k := openclLoader(d)(t, l, l.impl.Strategy)
		if l == tiled {
			l.run(t, d, k, l.impl.Strategy, nil, 1)
		} else {
			roughly(t, l, d, k, n)
		}
		if testing.Verbose() {
			times[l.impl.Strategy] = bestLaunch(t, d, k, l)
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if testing.Verbose() {
		tt, tn := times[tiled.impl.Strategy], times[naive.impl.Strategy]
		t.Logf("%d×%d×%d on %s: tiled %v (%v), one thread per output %v (%v): %.2f× the speed",
			n, n, n, d.Info().Name, tt, tiled.launch, tn, naive.launch, float64(tn)/float64(tt))
	}
}

// roughly checks l's kernel on d against the reference within the error of a float32
// sum of n products in another order (the reduction rule sums a matmul's K in written-out
// chunks): 1e-5·n·max|x|² absolutely.
func roughly(t *testing.T, l *lowered, d devices.Device, k devices.Kernel, n int64) {
	t.Helper()
	in := l.inputs(t, nil, 1)
	res, err := ref.Eval(l.m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	got, _, err := l.exec(t, d, k, nil, in, want.Shape)
	if err != nil {
		t.Fatal(err)
	}
	tol := 1e-5 * float64(n) * 64
	g, w := got.Float64s(), want.Float64s()
	for i := range w {
		if math.Abs(g[i]-w[i]) > tol {
			t.Fatalf("%s: element %d = %v, want %v (±%v)", l.impl.Strategy, i, g[i], w[i], tol)
		}
	}
}
