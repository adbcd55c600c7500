package nodetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// SymArg is one input of a node under a symbolic check: a run-time input of a type
// whose extents may be symbols, a compile-time constant, or an integer tensor known only
// as dims over the symbols (a kiln.ShapeExpr: a Type with Known elements).
type SymArg struct {
	Type  graph.Type
	Const *tensor.Tensor
	// Data makes the input's value at a binding of the symbols; nil gives the Known
	// elements' values, or else random values (floats in [-1, 1), integers in [0, 4),
	// booleans) of the bound shape.
	Data func(env map[string]int64) *tensor.Tensor
}

// Sym is a run-time input of type dt[dims...] (dims as graph.ParseDim reads them: "3",
// "batch", "2*s+1").
func Sym(dt tensor.DType, dims ...string) SymArg {
	shape := make([]graph.Dim, len(dims))
	for k, s := range dims {
		d, err := graph.ParseDim(s)
		if err != nil {
			panic("BUG: nodetest.Sym: " + err.Error())
		}
		shape[k] = d
	}
	return SymArg{Type: graph.TensorType(dt, shape...)}
}

// SymC is a compile-time constant input.
func SymC(t *tensor.Tensor) SymArg { return SymArg{Const: t} }

// SymNone is an omitted optional input.
var SymNone = SymArg{}

// ShapeOf is a 1-D int64 input whose elements are the given dims (a kiln.ShapeExpr).
func ShapeOf(dims ...string) SymArg {
	a := Sym(tensor.Int64, "1")
	a.Type.Shape = graph.StaticShape(int64(len(dims)))
	for _, s := range dims {
		d, _ := graph.ParseDim(s)
		a.Type.Known = append(a.Type.Known, d)
	}
	return a
}

// ScalarOf is a 0-D int64 input whose value is the given dim (a kiln.ShapeExpr).
func ScalarOf(dim string) SymArg {
	a := ShapeOf(dim)
	a.Type.Shape = nil
	return a
}

// CheckSymbolic lowers op over args once, with one kernel dim per symbol, and runs that
// kernel at every binding of the symbols against the reference evaluator on the node
// built over the bound (static) shapes; then it checks the static node at the last
// binding with CheckNode. Constant inputs that the strategy prepacks are prepacked, as
// the compiler does. Outputs must match in shape (the kernel's extents evaluated at the
// binding) and values.
func CheckSymbolic(t *testing.T, l Lowerer, op graph.Op, attrs any, numOut int, args []SymArg, binds ...map[string]int64) {
	t.Helper()
	b := graph.NewBuilder("main")
	vals := symValues(t, b, "", args)
	outs, err := b.Node(op, attrs, numOut, vals...)
	if err != nil {
		t.Fatal(err)
	}
	n := outs[0].Def
	in := placeholders(kernels.Syms{}, vals)
	impl, err := l.Lower(n, in, target.Host())
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	dev, mod, k, err := load(impl.Func)
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatalf("%v: %v", op, err)
	}
	defer dev.Close()
	defer mod.Close()
	var last []Arg
	for bi, env := range binds {
		static := make([]Arg, len(args))
		for i, a := range args {
			static[i] = bindArg(t, a, env, uint64(100*bi+i))
		}
		_, want := refNode(t, op, attrs, numOut, static)
		got, err := runSymbolic(dev, k, n, impl, [][]kernels.Input{in}, [][]Arg{static}, env)
		if err != nil {
			t.Fatalf("%v at %v: %v", op, env, err)
		}
		for j := range want {
			CloseTensor(t, fmt.Sprintf("%v output %d at %v (strategy %s)", op, j, env, impl.Strategy), got[j], want[j])
		}
		last = static
	}
	if last != nil { // with every symbol bound, a kiln.ShapeExpr is a constant
		for i, a := range args {
			if a.Type.Known != nil {
				last[i].Const = true
			}
		}
		CheckNode(t, l, op, attrs, numOut, last...)
	}
}

