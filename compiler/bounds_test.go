package compiler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

func reluChain(t *testing.T, n int) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	y := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4)))
	var err error
	for i := 0; i < n; i++ {
		if y, err = b.Op1(graph.OpRelu, nil, y); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// nestedIfs builds depth If nodes, each in the then-branch of the one before.
func nestedIfs(t *testing.T, depth int) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4)))
	c := b.Param("c", graph.TensorType(tensor.Bool))
	var level func(b *graph.Builder, d int) *graph.Value
	level = func(b *graph.Builder, d int) *graph.Value {
		if d == depth {
			y, err := b.Op1(graph.OpRelu, nil, x)
			if err != nil {
				t.Fatal(err)
			}
			return y
		}
		then, els := b.Sub("then"), b.Sub("else")
		then.Return(level(then, d+1))
		els.Return(x)
		y, err := b.Op1(graph.OpIf, &graph.IfAttrs{ThenBranch: then.F, ElseBranch: els.F}, c)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	m, err := b.Module(level(b, 0))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGraphBeyondLimitsIsRefusedBeforeCompiling: each limit refuses a graph that
// exceeds it, naming the model and the limit, before anything is compiled (no CPU
// device is needed to get the error).
func TestGraphBeyondLimitsIsRefusedBeforeCompiling(t *testing.T) {
	wide := func(k int) *graph.Module {
		b := graph.NewBuilder("main")
		x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4)))
		in := make([]*graph.Value, k)
		for i := range in {
			in[i] = x
		}
		y, err := b.Op1(graph.OpSum, nil, in...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		name  string
		m     *graph.Module
		lim   GraphLimits
		limit string
	}{
		{"nodes", reluChain(t, 101), GraphLimits{MaxNodes: 100}, "MaxNodes"},
		{"inputs of a node", wide(65), GraphLimits{MaxNodeInputs: 64}, "MaxNodeInputs"},
		{"inputs in all", reluChain(t, 101), GraphLimits{MaxInputs: 100}, "MaxInputs"},
		{"nesting", nestedIfs(t, 5), GraphLimits{MaxDepth: 4}, "MaxDepth"},
		{"inputs of a node, default limits", wide(DefaultMaxNodeInputs + 1), GraphLimits{}, "MaxNodeInputs"},
		{"2M inputs of a node, default limits", wide(2_000_000), GraphLimits{}, "MaxNodeInputs"},
	}
	for _, c := range cases {
		_, err := Build(c.m, target.Host(), Options{Name: "big", Graph: c.lim})
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), `model "big"`) || !strings.Contains(err.Error(), c.limit) {
			t.Errorf("%s: got %v, want ErrTooLarge naming the model and %s", c.name, err, c.limit)
		}
	}
	// at the limit, the graph passes the check (and fails later for want of a device)
	_, err := Build(nestedIfs(t, 4), target.Host(), Options{Graph: GraphLimits{MaxDepth: 4}})
	if errors.Is(err, ErrTooLarge) {
		t.Errorf("nesting 4 with MaxDepth 4: %v", err)
	}
}

// TestTinyTimeoutFailsFastNamingTheStage: a compile whose timeout passes stops at the
// next check with an error naming the model and the stage, wrapping ErrTimeout and
// context.DeadlineExceeded.
func TestTinyTimeoutFailsFastNamingTheStage(t *testing.T) {
	dev := openCPU(t)
	m := reluChain(t, 50_000)
	start := time.Now()
	_, err := Build(m, target.Host(), Options{Name: "chain", CPU: dev, Timeout: 50 * time.Millisecond})
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrCompile) {
		t.Fatalf("got %v, want ErrCompile wrapping ErrTimeout and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), `model "chain": stage `) {
		t.Fatalf("error %q does not name the model and the stage", err)
	}
	t.Logf("stopped after %v: %v", took.Round(time.Millisecond), err)
	if took > 10*time.Second {
		t.Fatalf("the compile stopped %v after starting, with a 50ms timeout", took)
	}
}

