package compiler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

func openCPU(t *testing.T) *devcpu.Device {
	t.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// checkCompiled compiles m for the inputs' shapes, runs the executable on the VM (after
// a marshal round trip) and compares every output with the reference evaluator.
func checkCompiled(t *testing.T, m *graph.Module, inputs map[string]*tensor.Tensor) *Result {
	t.Helper()
	return checkCompiledFor(t, m, inputs, target.Host(), Options{})
}

// checkCompiledFor is checkCompiled for target tg with opts (Dims, CPU and Check set
// here).
func checkCompiledFor(t *testing.T, m *graph.Module, inputs map[string]*tensor.Tensor, tg target.Target, opts Options) *Result {
	t.Helper()
	dev := openCPU(t)
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		t.Fatal(err)
	}
	opts.Dims, opts.CPU, opts.Check = dims, dev, true
	res, err := Build(m, tg, opts)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := res.Exe.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var exe vm.Executable
	if err := exe.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	devs := []devices.Device{dev}
	if opts.GPU != nil {
		devs = append(devs, opts.GPU)
	}
	machine, err := vm.Load(&exe, devs, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	var args []*tensor.Tensor
	refIn := map[string]ref.Value{}
	for _, p := range m.Main.Params {
		args = append(args, inputs[p.Name])
		refIn[p.Name] = inputs[p.Name]
	}
	want, err := ref.Eval(m, refIn, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for run := 0; run < 2; run++ { // the second run reuses pooled storage
		got, err := machine.Run(context.Background(), args)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d outputs, want %d", len(got), len(want))
		}
		for i := range want {
			nodetest.CloseTensor(t, m.Main.Results[i].Name, got[i], want[i].(*tensor.Tensor))
		}
	}
	return res
}

func f32(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.MustFromSlice(tensor.Shape(shape), kerneltest.Random(seed, tensor.Shape(shape).NumElements()))
}

// TestStraightLine: elementwise kernels, a zero-copy reshape, a constant operand, two
// outputs, and a static plan that reuses memory along the chain.
func TestStraightLine(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("b"), graph.Const(64)))
	r, _ := b.Op1(graph.OpRelu, nil, x)
	s, _ := b.Op1(graph.OpTanh, nil, r)
	a, _ := b.Op1(graph.OpAdd, nil, s, b.Const("bias", f32(9, 64)))
	v, _ := b.Op1(graph.OpReshape, nil, a, b.Const("shape", tensor.MustFromSlice(tensor.Shape{1}, []int64{-1})))
	e, _ := b.Op1(graph.OpExp, nil, v)
	n, err := b.Op1(graph.OpNeg, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(e, n)
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiled(t, m, map[string]*tensor.Tensor{"x": f32(1, 3, 64)})
	// fuse-ops: Relu+Tanh (Tanh's result has two readers: its group ends there),
	// Add+Reshape+Exp, Neg
	if res.Stats.Launches != 3 || res.Stats.Fused != 3 || res.Stats.ArenaBytes > res.Stats.UnplannedSum {
		t.Fatalf("stats %+v: want 3 launches, 3 fused nodes and an arena no larger than the sum", res.Stats)
	}
}

