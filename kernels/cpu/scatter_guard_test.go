package cpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// guardBytes is the sentinel tail every buffer of runGuarded carries past its end.
const guardBytes = 256

// runGuarded lowers op over args (run-time inputs) with the CPU strategies and runs
// it with runImplGuarded.
func runGuarded(t *testing.T, checked bool, op graph.Op, attrs any, args ...*tensor.Tensor) error {
	t.Helper()
	in := make([]nt.Arg, len(args))
	for i, a := range args {
		in[i] = nt.In(a)
	}
	m, _ := nt.Build(t, op, attrs, 1, in...)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	ph, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := Strategies(kernels.Default()).Lower(n, ph, hostTarget())
	if err != nil {
		t.Fatal(err)
	}
	return runImplGuarded(t, checked, impl, nil, args...)
}

// runImplGuarded builds impl's kernel (bounds-checked when checked) and runs it at the
// given values of its dims (by name) on buffers that each carry a sentinel tail of
// guardBytes; it fails the test if a tail changed (a write outside a buffer) and
// returns the kernel's error.
func runImplGuarded(t *testing.T, checked bool, impl *kernels.Impl, env map[string]int64, args ...*tensor.Tensor) error {
	t.Helper()
	low, err := passes.CPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitCWith(codegen.COptions{BoundsCheck: checked}, low)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	var contents [][]byte
	for _, p := range impl.Params {
		raw, err := args[p.Input].Raw()
		if err != nil {
			t.Fatal(err)
		}
		contents = append(contents, raw)
	}
	for _, p := range impl.Func.Params[len(impl.Params):] {
		size := loopir.Bin(loopir.Mul, loopir.Int(int64(p.DT.Size())), p.Elements())
		v, ok := evalExtent(size, env)
		if !ok {
			t.Fatalf("the size of %s is not known at %v", p.Name, env)
		}
		contents = append(contents, make([]byte, v))
	}
	dims := make([]int64, len(impl.Func.Dims))
	for i, d := range impl.Func.Dims {
		dims[i] = env[d.Name]
	}
	sentinel := bytes.Repeat([]byte{0xA5}, guardBytes)
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, c := range contents {
		b, err := dev.Alloc(int64(len(c) + guardBytes))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if err := dev.CopyIn(b, append(append([]byte{}, c...), sentinel...)); err != nil {
			t.Fatal(err)
		}
	}
	kerr := dev.Launch(k, devices.Geometry{}, bufs, dims)
	for i, c := range contents {
		raw := make([]byte, len(c)+guardBytes)
		if err := dev.CopyOut(raw, bufs[i]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw[len(c):], sentinel) {
			t.Fatalf("%s: the kernel wrote past the end of buffer %d (%s)", impl.Func.Name, i, impl.Func.Params[i].Name)
		}
	}
	return kerr
}

// TestHostileIndicesFailTheKernelAndWriteNothingOutside: an index outside [-n, n) in a
// scatter or a GatherND (one far past the end, one just past it, one below -n) makes
// the kernel report that index and n, in the plain and the bounds-checked build
// (which would report any access outside a buffer first), and no buffer is written past
// its end.
func TestHostileIndicesFailTheKernelAndWriteNothingOutside(t *testing.T) {
	data := f32(111, 4, 6)
	for _, bad := range []int64{1 << 40, 4, -5} {
		ind := i64s([]int{2, 1}, 1, bad)
		cases := []struct {
			op    graph.Op
			attrs any
			args  []*tensor.Tensor
		}{
			{graph.OpScatterElements, scatterElementsAttrs(0, "none"), []*tensor.Tensor{data, i64s([]int{2, 2}, 0, 1, bad, 3), f32(112, 2, 2)}},
			{graph.OpScatterElements, scatterElementsAttrs(0, "add"), []*tensor.Tensor{data, i64s([]int{2, 2}, 0, 1, bad, 3), f32(112, 2, 2)}},
			{graph.OpScatterND, scatterNDAttrs("none"), []*tensor.Tensor{data, ind, f32(113, 2, 6)}},
			{graph.OpScatterND, scatterNDAttrs("mul"), []*tensor.Tensor{data, ind, f32(113, 2, 6)}},
			{graph.OpGatherND, gatherNDAttrs(0), []*tensor.Tensor{data, ind}},
		}
		for _, c := range cases {
			for _, checked := range []bool{false, true} {
				what := fmt.Sprintf("%v index %d bounds-checked=%v", c.op, bad, checked)
				err := runGuarded(t, checked, c.op, c.attrs, c.args...)
				var ke *devices.KernelError
				if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange || ke.Detail != [2]int64{bad, 4} {
					t.Errorf("%s: got %v (%+v), want the index %d out of range for 4", what, err, ke, bad)
				}
			}
		}
	}
}

// evalExtent is an extent's value with the dims bound by name.
func evalExtent(e loopir.Expr, env map[string]int64) (int64, bool) {
	switch e := e.(type) {
	case *loopir.IntImm:
		return e.V, true
	case *loopir.Var:
		v, ok := env[e.Name]
		return v, ok
	case *loopir.Binary:
		a, ok1 := evalExtent(e.A, env)
		b, ok2 := evalExtent(e.B, env)
		switch e.Op {
		case loopir.Add:
			return a + b, ok1 && ok2
		case loopir.Sub:
			return a - b, ok1 && ok2
		case loopir.Mul:
			return a * b, ok1 && ok2
		case loopir.Max:
			return max(a, b), ok1 && ok2
		case loopir.Min:
			return min(a, b), ok1 && ok2
		}
	}
	return 0, false
}

// TestScatterIntoAnAxisEmptyAtRunTimeFailsAndWritesNothing: updates along an axis whose
// extent is 0 at run time have nowhere to land: the kernel reports the first index as
// out of range and writes nothing (in the plain and the bounds-checked build).
func TestScatterIntoAnAxisEmptyAtRunTimeFailsAndWritesNothing(t *testing.T) {
	b := graph.NewBuilder("main")
	f := tensor.Float32
	s := graph.Sym("s")
	x := b.Param("x", graph.TensorType(f, graph.Const(2), s))
	ind := b.Param("i", graph.TensorType(tensor.Int64, graph.Const(2), graph.Const(3)))
	upd := b.Param("u", graph.TensorType(f, graph.Const(2), graph.Const(3)))
	outs, err := b.Node(graph.OpScatterElements, scatterElementsAttrs(1, "add"), 1, x, ind, upd)
	if err != nil {
		t.Fatal(err)
	}
	syms := kernels.Syms{}
	var in []kernels.Input
	for i, v := range []*graph.Value{x, ind, upd} {
		in = append(in, kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...)})
	}
	impl, err := Strategies(kernels.Default()).Lower(outs[0].Def, in, hostTarget())
	if err != nil {
		t.Fatal(err)
	}
	for _, checked := range []bool{false, true} {
		err := runImplGuarded(t, checked, impl, map[string]int64{"s": 0},
			tensor.New(f, tensor.Shape{2, 0}), i64s([]int{2, 3}, 0, 0, 0, 0, 0, 0), f32(131, 2, 3))
		var ke *devices.KernelError
		if !errors.As(err, &ke) || ke.Code != devices.KernelIndexOutOfRange || ke.Detail != [2]int64{0, 0} {
			t.Errorf("bounds-checked=%v: got %v (%+v), want the index 0 out of range for 0", checked, err, ke)
		}
	}
}
