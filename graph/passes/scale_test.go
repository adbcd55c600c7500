package passes_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/tensor"
)

// The graphs here are large enough that a walk quadratic in nodes (or in one node's
// inputs) takes minutes, while the passes take about a second: each test fails when
// its work does not finish within hangLimit, and logs the time it took.

const hangLimit = 60 * time.Second

// large skips a test of large graphs under -short.
func large(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("large graphs: run without -short")
	}
}

// finishes runs work and fails the test when it has not returned within hangLimit.
func finishes(t *testing.T, what string, work func() error) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- work() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
	case <-time.After(hangLimit):
		t.Fatalf("%s did not finish in %v", what, hangLimit)
	}
}

func f32(dims ...int64) graph.Type {
	shape := make([]graph.Dim, len(dims))
	for i, d := range dims {
		shape[i] = graph.Const(d)
	}
	return graph.TensorType(tensor.Float32, shape...)
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func countOps(m *graph.Module) map[graph.Op]int {
	c := map[graph.Op]int{}
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			c[n.Op]++
		}
	})
	return c
}

// wideSums builds y = Sum(x, x, ... ×k) + Sum(x, x, ... ×k).
func wideSums(t *testing.T, k int) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(4))
	in := make([]*graph.Value, k)
	for i := range in {
		in[i] = x
	}
	op1 := must[*graph.Value](t)
	s1 := op1(b.Op1(graph.OpSum, nil, in...))
	s2 := op1(b.Op1(graph.OpSum, nil, in...))
	y := op1(b.Op1(graph.OpAdd, nil, s1, s2))
	return must[*graph.Module](t)(b.Module(y))
}

func TestCSEMergesSumsOfTwoMillionInputs(t *testing.T) {
	large(t)
	m := wideSums(t, 2_000_000)
	ctx := &passes.Context{}
	finishes(t, "cse + dce on two 2M-input Sums", func() error {
		return passes.Pipeline{pass(t, "cse"), pass(t, "dce")}.Run(ctx, m)
	})
	if got := countOps(m)[graph.OpSum]; got != 1 {
		t.Fatalf("%d Sum nodes after cse, want 1", got)
	}
}

func TestO3PipelineOnTwoMillionInputSum(t *testing.T) {
	large(t)
	m := wideSums(t, 2_000_000)
	finishes(t, "O3 on two 2M-input Sums", func() error {
		return passes.Level(3).Run(&passes.Context{Eval: evalNode}, m)
	})
	if len(m.Main.Nodes) != 1 || m.Main.Nodes[0].Op != graph.OpFused || countOps(m)[graph.OpSum] != 1 {
		t.Fatalf("after O3:\n%s\nwant one fused group holding one Sum", graph.PrintFunc(m.Main)[:200])
	}
}

// chain builds x → op → op → ... (n nodes), each Add also reading x.
func chain(t *testing.T, n int, op graph.Op) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(4))
	y := x
	op1 := must[*graph.Value](t)
	for i := 0; i < n; i++ {
		if op == graph.OpAdd {
			y = op1(b.Op1(op, nil, y, x))
		} else {
			y = op1(b.Op1(op, nil, y))
		}
	}
	return must[*graph.Module](t)(b.Module(y))
}

func TestO3PipelineOnChainOf300kNodes(t *testing.T) {
	large(t)
	for _, op := range []graph.Op{graph.OpRelu, graph.OpAdd} {
		m := chain(t, 300_000, op)
		finishes(t, "O3 on a chain of 300k "+op.String(), func() error {
			return passes.Level(3).Run(&passes.Context{Eval: evalNode}, m)
		})
		// fuse-ops cuts the chain into groups of at most 256 members
		if got, want := len(m.Main.Nodes), (300_000+255)/256; got != want {
			t.Fatalf("%v chain: %d nodes after O3, want %d fused groups", op, got, want)
		}
	}
}

