package nodetest

import (
	"context"
	"errors"
	"fmt"
	"github.com/kilnrt/kiln/internal/testdata"
	"math"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Arg is one input of a node under test: a tensor passed at run time, or a constant
// the compiler sees (axes, shapes, weights). A nil T is an omitted optional input.
type Arg struct {
	T     *tensor.Tensor
	Const bool
}

// In is a run-time input; C is a compile-time constant; None is an omitted input.
func In(t *tensor.Tensor) Arg { return Arg{T: t} }
func C(t *tensor.Tensor) Arg  { return Arg{T: t, Const: true} }

var None = Arg{}

// Lowerer implements a node for the CPU (kernels/cpu.Strategies(...).Lower).
type Lowerer interface {
	Lower(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error)
}

// CheckNode builds a one-node graph (op with attrs over args, numOut outputs), evaluates
// it with the reference evaluator, lowers it with l, compiles and runs the kernel, and
// fails the test unless every output matches (floats within 1e-4 + 1e-3·|want|, other
// types exactly). It returns the strategy that was used. Without a C compiler it skips
// (fails under KILN_REQUIRE_DATA=1, see internal/testdata).
func CheckNode(t testing.TB, l Lowerer, op graph.Op, attrs any, numOut int, args ...Arg) string {
	t.Helper()
	n, want := refNode(t, op, attrs, numOut, args)
	got, strategy, err := RunNode(l, n, args)
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	for i := range want {
		CloseTensor(t, fmt.Sprintf("%v output %d (strategy %s)", op, i, strategy), got[i], want[i])
	}
	return strategy
}

// Build makes the one-node module of op over args (run-time inputs become parameters
// x<i>, constants c<i>) and the reference evaluator's inputs for it.
func Build(t testing.TB, op graph.Op, attrs any, numOut int, args ...Arg) (*graph.Module, map[string]ref.Value) {
	t.Helper()
	b := graph.NewBuilder("main")
	inputs := map[string]ref.Value{}
	var vals []*graph.Value
	for i, a := range args {
		switch {
		case a.T == nil:
			vals = append(vals, nil)
		case a.Const:
			vals = append(vals, b.Const(fmt.Sprintf("c%d", i), a.T))
		default:
			name := fmt.Sprintf("x%d", i)
			shape := make([]int64, len(a.T.Shape))
			for k, d := range a.T.Shape {
				shape[k] = int64(d)
			}
			vals = append(vals, b.Param(name, graph.TensorType(a.T.DType, graph.StaticShape(shape...)...)))
			inputs[name] = a.T
		}
	}
	outs, err := b.Node(op, attrs, numOut, vals...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	return m, inputs
}

// LowerErr builds the one-node module of op over args and returns the error of lowering
// its node with l (nil when it lowers).
func LowerErr(t testing.TB, l Lowerer, op graph.Op, attrs any, numOut int, args ...Arg) error {
	t.Helper()
	m, _ := Build(t, op, attrs, numOut, args...)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	in, err := Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Lower(n, in, target.Host())
	return err
}

// refNode builds the node and its reference outputs.
func refNode(t testing.TB, op graph.Op, attrs any, numOut int, args []Arg) (*graph.Node, []*tensor.Tensor) {
	t.Helper()
	m, inputs := Build(t, op, attrs, numOut, args...)
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]*tensor.Tensor, len(res))
	for i, r := range res {
		want[i] = r.(*tensor.Tensor)
	}
	return m.Main.Nodes[len(m.Main.Nodes)-1], want
}

// Placeholders makes the kernels.Inputs of a node from its input values' static types.
func Placeholders(n *graph.Node) ([]kernels.Input, error) {
	in := make([]kernels.Input, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		shape, err := kernels.PhysicalShape(v.Type)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		ext := kernels.Static(shape...)
		in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, ext...), Const: v.Const}
	}
	return in, nil
}

