package compiler

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// symbolicModule: a symbolic batch and width through kernels with runtime dims, a
// Shape/Gather/Concat chain that becomes a ShapeExpr, a zero-copy reshape to a
// symbolic shape, and a second input that must agree with the first on b.
func symbolicModule(t *testing.T) *graph.Module {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[b,w], %y: f32[b,w]) {
  const %zero: i64[]{0} = [0]
  const %axes: i64[1]{0} = [0]
  const %minus1: i64[1]{-1} = [-1]
  %a = Relu(%x) : f32[b,w]
  %s = Add(%a, %y) : f32[b,w]
  %t1 = Shape(%x) : i64[2]{b,w}
  %t2 = Gather(%t1, %zero) : i64[]{b}
  %t3 = Unsqueeze(%t2, %axes) : i64[1]{b}
  %t4 = Concat(%minus1, %t3) : i64[2]{-1,b}
  %r = Reshape(%s, %t4) : f32[w,b]
  %e = Exp(%r) : f32[w,b]
  return %e, %t4
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSymbolicOneExecutable: compiled once with nothing bound, the executable runs at
// several shapes (extents 0 and 1 included) and matches the reference each time.
func TestSymbolicOneExecutable(t *testing.T) {
	for _, noFusion := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[noFusion], func(t *testing.T) { symbolicOnce(t, noFusion) })
	}
}

func symbolicOnce(t *testing.T, noFusion bool) {
	symbolicOnceFor(t, target.Host(), Options{Recipe: engine.Recipe{NoFusion: noFusion}})
}

// symbolicOnceFor compiles symbolicModule once for tg with opts (CPU and Check set
// here) and runs it at several shapes.
func symbolicOnceFor(t *testing.T, tg target.Target, opts Options) {
	m := symbolicModule(t)
	// b = 0 is left out: the reshape target [-1, b] would then hold a 0, which ONNX
	// reads as "keep the input's extent" — shape inference, like ONNX Runtime's, takes
	// a symbol to be at least 1 where 0 means something else
	var runs [][]*tensor.Tensor
	for i, shape := range [][2]int{{3, 5}, {1, 1}, {2, 0}, {7, 33}, {3, 5}} {
		runs = append(runs, []*tensor.Tensor{f32(uint64(i+1), shape[0], shape[1]), f32(uint64(i+50), shape[0], shape[1])})
	}
	machine, res := checkSymbolic(t, m, tg, opts, runs)
	for _, io := range res.Exe.Inputs {
		if io.Shape[0] != -1 || io.Shape[1] != -1 {
			t.Fatalf("input %s has shape %v; want dynamic extents", io.Name, io.Shape)
		}
	}
	// y disagrees with x on b: a bad input, not a crash or a wrong answer
	_, err := machine.Run(context.Background(), []*tensor.Tensor{f32(1, 3, 5), f32(2, 4, 5)})
	if !errors.Is(err, vm.ErrInput) {
		t.Fatalf("inputs disagreeing on b: got %v, want ErrInput", err)
	}
}

// checkSymbolic compiles m once for tg with nothing bound (opts with CPU and Check set
// here; with opts.GPU, the executable runs on the CPU and that device), loads it after
// a marshal round trip and checks each run's inputs (in parameter order) against the
// reference evaluator. The VM is closed when the test ends.
func checkSymbolic(t *testing.T, m *graph.Module, tg target.Target, opts Options, runs [][]*tensor.Tensor) (*vm.VM, *Result) {
	t.Helper()
	dev := openCPU(t)
	opts.CPU, opts.Check = dev, true
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
	t.Cleanup(func() { machine.Close() })
	for _, in := range runs {
		got, err := machine.Run(context.Background(), in)
		if err != nil {
			t.Fatalf("%v: %v", in[0].Shape, err)
		}
		refIn := map[string]ref.Value{}
		for i, p := range m.Main.Params {
			refIn[p.Name] = in[i]
		}
		want, err := ref.Eval(m, refIn, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for k := range want {
			nodetest.CloseTensor(t, m.Main.Results[k].Name, got[k], want[k].(*tensor.Tensor))
		}
	}
	return machine, res
}

// symbolicOneInput compiles the one-input module src with nothing bound and returns it
// with a machine running the executable (closed at the test's end) and check, which
// runs x on it and compares the result with the reference evaluator's.
func symbolicOneInput(t *testing.T, src string) (*vm.VM, func(x *tensor.Tensor) *tensor.Tensor) {
	t.Helper()
	dev := openCPU(t)
	m, err := graph.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { machine.Close() })
	return machine, func(x *tensor.Tensor) *tensor.Tensor {
		t.Helper()
		got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
		if err != nil {
			t.Fatalf("x%v: %v", x.Shape, err)
		}
		want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		nodetest.CloseTensor(t, "output", got[0], want[0].(*tensor.Tensor))
		return got[0]
	}
}