func TestSimplifyBypassesChainOf300kIdentities(t *testing.T) {
	large(t)
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(4))
	op1 := must[*graph.Value](t)
	y := x
	for i := 0; i < 300_000; i++ {
		y = op1(b.Op1(graph.OpIdentity, nil, y))
	}
	y = op1(b.Op1(graph.OpRelu, nil, y))
	m := must[*graph.Module](t)(b.Module(y))
	finishes(t, "simplify + dce on 300k Identity nodes", func() error {
		return passes.Pipeline{pass(t, "simplify"), pass(t, "dce")}.Run(&passes.Context{}, m)
	})
	if len(m.Main.Nodes) != 1 || m.Main.Nodes[0].Inputs[0] != x {
		t.Fatalf("after simplify: %d nodes, want Relu(x) alone", len(m.Main.Nodes))
	}
}

// deadChain builds a result op(x, ...) beside a chain of n Relu nodes nobody reads.
func deadChain(t *testing.T, n int, op graph.Op) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(4))
	op1 := must[*graph.Value](t)
	y := x
	for i := 0; i < n; i++ {
		y = op1(b.Op1(graph.OpRelu, nil, y))
	}
	in := []*graph.Value{x}
	if op == graph.OpMul {
		in = append(in, x)
	}
	r := op1(b.Op1(op, nil, in...))
	return must[*graph.Module](t)(b.Module(r))
}

func TestDCERemovesDeadChainOf300kNodes(t *testing.T) {
	large(t)
	m := deadChain(t, 300_000, graph.OpSigmoid)
	finishes(t, "dce on a dead chain of 300k nodes", func() error {
		return passes.DCE(&passes.Context{}, m)
	})
	if len(m.Main.Nodes) != 1 {
		t.Fatalf("%d nodes after dce, want the Sigmoid alone", len(m.Main.Nodes))
	}
}

// TestRecognizeSkipsDeadChainOf300kNodes: recognize's liveness (dce's view: the Relu
// chain is dead) costs one walk; the Mul makes the module worth matching.
func TestRecognizeSkipsDeadChainOf300kNodes(t *testing.T) {
	large(t)
	m := deadChain(t, 300_000, graph.OpMul)
	finishes(t, "recognize on a dead chain of 300k nodes", func() error {
		return passes.Recognize(&passes.Context{}, m)
	})
}

// TestRecognizeManyGelusOfOneValue: 50k erf-form GELUs of the same x. Each rewrite
// forgets pattern nodes that read x, whose reader list holds 100k entries.
func TestRecognizeManyGelusOfOneValue(t *testing.T) {
	large(t)
	const k = 50_000
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(4))
	op1 := must[*graph.Value](t)
	sqrt2 := b.Const("sqrt2", tensor.Scalar(float32(1.4142135)))
	one := b.Const("one", tensor.Scalar(float32(1)))
	half := b.Const("half", tensor.Scalar(float32(0.5)))
	outs := make([]*graph.Value, k)
	for i := range outs {
		d := op1(b.Op1(graph.OpDiv, nil, x, sqrt2))
		e := op1(b.Op1(graph.OpErf, nil, d))
		a := op1(b.Op1(graph.OpAdd, nil, e, one))
		p := op1(b.Op1(graph.OpMul, nil, x, a))
		outs[i] = op1(b.Op1(graph.OpMul, nil, p, half))
	}
	m := must[*graph.Module](t)(b.Module(outs...))
	finishes(t, "recognize on 50k GELUs of one value", func() error {
		return passes.Pipeline{pass(t, "recognize"), pass(t, "dce")}.Run(&passes.Context{}, m)
	})
	if got := countOps(m); got[graph.OpGelu] != k || len(m.Main.Nodes) != k {
		t.Fatalf("after recognize: %d Gelu of %d nodes, want %d of %d", got[graph.OpGelu], len(m.Main.Nodes), k, k)
	}
}

// TestFuseWithArgumentLimitOnChainOf300kNodes: with MaxArgs set, every fusion
// attempt counts the group's arguments from its own members.
func TestFuseWithArgumentLimitOnChainOf300kNodes(t *testing.T) {
	large(t)
	m := chain(t, 300_000, graph.OpAdd)
	ctx := &passes.Context{Fuse: passes.FuseLimits{MaxArgs: 8}}
	finishes(t, "fuse-ops (MaxArgs 8) on a chain of 300k Add", func() error {
		return passes.FuseOps(ctx, m)
	})
	if got, want := len(m.Main.Nodes), (300_000+255)/256; got != want {
		t.Fatalf("%d nodes after fuse-ops, want %d groups", got, want)
	}
}

