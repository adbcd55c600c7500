package nodetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// SymStage is an elementwise node fused after the anchor in CheckSymbolicFused: Op over
// the previous stage's result at input At and Args at its other inputs (Args[At] is
// ignored; give SymNone there).
type SymStage struct {
	Op    graph.Op
	Attrs any
	At    int
	Args  []SymArg
	// Anchor lists further inputs that read the anchor's result (x·sigmoid(x) is
	// Sigmoid, then Mul with the anchor at the other input); give SymNone there.
	Anchor []int
}

// FusedLowerer implements a node and its elementwise epilogues in one kernel
// (kernels/cpu.Strategies(...)).
type FusedLowerer interface {
	LowerFused(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error)
}

// CheckSymbolicFused is CheckSymbolic for a fused chain: op over args, then each stage
// over the previous result, lowered once by l.LowerFused into one kernel with one dim
// per symbol and run at every binding against the reference evaluator on the chain over
// the bound shapes; then the chain over the last binding's static shapes is lowered and
// checked the same way. It returns the strategy of the symbolic kernel.
func CheckSymbolicFused(t *testing.T, l FusedLowerer, op graph.Op, attrs any, args []SymArg, stages []SymStage, binds ...map[string]int64) string {
	t.Helper()
	strategy := checkFused(t, l, op, attrs, args, stages, binds)
	if len(binds) > 0 {
		env := binds[len(binds)-1]
		static := make([]SymStage, len(stages))
		for k, st := range stages {
			static[k] = st
			static[k].Args = bindTypes(t, st.Args, env)
		}
		checkFused(t, l, op, attrs, bindTypes(t, args, env), static, binds[len(binds)-1:])
	}
	return strategy
}

func checkFused(t *testing.T, l FusedLowerer, op graph.Op, attrs any, args []SymArg, stages []SymStage, binds []map[string]int64) string {
	t.Helper()
	b := graph.NewBuilder("main")
	vals := [][]*graph.Value{symValues(t, b, "", args)}
	for k, st := range stages {
		vals = append(vals, symValues(t, b, fmt.Sprintf("s%d_", k), st.Args))
	}
	nodes := chain(t, b, op, attrs, stages, vals)
	syms := kernels.Syms{}
	in := [][]kernels.Input{placeholders(syms, vals[0])}
	var epi []kernels.Epilogue
	for k, st := range stages {
		ein := placeholders(syms, nodes[k+1].Inputs)
		from := make([]int, len(ein))
		for i := range from {
			from[i] = -1
		}
		from[st.At] = k
		for _, i := range st.Anchor {
			from[i] = 0
		}
		in = append(in, ein)
		epi = append(epi, kernels.Epilogue{Node: nodes[k+1], In: ein, From: from})
	}
	impl, err := l.LowerFused(nodes[0], in[0], epi, target.Host())
	if err != nil {
		t.Fatalf("%v with %d epilogues: %v", op, len(stages), err)
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
	last := nodes[len(nodes)-1]
	for bi, env := range binds {
		static := make([][]Arg, len(vals))
		for n, a := range append([][]SymArg{args}, stageArgs(stages)...) {
			static[n] = make([]Arg, len(a))
			for i := range a {
				static[n][i] = bindArg(t, a[i], env, uint64(1000*bi+100*n+i))
			}
		}
		want := refChain(t, op, attrs, stages, static)
		got, err := runSymbolic(dev, k, last, impl, in, static, env)
		if err != nil {
			t.Fatalf("%v at %v: %v", op, env, err)
		}
		CloseTensor(t, fmt.Sprintf("%v with %d epilogues at %v (strategy %s)", op, len(stages), env, impl.Strategy), got[0], want)
	}
	return impl.Strategy
}

// chain builds op over vals[0], then stage k over vals[k+1] with the previous result at
// its input At; it returns the nodes.
func chain(t testing.TB, b *graph.Builder, op graph.Op, attrs any, stages []SymStage, vals [][]*graph.Value) []*graph.Node {
	t.Helper()
	outs, err := b.Node(op, attrs, 1, vals[0]...)
	if err != nil {
		t.Fatal(err)
	}
	nodes := []*graph.Node{outs[0].Def}
	for k, st := range stages {
		v := append([]*graph.Value{}, vals[k+1]...)
		v[st.At] = outs[0]
		for _, i := range st.Anchor {
			v[i] = nodes[0].Outputs[0]
		}
		if outs, err = b.Node(st.Op, st.Attrs, 1, v...); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, outs[0].Def)
	}
	return nodes
}

// refChain evaluates the chain over static arguments (per node) with the reference
// evaluator.
func refChain(t testing.TB, op graph.Op, attrs any, stages []SymStage, args [][]Arg) *tensor.Tensor {
	t.Helper()
	b := graph.NewBuilder("main")
	inputs := map[string]ref.Value{}
	vals := make([][]*graph.Value, len(args))
	for n, a := range args {
		vals[n] = make([]*graph.Value, len(a))
		for i, x := range a {
			name := fmt.Sprintf("n%d_%d", n, i)
			switch {
			case x.T == nil:
			case x.Const:
				vals[n][i] = b.Const(name, x.T)
			default:
				shape := make([]int64, len(x.T.Shape))
				for k, d := range x.T.Shape {
					shape[k] = int64(d)
				}
				vals[n][i] = b.Param(name, graph.TensorType(x.T.DType, graph.StaticShape(shape...)...))
				inputs[name] = x.T
			}
		}
	}
	nodes := chain(t, b, op, attrs, stages, vals)
	m, err := b.Module(nodes[len(nodes)-1].Outputs[0])
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func stageArgs(stages []SymStage) [][]SymArg {
	out := make([][]SymArg, len(stages))
	for k, st := range stages {
		out[k] = st.Args
	}
	return out
}

// bindTypes is args with every run-time input's extents evaluated at env.
func bindTypes(t testing.TB, args []SymArg, env map[string]int64) []SymArg {
	t.Helper()
	out := make([]SymArg, len(args))
	for i, a := range args {
		out[i] = a
		if a.Const != nil || a.Type.DType == 0 || a.Type.Known != nil {
			continue
		}
		shape, ok := nodeShape(a.Type, env)
		if !ok {
			t.Fatalf("%v at %v", a.Type, env)
		}
		dims := make([]int64, len(shape))
		for k, d := range shape {
			dims[k] = int64(d)
		}
		out[i].Type = graph.TensorType(a.Type.DType, graph.StaticShape(dims...)...)
	}
	return out
}