// TestSymbolicSliceGuard: a constant table sliced to a symbolic length (gpt2's causal
// mask) compiles generically; a longer input than the table is ErrInput at run time.
func TestSymbolicSliceGuard(t *testing.T) {
	machine, check := symbolicOneInput(t, `module opsets(""=17)
func @main(%x: f32[s]) {
  const %table: f32[8] = [1, 2, 3, 4, 5, 6, 7, 8]
  const %zero: i64[1]{0} = [0]
  %shape = Shape(%x) : i64[1]{s}
  %rows = Slice(%table, %zero, %shape) : f32[s]
  %y = Add(%x, %rows) : f32[s]
  return %y
}`)
	for _, s := range []int{1, 5, 8} {
		check(f32(uint64(s), s))
	}
	if _, err := machine.Run(context.Background(), []*tensor.Tensor{f32(9, 9)}); !errors.Is(err, vm.ErrInput) {
		t.Fatalf("s=9 past the 8-row table: got %v, want ErrInput", err)
	}
}

// TestSymbolicSliceToStaticEnd: a symbolic dim cut at a static end ([:4]) is min(s, 4)
// long, shorter than the end when the input is (an NMS's selection truncated to its
// first N); compiled once with nothing bound, the executable answers both.
func TestSymbolicSliceToStaticEnd(t *testing.T) {
	_, check := symbolicOneInput(t, `module opsets(""=17)
func @main(%x: f32[s]) {
  const %zero: i64[1]{0} = [0]
  const %four: i64[1]{4} = [4]
  %y = Slice(%x, %zero, %four) : f32[_d1]
  %z = Mul(%y, %y) : f32[_d1]
  return %z
}`)
	for _, s := range []int{2, 4, 6} {
		if got, n := check(f32(uint64(s), s)), min(s, 4); len(got.Shape) != 1 || got.Shape[0] != n {
			t.Fatalf("s=%d: shape %v, want [%d]", s, got.Shape, n)
		}
	}
}

// TestSymbolicEmptyReduction: reductions over a symbolic axis, compiled once with
// nothing bound, answer their identity (−inf, +inf, 1, NaN for a mean) for a 0-long
// axis, also after a run with rows has left numbers in the output's storage.
func TestSymbolicEmptyReduction(t *testing.T) {
	_, check := symbolicOneInput(t, `module opsets(""=18)
func @main(%x: f32[n,3]) {
  const %ax: i64[1]{1} = [0]
  %a = ReduceMax(%x, %ax) {keepdims=0} : f32[3]
  %b = ReduceMin(%x, %ax) {keepdims=0} : f32[3]
  %c = ReduceProd(%x, %ax) {keepdims=0} : f32[3]
  %d = ReduceMean(%x, %ax) {keepdims=0} : f32[3]
  %ab = Concat(%a, %b) {axis=0} : f32[6]
  %cd = Concat(%c, %d) {axis=0} : f32[6]
  %y = Concat(%ab, %cd) {axis=0} : f32[12]
  return %y
}`)
	for _, n := range []int{2, 0, 5, 0} {
		check(f32(uint64(n), n, 3))
	}
}