// TestAlterLayoutOnReaderLattice: a convolution feeds 18 levels of 6 Sums, each reading
// every Sum of the level before; whether blocking the conv helps is asked once per
// value, not once per path (6^17 of them).
func TestAlterLayoutOnReaderLattice(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(1, 8, 4, 4))
	w := b.Const("w", tensor.FromFloat64s(tensor.Float32, tensor.Shape{8, 8, 1, 1}, make([]float64, 64)))
	op1 := must[*graph.Value](t)
	level := []*graph.Value{op1(b.Op1(graph.OpConv, nil, x, w))}
	for d := 0; d < 18; d++ {
		var next []*graph.Value
		for i := 0; i < 6; i++ {
			next = append(next, op1(b.Op1(graph.OpSum, nil, level...)))
		}
		level = next
	}
	m := must[*graph.Module](t)(b.Module(level...))
	ctx := &passes.Context{Layout: &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			return []int64{-1, -1}, 4, n.Op == graph.OpConv
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			return slices.Max(in), n.Op == graph.OpSum
		},
	}}
	finishes(t, "alter-layout on a lattice of readers", func() error {
		return passes.AlterLayout(ctx, m)
	})
	if got := countOps(m)[graph.OpLayoutTransform]; got != 0 {
		t.Fatalf("%d layout transforms, want none (no reader needs a block)", got)
	}
}

// TestFoldLeavesExpensiveProductToAKernel: a 2048×2048 product of constants (8.6
// billion multiply-adds on the host) is not folded; a small one is.
func TestFoldLeavesExpensiveProductToAKernel(t *testing.T) {
	for _, c := range []struct {
		n    int
		fold bool
	}{{2048, false}, {16, true}} {
		b := graph.NewBuilder("main")
		sq := tensor.Shape{c.n, c.n}
		ones := make([]float64, c.n*c.n)
		for i := range ones {
			ones[i] = 1
		}
		a := b.Const("a", tensor.FromFloat64s(tensor.Float32, sq, ones))
		w := b.Const("w", tensor.FromFloat64s(tensor.Float32, sq, ones))
		y := must[*graph.Value](t)(b.Op1(graph.OpMatMul, nil, a, w))
		m := must[*graph.Module](t)(b.Module(y))
		finishes(t, "fold-constants on a constant MatMul", func() error {
			return passes.FoldConstants(&passes.Context{Eval: evalNode}, m)
		})
		if folded := len(m.Main.Nodes) == 0; folded != c.fold {
			t.Fatalf("%d×%d MatMul of constants: folded %v, want %v", c.n, c.n, folded, c.fold)
		}
	}
}

func TestCancelledContextStopsPipelineNamingThePass(t *testing.T) {
	m := chain(t, 1000, graph.OpRelu)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := passes.Level(3).Run(&passes.Context{Eval: evalNode, Ctx: cctx}, m)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "bind-dims") {
		t.Fatalf("got %v, want context.Canceled naming the first pass", err)
	}
}

func TestCancelledContextStopsFoldingInsideThePass(t *testing.T) {
	m := chain(t, 1000, graph.OpRelu)
	cctx, cancel := context.WithCancel(context.Background())
	calls := 0
	eval := func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		calls++
		cancel() // the first evaluation cancels: the next node must not be evaluated
		return evalNode(n, in)
	}
	b := graph.NewBuilder("main")
	c := b.Const("c", tensor.FromFloat64s(tensor.Float32, tensor.Shape{4}, []float64{1, -2, 3, -4}))
	op1 := must[*graph.Value](t)
	y := c
	for i := 0; i < 100; i++ {
		y = op1(b.Op1(graph.OpRelu, nil, y))
	}
	m = must[*graph.Module](t)(b.Module(y))
	err := passes.FoldConstants(&passes.Context{Eval: eval, Ctx: cctx}, m)
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("got %v after %d evaluations, want context.Canceled after 1", err, calls)
	}
}