// TestCancelStopsCompileInEachStage cancels the compile as a stage reports progress
// and expects the error to name that stage, promptly. In the build stage this kills
// the running C compilers.
func TestCancelStopsCompileInEachStage(t *testing.T) {
	dev := openCPU(t)
	// distinct ops, unfused: many kernels to lower and to build
	b := graph.NewBuilder("main")
	y := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(64)))
	ops := []graph.Op{graph.OpRelu, graph.OpSigmoid, graph.OpTanh, graph.OpExp, graph.OpAbs, graph.OpNeg, graph.OpSin, graph.OpCos, graph.OpErf, graph.OpSoftsign}
	var err error
	for i := 0; i < 40; i++ {
		if y, err = b.Op1(ops[i%len(ops)], nil, y); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []string{"passes", "lower", "build"} {
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		opts := Options{Name: "ops", CPU: dev, Recipe: engine.Recipe{NoFusion: true}, Jobs: 1, Context: ctx, Progress: func(p Progress) {
			if p.Stage == stage && cancelled.IsZero() && (stage == "passes" || p.Done >= 2) {
				cancelled = time.Now()
				cancel()
			}
		}}
		_, err := Build(m, target.Host(), opts)
		cancel()
		if cancelled.IsZero() {
			t.Fatalf("%s: the stage never reported progress", stage)
		}
		took := time.Since(cancelled)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stage "+stage) {
			t.Fatalf("cancelled in %s: got %v, want context.Canceled naming the stage", stage, err)
		}
		t.Logf("%s: stopped %v after the cancel: %v", stage, took.Round(time.Millisecond), err)
		if took > 10*time.Second {
			t.Fatalf("%s: the compile went on %v after the cancel", stage, took)
		}
	}
}

// TestChainsThatReadTheirInputTwiceCompileAndMatch: fused chains whose ops read their
// input more than once (x·x, HardSwish; after a convolution too) would inline into an
// expression of 2^30 nodes; the inlining stops at a bounded copy, the compile takes
// seconds and the results match the reference.
func TestChainsThatReadTheirInputTwiceCompileAndMatch(t *testing.T) {
	const n = 30
	build := func(conv bool, step func(b *graph.Builder, y *graph.Value) (*graph.Value, error)) *graph.Module {
		b := graph.NewBuilder("main")
		var y *graph.Value
		var err error
		if conv {
			x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(16), graph.Const(6), graph.Const(6)))
			w := b.Const("w", tensor.MustFromSlice(tensor.Shape{16, 16, 3, 3}, kerneltest.Random(3, 16*16*9)))
			if y, err = b.Op1(graph.OpConv, nil, x, w); err != nil {
				t.Fatal(err)
			}
		} else {
			y = b.Param("x", graph.TensorType(tensor.Float32, graph.Const(64)))
		}
		for i := 0; i < n; i++ {
			if y, err = step(b, y); err != nil {
				t.Fatal(err)
			}
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	square := func(b *graph.Builder, y *graph.Value) (*graph.Value, error) { return b.Op1(graph.OpMul, nil, y, y) }
	hardSwish := func(b *graph.Builder, y *graph.Value) (*graph.Value, error) { return b.Op1(graph.OpHardSwish, nil, y) }
	cases := []struct {
		name string
		m    *graph.Module
		in   *tensor.Tensor
	}{
		{"x·x", build(false, square), f32(5, 64)},
		{"HardSwish", build(false, hardSwish), f32(6, 64)},
		{"Conv then HardSwish", build(true, hardSwish), f32(7, 1, 16, 6, 6)},
	}
	for _, c := range cases {
		start := time.Now()
		var res *Result
		done := make(chan struct{})
		go func() {
			defer close(done) // also when checkCompiled fails the test
			res = checkCompiled(t, c.m, map[string]*tensor.Tensor{"x": c.in})
		}()
		select {
		case <-done:
			if res != nil {
				t.Logf("%s ×%d: %d kernels, compiled and checked in %v", c.name, n, res.Stats.Kernels, time.Since(start).Round(time.Millisecond))
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s ×%d: not compiled in two minutes", c.name, n)
		}
	}
}

// TestChainOf300kNodesCompiles: the whole compile of a 300k-node chain. fuse-ops cuts it
// into 1172 groups of equal structure; each distinct structure is lowered once (two
// here: the full groups and the last one), so lowering and building cost what two
// kernels cost, and the graph passes dominate.
func TestChainOf300kNodesCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("large graph: run without -short")
	}
	dev := openCPU(t)
	const n = 300_000
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(4)))
	y := x
	var err error
	for i := 0; i < n; i++ {
		if y, err = b.Op1(graph.OpAdd, nil, y, x); err != nil {
			t.Fatal(err)
		}
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var res *Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = Build(m, target.Host(), Options{Name: "chain", CPU: dev})
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a 300k-node chain did not compile in two minutes")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d-node chain compiled in %v: stages %v", n, time.Since(start).Round(time.Millisecond), res.Stats.Stages)
	if res.Stats.Kernels != 2 || res.Stats.Launches != (n+255)/256 {
		t.Fatalf("%d kernels and %d launches, want 2 and %d", res.Stats.Kernels, res.Stats.Launches, (n+255)/256)
	}
}