// TestSymbolicStoragesFreedAtLastUse: a chain of unfused elementwise kernels on a
// symbolic tensor frees each storage after its last use (KillRegister), so the call
// holds about two tensors at a time, not one per node.
func TestSymbolicStoragesFreedAtLastUse(t *testing.T) {
	dev := openCPU(t)
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[n,1024]) {
  %a = Relu(%x) : f32[n,1024]
  %b = Tanh(%a) : f32[n,1024]
  %c = Exp(%b) : f32[n,1024]
  %d = Neg(%c) : f32[n,1024]
  %e = Abs(%d) : f32[n,1024]
  %f = Sqrt(%e) : f32[n,1024]
  return %f
}`)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true, Recipe: engine.Recipe{NoFusion: true}})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	x := f32(3, 256, 1024) // 1 MiB per tensor
	got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodetest.CloseTensor(t, "f", got[0], want[0].(*tensor.Tensor))
	if held := machine.MemoryStats().Held; held > 3<<20+1<<19 {
		t.Fatalf("the pool holds %d bytes after a call of six 1 MiB tensors; want at most 3.5 MiB (storages freed at their last use)", held)
	}
}

// TestLoopScanOutputs: a Loop with a carried tensor and a scan output (one row per
// iteration) compiles generically (n free) and matches the reference for 0, 1 and 5
// iterations, an empty scan output included.
func TestLoopScanOutputs(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(4)))
	steps := b.Param("steps", graph.TensorType(tensor.Int64))
	sb := b.Sub("body")
	sb.Param("i", graph.TensorType(tensor.Int64))
	cond := sb.Param("c", graph.TensorType(tensor.Bool))
	h := sb.Param("h", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(4)))
	h2, _ := sb.Op1(graph.OpTanh, nil, h)
	s, _ := sb.Op1(graph.OpAdd, nil, h2, x) // the scanned value reads the outer x
	la := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
	la.Body = sb.Return(cond, h2, s)
	outs, err := b.Node(graph.OpLoop, la, 2, steps, b.Const("go", tensor.Scalar(true)), x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	dev := openCPU(t)
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	for _, c := range []struct{ n, steps int }{{3, 5}, {2, 1}, {3, 0}, {1, 4}} {
		x := f32(uint64(c.n), c.n, 4)
		k := tensor.Scalar(int64(c.steps))
		got, err := machine.Run(context.Background(), []*tensor.Tensor{x, k})
		if err != nil {
			t.Fatalf("n=%d steps=%d: %v", c.n, c.steps, err)
		}
		want, err := ref.Eval(m, map[string]ref.Value{"x": x, "steps": k}, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w := want[i].(*tensor.Tensor)
			if c.steps == 0 && len(got[i].Shape) == len(w.Shape) && got[i].Len() == 0 && w.Len() == 0 {
				continue // empty either way (the reference leaves unknown element extents 0)
			}
			if !got[i].Shape.Equal(w.Shape) {
				t.Fatalf("n=%d steps=%d output %d: shape %v, want %v", c.n, c.steps, i, got[i].Shape, w.Shape)
			}
			nodetest.CloseTensor(t, "loop output", got[i], w)
		}
	}
}

// TestScan: a Scan with a running-sum state and a scan output over a symbolic length,
// its input read in reverse, matches the reference at lengths 0, 1 and 4.
func TestScan(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("s"), graph.Const(3)))
	init := b.Param("init", graph.TensorType(tensor.Float32, graph.Const(3)))
	sb := b.Sub("body")
	sum := sb.Param("sum", graph.TensorType(tensor.Float32, graph.Const(3)))
	xi := sb.Param("xi", graph.TensorType(tensor.Float32, graph.Const(3)))
	next, _ := sb.Op1(graph.OpAdd, nil, sum, xi)
	out, _ := sb.Op1(graph.OpTanh, nil, next)
	sa := graph.OpScan.NewAttrs().(*graph.ScanAttrs)
	sa.Body, sa.NumScanInputs, sa.ScanInputDirections = sb.Return(next, out), 1, []int64{1}
	outs, err := b.Node(graph.OpScan, sa, 2, init, x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	dev := openCPU(t)
	res, err := Build(m, target.Host(), Options{CPU: dev, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	for _, s := range []int{4, 1, 0} {
		in := []*tensor.Tensor{f32(uint64(s+1), s, 3), f32(9, 3)}
		got, err := machine.Run(context.Background(), in)
		if err != nil {
			t.Fatalf("s=%d: %v", s, err)
		}
		want, err := ref.Eval(m, map[string]ref.Value{"x": in[0], "init": in[1]}, ref.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w := want[i].(*tensor.Tensor)
			if s == 0 && got[i].Len() == 0 && w.Len() == 0 && len(got[i].Shape) == len(w.Shape) {
				continue
			}
			if !got[i].Shape.Equal(w.Shape) {
				t.Fatalf("s=%d output %d: shape %v, want %v", s, i, got[i].Shape, w.Shape)
			}
			nodetest.CloseTensor(t, "scan output", got[i], w)
		}
	}
}
