package gpu_test

import (
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// oneThreadPerOutput is the lowered n×n by n×n product of l scheduled the simple way:
// the output's elements fused, 256 to a block, each thread running the whole K loop
// over global memory.
func oneThreadPerOutput(t *testing.T, l *lowered, n int64) *lowered {
	t.Helper()
	a := te.Placeholder("in0", tensor.Float32, loopir.Int(n), loopir.Int(n))
	b := te.Placeholder("in1", tensor.Float32, loopir.Int(n), loopir.Int(n))
	out, err := kernels.MatMulReduction(a, b)
	if err != nil {
		t.Fatal(err)
	}
	f, err := te.Lower("matmul_per_output", []*te.Tensor{a, b}, []*te.Tensor{out})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(f)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	blk, err := s.GetBlock("matmul")
	must(err)
	loops, err := s.GetLoops(blk)
	must(err)
	fused, err := s.Fuse(loops[0], loops[1])
	must(err)
	parts, err := s.Split(fused, []int64{-1, 256})
	must(err)
	must(s.Bind(parts[0], loopir.BlockIdxX))
	must(s.Bind(parts[1], loopir.ThreadIdxX))
	low, err := passes.GPUPipeline().Run(s.Func())
	must(err)
	naive := *l
	naive.impl = &kernels.Impl{Strategy: "one-thread-per-output", Func: s.Func(), Params: []kernels.Param{{Input: 0}, {Input: 1}}}
	naive.f, naive.launch, err = passes.DeriveLaunch(low)
	must(err)
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
// OpenCL device with the tiled kernel and with one thread per output element (its K
// loop over global memory) and checks both against the reference; with -v it logs their
// times (the best of five launches each) and the ratio: a measurement to read, not an
// assertion.
func TestMatMulTiledAgainstOneThreadPerOutputOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	tg := openclTarget(t, d)
	const n = 256
	c := gcase{name: "matmul_256", op: graph.OpMatMul, args: []graph.Type{ty(t, tensor.Float32, "256", "256"), ty(t, tensor.Float32, "256", "256")}}
	tiled := lowerTiled(t, c, tg)
	naive := oneThreadPerOutput(t, tiled, n)
	times := map[string]time.Duration{}
	for _, l := range []*lowered{tiled, naive} {
		mod, k := openclLoader(d)(t, l, l.impl.Strategy)
		l.run(t, d, k, l.impl.Strategy, nil, 1)
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