// nestedGrowingLoops nests depth Loops, each body doubling its carried value with a
// Concat after running the next Loop: every Loop's body changes its carried type.
func nestedGrowingLoops(t *testing.T, depth int) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", f32(1))
	trip := b.Const("trip", tensor.Scalar(int64(2)))
	yes := b.Const("yes", tensor.Scalar(true))
	op1 := must[*graph.Value](t)
	var level func(b *graph.Builder, h *graph.Value, d int) *graph.Value
	level = func(b *graph.Builder, h *graph.Value, d int) *graph.Value {
		if d == depth {
			return h
		}
		body := b.Sub("body")
		body.Param("i", graph.TensorType(tensor.Int64))
		c := body.Param("c", graph.TensorType(tensor.Bool))
		hp := body.Param("h", graph.TensorType(tensor.Float32, graph.Sym(fmt.Sprintf("n%d", d))))
		inner := level(body, hp, d+1)
		grown := op1(body.Op1(graph.OpConcat, &graph.AxisAttrs{Axis: 0}, inner, inner))
		la := graph.OpLoop.NewAttrs().(*graph.LoopAttrs)
		la.Body = body.Return(c, grown)
		outs, err := b.Node(graph.OpLoop, la, 1, trip, yes, h)
		if err != nil {
			t.Fatal(err)
		}
		return outs[0]
	}
	return must[*graph.Module](t)(b.Module(level(b, x, 0)))
}

// TestBindDimsOnDeeplyNestedLoops: 40 nested Loops whose bodies all change their
// carried types. Retrying every Loop afresh inside each round of its enclosing Loop
// doubled the work per level (2^40 rounds); remembering each Loop's choice makes it
// polynomial.
func TestBindDimsOnDeeplyNestedLoops(t *testing.T) {
	m := nestedGrowingLoops(t, 40)
	finishes(t, "bind-dims on 40 nested Loops", func() error {
		return passes.BindDims(&passes.Context{}, m)
	})
}

// TestRecognizeOnChainOf300kProducts: y = y·c 300k times. Every Mul asks whether it
// ends a GELU, and flattening the product below it walked the whole chain.
func TestRecognizeOnChainOf300kProducts(t *testing.T) {
	large(t)
	b := graph.NewBuilder("main")
	y := b.Param("x", f32(4))
	c := b.Const("c", tensor.Scalar(float32(0.5)))
	op1 := must[*graph.Value](t)
	for i := 0; i < 300_000; i++ {
		y = op1(b.Op1(graph.OpMul, nil, y, c))
	}
	m := must[*graph.Module](t)(b.Module(y))
	finishes(t, "recognize on a chain of 300k Mul", func() error {
		return passes.Recognize(&passes.Context{}, m)
	})
	if got := countOps(m)[graph.OpMul]; got != 300_000 {
		t.Fatalf("%d Mul nodes after recognize, want all 300000", got)
	}
}

// constChain builds Relu applied n times to a constant of k elements.
func constChain(t *testing.T, n, k int) *graph.Module {
	b := graph.NewBuilder("main")
	y := b.Const("c", tensor.FromFloat64s(tensor.Float32, tensor.Shape{k}, make([]float64, k)))
	op1 := must[*graph.Value](t)
	for i := 0; i < n; i++ {
		y = op1(b.Op1(graph.OpRelu, nil, y))
	}
	return must[*graph.Module](t)(b.Module(y))
}

// TestFoldStopsAtItsBudgets: every folded result stays in memory until dce, so a chain
// of elementwise ops on a 1M-element constant folds only until it has created 16M
// elements (the floor of four times the module's constants), and a run spends at most
// FoldBudget operations; the rest stays nodes.
func TestFoldStopsAtItsBudgets(t *testing.T) {
	m := constChain(t, 100, 1<<20)
	if err := passes.FoldConstants(&passes.Context{Eval: evalNode}, m); err != nil {
		t.Fatal(err)
	}
	if got := len(m.Main.Nodes); got != 100-16 {
		t.Fatalf("%d of 100 Relu nodes left, want 84 (16 folded)", got)
	}
	m = constChain(t, 100, 1<<10)
	if err := passes.FoldConstants(&passes.Context{Eval: evalNode, FoldBudget: 10 << 11}, m); err != nil {
		t.Fatal(err)
	}
	if got := len(m.Main.Nodes); got != 90 {
		t.Fatalf("%d of 100 Relu nodes left with a budget of 10 folds, want 90", got)
	}
}
