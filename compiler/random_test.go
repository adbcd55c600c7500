package compiler

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// randomModule: every random op once, each with seed (NaN: none), fed by graph values
// where the op takes an input, and a kernel after each so that host results reach
// device kernels.
func randomModule(t *testing.T, seed float32) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(3), graph.Const(4)))
	p, _ := b.Op1(graph.OpSigmoid, nil, x)
	nodes := []struct {
		op    graph.Op
		attrs any
		in    []*graph.Value
	}{
		{graph.OpRandomNormal, &graph.RandomNormalAttrs{DType: int64(tensor.Float32), Mean: 1, Scale: 2, Seed: seed, Shape: []int64{2, 5}}, nil},
		{graph.OpRandomUniform, &graph.RandomUniformAttrs{DType: int64(tensor.Float64), Low: -1, High: 1, Seed: seed, Shape: []int64{7}}, nil},
		{graph.OpRandomNormalLike, &graph.RandomNormalLikeAttrs{Scale: 1, Seed: seed}, []*graph.Value{x}},
		{graph.OpRandomUniformLike, &graph.RandomUniformLikeAttrs{DType: int64(tensor.Float16), High: 1, Seed: seed}, []*graph.Value{x}},
		{graph.OpBernoulli, &graph.BernoulliAttrs{DType: int64(tensor.Float32), Seed: seed}, []*graph.Value{p}},
		{graph.OpMultinomial, &graph.MultinomialAttrs{DType: int64(tensor.Int64), SampleSize: 6, Seed: seed}, []*graph.Value{x}},
	}
	var outs []*graph.Value
	for _, n := range nodes {
		v, err := b.Op1(n.op, n.attrs, n.in...)
		if err != nil {
			t.Fatal(err)
		}
		if v.Type.DType == tensor.Float32 {
			v, _ = b.Op1(graph.OpNeg, nil, v)
		}
		outs = append(outs, v)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSeededRandomOpsMatchTheReference: with a seed, every random op draws on the
// compiled engine exactly the numbers the reference evaluator draws, in the dtype and
// shape of its attributes or input.
func TestSeededRandomOpsMatchTheReference(t *testing.T) {
	res := checkCompiled(t, randomModule(t, 3), map[string]*tensor.Tensor{"x": f32(1, 3, 4)})
	if res.Stats.Launches == 0 {
		t.Errorf("stats %+v: the kernels after the random ops were not built", res.Stats)
	}
}

// TestUnseededRandomOpsDrawAFreshStreamPerRun: without a seed, two runs of one
// executable draw different numbers.
func TestUnseededRandomOpsDrawAFreshStreamPerRun(t *testing.T) {
	m := randomModule(t, float32(math.NaN()))
	machine, _ := checkSymbolic(t, m, target.Host(), Options{}, nil)
	in := []*tensor.Tensor{f32(1, 3, 4)}
	a, err := machine.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := machine.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 4 { // the generators' outputs (Bernoulli and Multinomial may repeat by chance)
		if slices.Equal(a[k].Float64s(), b[k].Float64s()) {
			t.Errorf("output %d: two unseeded runs drew the same %v", k, a[k].Float64s())
		}
	}
}