// symValues makes the graph values of args: constants, kiln.ShapeExprs and parameters
// (named x<prefix><i>; nil for an omitted input).
func symValues(t testing.TB, b *graph.Builder, prefix string, args []SymArg) []*graph.Value {
	t.Helper()
	vals := make([]*graph.Value, len(args))
	for i, a := range args {
		switch {
		case a.Const != nil:
			vals[i] = b.Const(fmt.Sprintf("c%s%d", prefix, i), a.Const)
		case a.Type.Known != nil:
			v := a.Type
			out, err := b.Node(graph.OpShapeExpr, &graph.ShapeExprAttrs{Value: &v}, 1)
			if err != nil {
				t.Fatal(err)
			}
			vals[i] = out[0]
		case a.Type.Kind == graph.KindTensor && a.Type.DType != 0:
			vals[i] = b.Param(fmt.Sprintf("x%s%d", prefix, i), a.Type)
		}
	}
	return vals
}

// placeholders makes a node's kernel inputs from its values' types, one kernel dim per
// symbol (shared through syms).
func placeholders(syms kernels.Syms, vals []*graph.Value) []kernels.Input {
	in := make([]kernels.Input, len(vals))
	for i, v := range vals {
		if v != nil {
			in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...), Const: v.Const}
		}
	}
	return in
}

// bindArg is a's value at env (a constant stays one).
func bindArg(t *testing.T, a SymArg, env map[string]int64, seed uint64) Arg {
	t.Helper()
	switch {
	case a.Const != nil:
		return C(a.Const)
	case a.Type.DType == 0:
		return None
	case a.Data != nil:
		return In(a.Data(env))
	case a.Type.Known != nil:
		v, ok := graph.EvalKnown(a.Type, env)
		if !ok {
			t.Fatalf("%v: a symbol has no value in %v", a.Type, env)
		}
		return In(v)
	}
	shape := make(tensor.Shape, len(a.Type.Shape))
	for k, d := range a.Type.Shape {
		v, ok := d.Eval(env)
		if !ok || v < 0 {
			t.Fatalf("extent %v at %v", d, env)
		}
		shape[k] = int(v)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float64, shape.NumElements())
	for k := range v {
		switch {
		case a.Type.DType.IsFloat():
			v[k] = r.Float64()*2 - 1
		case a.Type.DType == tensor.Bool:
			v[k] = float64(r.IntN(2))
		default:
			v[k] = float64(r.IntN(4))
		}
	}
	return In(tensor.FromFloat64s(a.Type.DType, shape, v))
}