// RunNode lowers n with l and runs the kernel once on args (tensors in input order),
// returning its outputs and the strategy's name.
func RunNode(l Lowerer, n *graph.Node, args []Arg) ([]*tensor.Tensor, string, error) {
	in, err := Placeholders(n)
	if err != nil {
		return nil, "", err
	}
	impl, err := l.Lower(n, in, target.Host())
	if err != nil {
		return nil, "", err
	}
	dev, mod, k, err := load(impl.Func)
	if err != nil {
		return nil, impl.Strategy, err
	}
	defer dev.Close()
	defer mod.Close()
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, p := range impl.Params {
		v := args[p.Input].T
		if p.Prepack != nil {
			if v, err = p.Prepack(v); err != nil {
				return nil, impl.Strategy, err
			}
		}
		raw, err := v.Raw()
		if err != nil {
			return nil, impl.Strategy, err
		}
		b, err := dev.Alloc(int64(max(len(raw), 1)))
		if err != nil {
			return nil, impl.Strategy, err
		}
		bufs = append(bufs, b)
		if err := dev.CopyIn(b, raw); err != nil {
			return nil, impl.Strategy, err
		}
	}
	outParams := impl.Func.Params[len(impl.Params):]
	for _, p := range outParams {
		n := int64(p.DT.Size())
		for _, e := range p.Shape {
			n *= e.(*loopir.IntImm).V
		}
		b, err := dev.Alloc(max(n, 1))
		if err != nil {
			return nil, impl.Strategy, err
		}
		bufs = append(bufs, b)
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil {
		return nil, impl.Strategy, err
	}
	var outs []*tensor.Tensor
	for i, p := range outParams {
		shape := make(tensor.Shape, len(p.Shape))
		for k, e := range p.Shape {
			shape[k] = int(e.(*loopir.IntImm).V)
		}
		// a strategy may compute an output under other extents (a matmul over flattened
		// rows): the node's static shape names the result
		if want, ok := n.Outputs[i].Type.ConstShape(); ok && want.NumElements() == shape.NumElements() {
			shape = want
		}
		raw := make([]byte, int64(p.DT.Size())*int64(shape.NumElements()))
		if err := dev.CopyOut(raw, bufs[len(impl.Params)+i]); err != nil {
			return nil, impl.Strategy, err
		}
		o, err := tensor.FromRaw(p.DT, shape, raw)
		if err != nil {
			return nil, impl.Strategy, err
		}
		outs = append(outs, o)
	}
	return outs, impl.Strategy, nil
}

// load verifies f, lowers it through the CPU pipeline, compiles it on a fresh CPU
// device and returns the device, the module and its kernel (the caller closes the
// module, then the device).
func load(f *loopir.PrimFunc) (devices.Device, devices.Module, devices.Kernel, error) {
	if err := loopir.Verify(f); err != nil {
		return nil, nil, nil, err
	}
	low, err := passes.CPUPipeline().Run(f)
	if err != nil {
		return nil, nil, nil, err
	}
	src, err := codegen.EmitC(low)
	if err != nil {
		return nil, nil, nil, err
	}
	dev, err := cpu.Open(cpu.Options{Threads: 2})
	if err != nil {
		return nil, nil, nil, err
	}
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		dev.Close()
		return nil, nil, nil, err
	}
	mod, err := dev.Load(bin)
	if err != nil {
		dev.Close()
		return nil, nil, nil, err
	}
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		mod.Close()
		dev.Close()
		return nil, nil, nil, err
	}
	return dev, mod, k, nil
}

// CloseTensor fails the test unless got matches want: same dtype and shape, floats
// within 1e-4 + 1e-3·|want| (NaN matches NaN and nothing else), other types exactly.
func CloseTensor(t testing.TB, what string, got, want *tensor.Tensor) {
	t.Helper()
	if got.DType != want.DType || !got.Shape.Equal(want.Shape) {
		t.Fatalf("%s: got %v%v, want %v%v", what, got.DType, got.Shape, want.DType, want.Shape)
	}
	g, w := got.Float64s(), want.Float64s()
	for i := range w {
		if math.IsNaN(w[i]) && math.IsNaN(g[i]) || g[i] == w[i] {
			continue
		}
		if !want.DType.IsFloat() || math.IsNaN(w[i]) || math.IsNaN(g[i]) || math.Abs(g[i]-w[i]) > 1e-4+1e-3*math.Abs(w[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, g[i], w[i])
		}
	}
}
