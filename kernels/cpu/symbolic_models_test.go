package cpu

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/tensor"
)

// The ops that the zoo's dynamic-shape models (bert_tiny, gpt2_tiny, lstm_tagger,
// gru_speech) keep after the graph passes with no dim bound, over symbolic extents as
// they appear there.

// indices is a run-time int64 input of the given dims whose values lie in [-n, n) for
// the extent n (a dim over the symbols) they index.
func indices(n string, dims ...string) nt.SymArg {
	a := nt.Sym(tensor.Int64, dims...)
	a.Data = func(env map[string]int64) *tensor.Tensor {
		d, _ := graph.ParseDim(n)
		ext, _ := d.Eval(env)
		shape := make(tensor.Shape, len(dims))
		for k, s := range dims {
			v, _ := graph.ParseDim(s)
			e, _ := v.Eval(env)
			shape[k] = int(e)
		}
		v := make([]int64, shape.NumElements())
		for k := range v {
			v[k] = int64(k*7+3)%(2*ext) - ext
		}
		return tensor.MustFromSlice(shape, v)
	}
	return a
}

func TestSymbolicGather(t *testing.T) {
	f := tensor.Float32
	axis := func(v int64) *graph.GatherAttrs {
		a := graph.OpGather.NewAttrs().(*graph.GatherAttrs)
		a.Axis = v
		return a
	}
	// embedding lookups: a constant table, run-time ids of a symbolic shape
	table := f32(90, 20, 6)
	checkSym(t, graph.OpGather, axis(0), 1, nt.SymC(table), indices("20", "b", "s"))
	checkSym(t, graph.OpGather, axis(0), 1, nt.SymC(table), indices("20", "1", "s"))
	// the first token of every sequence (a constant index on a symbolic axis); and a
	// gather along a symbolic axis (the ids then need s > 0)
	checkSymAt(t, nonEmpty, graph.OpGather, axis(1), 1, nt.Sym(f, "b", "s", "6"), nt.SymC(tensor.Scalar[int64](0)))
	checkSymAt(t, nonEmpty, graph.OpGather, axis(1), 1, nt.Sym(f, "b", "s", "6"), nt.SymC(tensor.Scalar[int64](-1)))
	checkSymAt(t, nonEmpty, graph.OpGather, axis(1), 1, nt.Sym(f, "b", "s", "3"), indices("s", "2", "b"))
}

func TestSymbolicGenerators(t *testing.T) {
	// positions 0..seq-1
	checkSym(t, graph.OpRange, nil, 1, nt.SymC(tensor.Scalar[int64](0)), nt.ScalarOf("s"), nt.SymC(tensor.Scalar[int64](1)))
	checkSym(t, graph.OpRange, nil, 1, nt.SymC(tensor.Scalar[int64](2)), nt.ScalarOf("s+2"), nt.SymC(tensor.Scalar[int64](1)))
	// LSTM's zero initial states
	cs := graph.OpConstantOfShape.NewAttrs().(*graph.ConstantOfShapeAttrs)
	checkSym(t, graph.OpConstantOfShape, cs, 1, nt.ShapeOf("4", "b", "3"))
	cs.Value = tensor.MustFromSlice(tensor.Shape{1}, []int64{-7})
	checkSym(t, graph.OpConstantOfShape, cs, 1, nt.ShapeOf("b", "s"))
}

func TestSymbolicSliceWhere(t *testing.T) {
	f := tensor.Float32
	// gpt2's causal mask: a constant [1, 1, 16, 16] cut to [.., :s, :s] by ends known
	// over the symbols; s = 17 is clamped to 16
	mask := make([]float64, 16*16)
	for k := range mask {
		if k%16 <= k/16 {
			mask[k] = 1
		}
	}
	bias := tensor.FromFloat64s(tensor.Bool, tensor.Shape{1, 1, 16, 16}, mask)
	checkSym(t, graph.OpSlice, nil, 1, nt.SymC(bias), nt.SymC(vec(0)), nt.ShapeOf("s"), nt.SymC(vec(2)), nt.SymC(vec(1)))
	checkSym(t, graph.OpSlice, nil, 1, nt.Sym(tensor.Bool, "1", "1", "s", "16"), nt.SymC(vec(0)), nt.ShapeOf("s"), nt.SymC(vec(3)), nt.SymC(vec(1)))
	// constant bounds on symbolic axes: negative, past the end, reversed, strided
	x := nt.Sym(f, "b", "s", "5")
	checkSym(t, graph.OpSlice, nil, 1, x, nt.SymC(vec(1, -4)), nt.SymC(vec(-1, 100)), nt.SymC(vec(1, 0)))
	checkSym(t, graph.OpSlice, nil, 1, x, nt.SymC(vec(-1)), nt.SymC(vec(-1000)), nt.SymC(vec(1)), nt.SymC(vec(-2)))
	checkSym(t, graph.OpSlice, nil, 1, x, nt.SymC(vec(0, 1)), nt.SymC(vec(9, 5)), nt.SymC(vec(0, 2)), nt.SymC(vec(3, 2)))
	// the mask applied
	checkSym(t, graph.OpWhere, nil, 1, nt.Sym(tensor.Bool, "1", "1", "s", "s"), nt.Sym(f, "b", "4", "s", "s"), nt.SymC(tensor.Scalar[float32](-1e4)))
}