// runSymbolic launches k on the bound inputs (per node of the kernel: the anchor, then
// its epilogues, as kernels.Param.Node counts them) with the kernel's dims taken from
// env by name, and returns its outputs in the shapes its extents take at env (or in the
// shapes of n's outputs at env when the element counts agree: a strategy may compute an
// output under other extents, a matmul over flattened rows).
func runSymbolic(dev devices.Device, k devices.Kernel, n *graph.Node, impl *kernels.Impl, in [][]kernels.Input, args [][]Arg, env map[string]int64) ([]*tensor.Tensor, error) {
	dims := make([]int64, len(impl.Func.Dims))
	for i, d := range impl.Func.Dims {
		v, ok := env[d.Name]
		if !ok {
			return nil, fmt.Errorf("kernel dim %s has no value", d.Name)
		}
		dims[i] = v
	}
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	alloc := func(raw []byte) error {
		b, err := dev.Alloc(int64(max(len(raw), 1)))
		if err != nil {
			return err
		}
		bufs = append(bufs, b)
		return dev.CopyIn(b, raw)
	}
	for _, p := range impl.Params {
		v := args[p.Node][p.Input].T
		want, err := evalShape(in[p.Node][p.Input].T.Shape, env)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(want, v.Shape) {
			return nil, fmt.Errorf("input %d of node %d is %v, its placeholder %v at the binding", p.Input, p.Node, v.Shape, want)
		}
		if p.Prepack != nil {
			if v, err = p.Prepack(v); err != nil {
				return nil, err
			}
		}
		raw, err := v.Raw()
		if err != nil {
			return nil, err
		}
		if err := alloc(raw); err != nil {
			return nil, err
		}
	}
	outParams := impl.Func.Params[len(impl.Params):]
	shapes := make([]tensor.Shape, len(outParams))
	for i, p := range outParams {
		s, err := evalShape(p.Shape, env)
		if err != nil {
			return nil, err
		}
		if want, ok := nodeShape(n.Outputs[i].Type, env); ok && want.NumElements() == s.NumElements() {
			s = want
		}
		shapes[i] = s
		if err := alloc(withCanary(p.DT.Size() * s.NumElements())); err != nil {
			return nil, err
		}
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, dims); err != nil {
		return nil, err
	}
	var outs []*tensor.Tensor
	for i, p := range outParams {
		n := p.DT.Size() * shapes[i].NumElements()
		raw := make([]byte, n+canary)
		if err := dev.CopyOut(raw, bufs[len(impl.Params)+i]); err != nil {
			return nil, err
		}
		if !slices.Equal(raw[n:], withCanary(0)) {
			return nil, fmt.Errorf("output %d: the kernel wrote past its %v elements", i, shapes[i])
		}
		o, err := tensor.FromRaw(p.DT, shapes[i], raw[:n])
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// canary is how many bytes past each output runSymbolic fills with a pattern that a
// kernel writing out of bounds would change.
const canary = 256

// withCanary is n zero bytes followed by the canary pattern.
func withCanary(n int) []byte {
	raw := make([]byte, n+canary)
	for i := n; i < len(raw); i++ {
		raw[i] = byte(0xA5 ^ (i - n))
	}
	return raw
}

// nodeShape is a tensor type's shape at env.
func nodeShape(t graph.Type, env map[string]int64) (tensor.Shape, bool) {
	if t.Kind != graph.KindTensor || t.UnknownRank {
		return nil, false
	}
	out := make(tensor.Shape, len(t.Shape))
	for k, d := range t.Shape {
		v, ok := d.Eval(env)
		if !ok || v < 0 {
			return nil, false
		}
		out[k] = int(v)
	}
	return out, true
}

// evalShape evaluates extents with the dims bound by name.
func evalShape(ext []loopir.Expr, env map[string]int64) (tensor.Shape, error) {
	out := make(tensor.Shape, len(ext))
	for k, e := range ext {
		v, err := evalInt(e, env)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("extent %s does not evaluate at %v (%v)", loopir.ExprString(e), env, err)
		}
		out[k] = int(v)
	}
	return out, nil
}

// evalInt evaluates an integer extent expression (floor division, as the kernels).
func evalInt(e loopir.Expr, env map[string]int64) (int64, error) {
	switch x := e.(type) {
	case *loopir.IntImm:
		return x.V, nil
	case *loopir.Var:
		if v, ok := env[x.Name]; ok {
			return v, nil
		}
		return 0, fmt.Errorf("no value for %s", x.Name)
	case *loopir.Cast:
		return evalInt(x.X, env)
	case *loopir.Select:
		c, err := evalInt(x.Cond, env)
		if err != nil {
			return 0, err
		}
		if c != 0 {
			return evalInt(x.T, env)
		}
		return evalInt(x.F, env)
	case *loopir.Binary:
		a, err := evalInt(x.A, env)
		if err != nil {
			return 0, err
		}
		b, err := evalInt(x.B, env)
		if err != nil {
			return 0, err
		}
		if x.Op.IsCompare() || x.Op == loopir.And || x.Op == loopir.Or {
			r := map[loopir.BinOp]bool{loopir.EQ: a == b, loopir.NE: a != b, loopir.LT: a < b, loopir.LE: a <= b,
				loopir.GT: a > b, loopir.GE: a >= b, loopir.And: a != 0 && b != 0, loopir.Or: a != 0 || b != 0}[x.Op]
			if r {
				return 1, nil
			}
			return 0, nil
		}
		if c, ok := loopir.Bin(x.Op, loopir.Int(a), loopir.Int(b)).(*loopir.IntImm); ok {
			return c.V, nil
		}
	}
	return 0, fmt.Errorf("cannot evaluate %s", loopir.ExprString(e))
}
