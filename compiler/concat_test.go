package compiler

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// fireModule builds a SqueezeNet fire module on x of n×8×9×7: a 1×1 squeeze to 16
// channels, then a 1×1 and a 3×3 expansion to 64 channels each, concatenated along the
// channels, then a 1×1 convolution to 32 channels. extra, when given, is called with
// the builder and the 3×3 expansion's output and returns what the Concat takes in its
// place; with tail, the Concat's first input is also read by a Relu that is a second
// result.
func fireModule(t *testing.T, n int, extra func(*graph.Builder, *graph.Value) *graph.Value, tail bool) (*graph.Module, map[string]*tensor.Tensor) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(int64(n), 8, 9, 7)...))
	conv := func(in *graph.Value, cin, cout, k int, seed uint64) *graph.Value {
		y, err := b.Op1(graph.OpRelu, nil, sameConv(t, b, in, cin, cout, k, seed))
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	s := conv(x, 8, 16, 1, 1)
	e1, e3 := conv(s, 16, 64, 1, 3), conv(s, 16, 64, 3, 5)
	if extra != nil {
		e3 = extra(b, e3)
	}
	cat, err := b.Op1(graph.OpConcat, &graph.AxisAttrs{Axis: 1}, e1, e3)
	if err != nil {
		t.Fatal(err)
	}
	results := []*graph.Value{conv(cat, 128, 32, 1, 7)}
	if tail {
		r, err := b.Op1(graph.OpSigmoid, nil, e1)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	m, err := b.Module(results...)
	if err != nil {
		t.Fatal(err)
	}
	return m, map[string]*tensor.Tensor{"x": f32(11, n, 8, 9, 7)}
}

func concatLaunches(res *Result) int {
	n := 0
	for _, g := range res.Stats.Groups {
		if strings.HasPrefix(g.Anchor, "Concat") {
			n++
		}
	}
	return n
}

// TestConcatOfKernelOutputsRunsInPlace: a fire module's Concat launches nothing, in
// the blocked layout, the plain one and without fusion (the Relus write): the two
// expansions write their halves of its output, and the result matches the reference (twice, the second run on pooled
// storage).
func TestConcatOfKernelOutputsRunsInPlace(t *testing.T) {
	for _, r := range []engine.Recipe{{}, {PlainLayout: true}, {NoFusion: true}} {
		m, in := fireModule(t, 1, nil, false)
		res := checkCompiledFor(t, m, in, target.Host(), Options{Recipe: r})
		if res.Stats.ConcatsInPlace != 1 || concatLaunches(res) != 0 {
			t.Errorf("%+v: %d concats in place, %d launched; want 1 and 0", r, res.Stats.ConcatsInPlace, concatLaunches(res))
		}
	}
}

// TestConcatStaysAKernelWhereItsInputsAreNotRuns: a batch of two (each input is two
// runs of the output) and an input read by another node too keep the Concat as a
// kernel; so does an input no kernel writes (without fusion, in the plain layout, a
// Reshape view of a Transpose's output), while the other input's kernel has written its run of the
// planned output already: the Concat then copies both into a fresh output. Every case
// matches the reference.
func TestConcatStaysAKernelWhereItsInputsAreNotRuns(t *testing.T) {
	view := func(b *graph.Builder, v *graph.Value) *graph.Value {
		tr, err := b.Op1(graph.OpTranspose, &graph.TransposeAttrs{Perm: []int64{0, 1, 3, 2}}, v)
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.Op1(graph.OpReshape, nil, tr, b.Const("", i64s(1, 64, 9, 7)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, c := range map[string]struct {
		n        int
		extra    func(*graph.Builder, *graph.Value) *graph.Value
		tail     bool
		noFusion bool
	}{
		"batch of two":     {n: 2},
		"input read twice": {n: 1, tail: true},
		"input a view":     {n: 1, extra: view, noFusion: true},
	} {
		m, in := fireModule(t, c.n, c.extra, c.tail)
		res := checkCompiledFor(t, m, in, target.Host(), Options{Recipe: engine.Recipe{NoFusion: c.noFusion, PlainLayout: c.noFusion}})
		if res.Stats.ConcatsInPlace != 0 || concatLaunches(res) != 1 {
			t.Errorf("%s: %d concats in place, %d launched; want 0 and 1", name, res.Stats.ConcatsInPlace, concatLaunches(res))
		}
	}
}