func TestSymbolicElementwise(t *testing.T) {
	f := tensor.Float32
	// bert's attention mask: Cast, Sub, Mul over [b, 1, 1, s]
	cast := graph.OpCast.NewAttrs().(*graph.CastAttrs)
	cast.To = int64(tensor.Float32)
	checkSym(t, graph.OpCast, cast, 1, nt.Sym(tensor.Int64, "b", "1", "1", "s"))
	checkSym(t, graph.OpSub, nil, 1, nt.SymC(tensor.Scalar[float32](1)), nt.Sym(f, "b", "1", "1", "s"))
	checkSym(t, graph.OpAdd, nil, 1, nt.Sym(f, "b", "s", "6"), nt.Sym(f, "1", "s", "6"))
	checkSym(t, graph.OpGelu, nil, 1, nt.Sym(f, "b", "s", "6"))
}

func TestSymbolicJoin(t *testing.T) {
	f := tensor.Float32
	split := graph.OpSplit.NewAttrs().(*graph.SplitAttrs)
	split.Axis = 2
	checkSym(t, graph.OpSplit, split, 3, nt.Sym(f, "b", "s", "9"), nt.SymC(vec(3, 3, 3)))
	cat := graph.OpConcat.NewAttrs().(*graph.AxisAttrs)
	checkSym(t, graph.OpConcat, cat, 1, nt.Sym(f, "1", "b", "4"), nt.Sym(f, "1", "b", "4"))
	cat.Axis = 1
	checkSym(t, graph.OpConcat, cat, 1, nt.Sym(f, "b", "s", "2"), nt.Sym(f, "b", "1", "2"), nt.Sym(f, "b", "s", "2"))
	tr := graph.OpTranspose.NewAttrs().(*graph.TransposeAttrs)
	tr.Perm = []int64{2, 0, 1}
	checkSym(t, graph.OpTranspose, tr, 1, nt.Sym(f, "b", "3", "s"))
}

func TestSymbolicNormalize(t *testing.T) {
	f := tensor.Float32
	checkSym(t, graph.OpLogSoftmax, graph.OpLogSoftmax.NewAttrs(), 1, nt.Sym(f, "b", "s", "5"))
	checkSym(t, graph.OpSoftmax, graph.OpSoftmax.NewAttrs(), 1, nt.Sym(f, "b", "2", "s", "s"))
	checkSym(t, graph.OpLayerNormalization, graph.OpLayerNormalization.NewAttrs(), 1, nt.Sym(f, "b", "s", "8"), nt.SymC(f32(91, 8)), nt.SymC(f32(92, 8)))
}

func TestSymbolicMatMul(t *testing.T) {
	f := tensor.Float32
	checkSym(t, graph.OpMatMul, nil, 1, nt.Sym(f, "b", "2", "s", "4"), nt.Sym(f, "b", "2", "4", "s"))
	checkSym(t, graph.OpMatMul, nil, 1, nt.Sym(f, "b", "s", "8"), nt.SymC(f32(93, 8, 5)))
	checkSym(t, graph.OpGemm, graph.OpGemm.NewAttrs(), 1, nt.Sym(f, "b", "8"), nt.SymC(f32(94, 8, 5)), nt.SymC(f32(95, 5)))
}

func TestSymbolicConv(t *testing.T) {
	f := tensor.Float32
	// gru_speech's 1-D convolution over a symbolic time axis; a strided, dilated one
	// with uneven pads; a 2-D one with one symbolic axis, grouped
	conv := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.Pads, conv.KernelShape = []int64{1, 1}, []int64{3}
	checkSym(t, graph.OpConv, conv, 1, nt.Sym(f, "b", "4", "s"), nt.SymC(f32(96, 6, 4, 3)), nt.SymC(f32(97, 6)))
	conv = graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.Pads, conv.Strides, conv.Dilations = []int64{2, 0}, []int64{2}, []int64{2}
	checkSym(t, graph.OpConv, conv, 1, nt.Sym(f, "b", "3", "s"), nt.SymC(f32(98, 5, 3, 2)))
	conv = graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	conv.AutoPad, conv.Group = "VALID", 2
	checkSym(t, graph.OpConv, conv, 1, nt.Sym(f, "1", "4", "s", "5"), nt.SymC(f32(99, 4, 2, 2, 3)))
}