// TestLoopAndIf: a Loop whose trip count is an input, a carried tensor updated by
// kernels, and an If on a value computed in the graph.
func TestLoopAndIf(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(8)))
	steps := b.Param("steps", graph.TensorType(tensor.Int64))
	sb := b.Sub("body")
	sb.Param("i", graph.TensorType(tensor.Int64))
	cond := sb.Param("c", graph.TensorType(tensor.Bool))
	h := sb.Param("h", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(8)))
	th, _ := sb.Op1(graph.OpTanh, nil, h)
	h2, _ := sb.Op1(graph.OpAdd, nil, th, x) // reads a value of the enclosing function
	la := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
	la.Body = sb.Return(cond, h2)
	outs, err := b.Node(graph.OpLoop, la, 1, steps, b.Const("go", tensor.Scalar(true)), x)
	if err != nil {
		t.Fatal(err)
	}
	gt, _ := b.Op1(graph.OpGreater, nil, b.Const("zero", tensor.Scalar(int64(0))), steps)
	tb := b.Sub("then")
	tv, _ := tb.Op1(graph.OpNeg, nil, outs[0])
	eb := b.Sub("else")
	ev, _ := eb.Op1(graph.OpExp, nil, outs[0])
	ia := graph.OpIf.NewAttrs().(*graph.IfAttrs)
	ia.ThenBranch, ia.ElseBranch = tb.Return(tv), eb.Return(ev)
	res, err := b.Node(graph.OpIf, ia, 1, gt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(res[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int64{0, 3} {
		checkCompiled(t, m, map[string]*tensor.Tensor{"x": f32(2, 5, 8), "steps": tensor.Scalar(k)})
	}
}

// TestExecutableRunsWithoutCompiler: an executable built here loads on a CPU device
// opened without any C compiler (as in a process with no cc on PATH) and gives the same
// results: it carries its kernels as a shared object.
func TestExecutableRunsWithoutCompiler(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4), graph.Const(16)))
	y, _ := b.Op1(graph.OpTanh, nil, x)
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := Compile(m, target.Host(), Options{CPU: openCPU(t)})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := exe.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bare, err := devcpu.Open(devcpu.Options{NoCompiler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if bare.Compiler() != nil || bare.Info().Toolchain != "" {
		t.Fatal("the bare device has a compiler")
	}
	var back vm.Executable
	if err := back.UnmarshalBinary(blob); err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(&back, []devices.Device{bare}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	in := f32(5, 4, 16)
	got, err := machine.Run(context.Background(), []*tensor.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Eval(m, map[string]ref.Value{"x": in}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodetest.CloseTensor(t, "tanh", got[0], want[0].(*tensor.Tensor))
	if _, err := machine.Run(context.Background(), []*tensor.Tensor{f32(6, 5, 16)}); !errors.Is(err, vm.ErrInput) {
		t.Fatalf("a [5,16] input to a [4,16] executable: %v, want ErrInput", err)
	}
}

// TestBlockedLayout: a small convnet (conv → relu → maxpool → conv → residual add →
// concat → global average pool) compiled with alter-layout keeps the convolutions'
// outputs in channel blocks through the elementwise ops, pooling and concat, and matches
// the reference; compiled plain, it matches too.
func TestBlockedLayout(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 8, 13, 11)...))
	conv := func(in *graph.Value, cin, cout int, seed uint64, pad int64) *graph.Value {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape, a.Pads = []int64{3, 3}, []int64{pad, pad, pad, pad}
		y, err := b.Op1(graph.OpConv, a, in, b.Const("", f32(seed, cout, cin, 3, 3)), b.Const("", f32(seed+1, cout)))
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	c1 := conv(x, 8, 64, 1, 1) // 64 channels: a multiple of every micro-kernel width
	r1, _ := b.Op1(graph.OpRelu, nil, c1)
	pa := graph.OpMaxPool.NewAttrs().(*graph.PoolAttrs)
	pa.KernelShape, pa.Strides, pa.Pads = []int64{3, 3}, []int64{2, 2}, []int64{1, 1, 1, 1}
	p1, _ := b.Op1(graph.OpMaxPool, pa, r1)
	c2 := conv(p1, 64, 64, 3, 1)
	s, _ := b.Op1(graph.OpAdd, nil, c2, p1)
	r2, _ := b.Op1(graph.OpClip, nil, s, b.Const("lo", tensor.Scalar(float32(0))), b.Const("hi", tensor.Scalar(float32(6))))
	ca := graph.OpConcat.NewAttrs().(*graph.AxisAttrs)
	ca.Axis = 1
	cc, _ := b.Op1(graph.OpConcat, ca, r2, p1)
	g, _ := b.Op1(graph.OpGlobalAveragePool, nil, cc)
	m, err := b.Module(g, r1)
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": f32(7, 1, 8, 13, 11)}
	res := checkCompiled(t, m, in)
	if res.Stats.Strategies["conv2d-nchwc-tensorized+epilogue"] != 2 {
		t.Fatalf("strategies %v: want both convolutions tensorized with their epilogues", res.Stats.Strategies)
	}
	// blocked: conv+relu, maxpool, conv+add+clip, concat, pool, and one transform of the
	// relu result (a graph output) back to NCHW
	if res.Stats.Launches != 6 || res.Stats.Fused != 3 || len(res.Stats.Groups) != 6 {
		t.Fatalf("%d launches, %d fused, %d groups; want 6 (one layout transform), 3, 6", res.Stats.Launches, res.Stats.Fused, len(res.Stats.Groups))
	}
	if g := res.Stats.Groups[0]; !strings.HasPrefix(g.Anchor, "Conv") || len(g.Fused) != 1 || !strings.HasPrefix(g.Fused[0], "Relu") {
		t.Fatalf("first group %+v: want the first Conv with its Relu", g)
	}
	dev := openCPU(t)
	dims, _ := engine.DimsFromInputs(m, in)
	for _, o := range []Options{{Recipe: engine.Recipe{PlainLayout: true}}, {Recipe: engine.Recipe{NoFusion: true}}} {
		o.Dims, o.CPU, o.Check = dims, dev, true
		r, err := Build(m, target.Host(), o)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]int{true: 5, false: 9}[!o.Recipe.NoFusion]
		if r.Stats.Launches != want {
			t.Fatalf("%+v: %d launches, want %d", o, r.Stats.Launches, want)
		}
	}
}

// TestConcurrentRuns: one loaded executable serves runs from several goroutines at once
// (each run has its own frame and arena; the kernels' thread pool is shared) and every
// run gets its own correct result.
func TestConcurrentRuns(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(64), graph.Const(300)))
	h, _ := b.Op1(graph.OpMatMul, nil, x, b.Const("w", f32(3, 300, 70)))
	y, _ := b.Op1(graph.OpTanh, nil, h)
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	dev := openCPU(t)
	exe, err := Compile(m, target.Host(), Options{CPU: dev})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(seed uint64) {
			for i := 0; i < 10; i++ {
				in := f32(seed*100+uint64(i), 64, 300)
				got, err := machine.Run(context.Background(), []*tensor.Tensor{in})
				if err != nil {
					errs <- err
					return
				}
				want, err := ref.Eval(m, map[string]ref.Value{"x": in}, ref.Options{})
				if err != nil {
					errs <- err
					return
				}
				g, w := got[0].Float64s(), want[0].(*tensor.Tensor).Float64s()
				for k := range w {
					if d := g[k] - w[k]; d > 1e-4+1e-3*abs(w[k]) || -d > 1e-4+1e-3*abs(w[k]) {
						errs <- fmt.Errorf("goroutine %d run %d: element %d = %v, want %v", seed, i, k, g[k], w[k])
						return
					}
				}
			}
			errs <- nil
		}(uint64(g + 1))
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestHalfPrecisionModelCompiles: a float16 model (a convolution, its bias and ReLU, a
// global pool and a matrix product, float16 weights and input) compiles, computed in
// float32 inside (widen-half), and answers what the reference evaluator answers, in
// float16.
func TestHalfPrecisionModelCompiles(t *testing.T) {
	h := func(t *tensor.Tensor) *tensor.Tensor { return t.Cast(tensor.Float16) }
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float16, graph.StaticShape(1, 3, 9, 9)...))
	conv := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.Pads = []int64{1, 1, 1, 1}
	c, err := b.Op1(graph.OpConv, conv, x, b.Const("w", h(f32(2, 8, 3, 3, 3))), b.Const("bias", h(f32(3, 8))))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Op1(graph.OpRelu, nil, c)
	p, _ := b.Op1(graph.OpGlobalAveragePool, nil, r)
	f, _ := b.Op1(graph.OpFlatten, nil, p)
	y, err := b.Op1(graph.OpMatMul, nil, f, b.Const("fc", h(f32(4, 8, 5))))
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	checkCompiled(t, m, map[string]*tensor.Tensor{"x": h(f32(1, 1, 3, 9, 9))})
}

// TestOutputCastOfBlockedData: a model output that Casts a blocked map (a float16
// model's outputs cast back to float32) is unblocked in the Cast's kernel with the
// unblocking's loop order (cast-unblock-tiled) and matches the reference.
func TestOutputCastOfBlockedData(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 8, 12, 20)...))
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape, a.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
	c1, err := b.Op1(graph.OpConv, a, x, b.Const("", f32(1, 64, 8, 3, 3)), b.Const("", f32(2, 64)))
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := b.Op1(graph.OpRelu, nil, c1)
	c2, _ := b.Op1(graph.OpConv, a, r1, b.Const("", f32(3, 64, 64, 3, 3)), b.Const("", f32(4, 64)))
	out, err := b.Op1(graph.OpCast, &graph.CastAttrs{To: int64(tensor.Float32), Saturate: 1}, r1)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(c2, out)
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiled(t, m, map[string]*tensor.Tensor{"x": f32(7, 1, 8, 12, 20)})
	if res.Stats.Strategies["cast-unblock-tiled+epilogue"] != 1 {
		t.Fatalf("strategies %v: want the output Cast unblocked by cast-unblock-tiled", res.Stats.Strategies)
	}
}
