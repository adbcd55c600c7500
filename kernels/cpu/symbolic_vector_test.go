package cpu

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// The generic schedule on symbolic extents: innermost loops vectorized whatever their
// run-time extent, at extents around the vector width (8 floats on AVX2) and 0 and 1.

// aroundVector binds s around the vector width, b to 1 and 2.
var aroundVector = []map[string]int64{
	{"b": 1, "s": 0}, {"b": 1, "s": 1}, {"b": 2, "s": 7}, {"b": 1, "s": 8}, {"b": 2, "s": 9}, {"b": 1, "s": 33},
}

// TestSymbolicVectorized: the attention products of a transformer with every extent
// but the head size symbolic (QKᵀ has the symbolic one innermost, moved inside the
// reduction), softmax over a symbolic axis, layer norm and a broadcast add.
func TestSymbolicVectorized(t *testing.T) {
	f := tensor.Float32
	cases := []struct {
		name string
		op   graph.Op
		args []nt.SymArg
	}{
		{"qk", graph.OpMatMul, []nt.SymArg{nt.Sym(f, "b", "2", "s", "4"), nt.Sym(f, "b", "2", "4", "s")}},
		{"av", graph.OpMatMul, []nt.SymArg{nt.Sym(f, "b", "2", "s", "s"), nt.Sym(f, "b", "2", "s", "4")}},
		{"softmax", graph.OpSoftmax, []nt.SymArg{nt.Sym(f, "b", "2", "s", "s")}},
		{"layernorm", graph.OpLayerNormalization, []nt.SymArg{nt.Sym(f, "b", "s", "9"), nt.SymC(f32(91, 9)), nt.SymC(f32(92, 9))}},
		{"add", graph.OpAdd, []nt.SymArg{nt.Sym(f, "b", "s"), nt.Sym(f, "s")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkSymAt(t, aroundVector, c.op, c.op.NewAttrs(), 1, c.args...)
		})
	}
}

// TestSymbolicScheduleVectorizes: with the output's columns symbolic, the batched
// matmul of two computed operands runs on the micro-kernel (tensorized, partial tiles at
// run time) in parallel; with a few static columns (4), fewer than a micro-kernel tile
// on AVX2 and AVX-512, the generic rule runs them innermost (inside the reduction) and
// vectorized, and its rows in parallel, as with static extents. At the generic ISA
// level (or on arm64) the narrowest tile is 4 wide: the 4 columns fill it, and the
// product runs on the micro-kernel.
func TestSymbolicScheduleVectorizes(t *testing.T) {
	f := tensor.Float32
	cases := []struct {
		x, y     nt.SymArg
		strategy string
		want     []string
	}{
		{nt.Sym(f, "b", "4", "s", "64"), nt.Sym(f, "b", "4", "64", "s"), "matmul-batched-tensorized", []string{"tensorize(", "parallel("}},
		{nt.Sym(f, "b", "4", "s", "s"), nt.Sym(f, "b", "4", "s", "4"), "generic", []string{"decompose_reduction(", "reorder(", "parallel(", "vectorize("}},
	}
	if intrin.GemmTile(target.Host(), 4, 0).NR <= 4 {
		cases[1].strategy, cases[1].want = "matmul-batched-tensorized", []string{"tensorize(", "parallel("}
	}
	for _, c := range cases {
		syms := kernels.Syms{}
		b := graph.NewBuilder("main")
		x := b.Param("x", c.x.Type)
		y := b.Param("y", c.y.Type)
		outs, err := b.Node(graph.OpMatMul, nil, 1, x, y)
		if err != nil {
			t.Fatal(err)
		}
		in := []kernels.Input{
			{T: te.Placeholder("x", f, syms.Shape(x.Type.Shape)...)},
			{T: te.Placeholder("y", f, syms.Shape(y.Type.Shape)...)},
		}
		impl, err := Strategies(kernels.Default()).Lower(outs[0].Def, in, target.Host())
		if err != nil {
			t.Fatal(err)
		}
		if impl.Strategy != c.strategy {
			t.Errorf("%v × %v: strategy %s, want %s", x.Type, y.Type, impl.Strategy, c.strategy)
		}
		tr := impl.Trace.String()
		for _, want := range c.want {
			if !strings.Contains(tr, want) {
				t.Errorf("%v × %v: trace lacks %s:\n%s", x.Type, y.Type, want, tr)
			}
		}
	}
}
