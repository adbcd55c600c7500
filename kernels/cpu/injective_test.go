package cpu

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Data-movement ops through the generic strategy, against the reference evaluator.

func i64s(shape []int, v ...int64) *tensor.Tensor {
	return tensor.MustFromSlice(tensor.Shape(shape), v)
}

func vec(v ...int64) *tensor.Tensor { return i64s([]int{len(v)}, v...) }

// iota64 is an int64 tensor holding 0, 1, 2, ... (exact comparisons).
func iota64(shape ...int) *tensor.Tensor {
	v := make([]int64, tensor.Shape(shape).NumElements())
	for k := range v {
		v[k] = int64(k)
	}
	return tensor.MustFromSlice(tensor.Shape(shape), v)
}

func TestInjectiveTranspose(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(11, 2, 3, 5, 7)
	for _, perm := range [][]int64{nil, {0, 2, 1, 3}, {-1, 0, -2, 1}, {3, 2, 1, 0}} {
		a := graph.OpTranspose.NewAttrs().(*graph.TransposeAttrs)
		a.Perm = perm
		nt.CheckNode(t, l, graph.OpTranspose, a, 1, nt.In(x))
	}
	a := graph.OpTranspose.NewAttrs().(*graph.TransposeAttrs)
	a.Perm = []int64{1, 0}
	nt.CheckNode(t, l, graph.OpTranspose, a, 1, nt.In(iota64(6, 9)))
}

func TestInjectiveGather(t *testing.T) {
	l := Strategies(kernels.Default())
	table := f32(12, 50, 13)
	ids := i64s([]int{2, 3}, 0, 49, -1, 7, -50, 13)
	axis := func(v int64) *graph.GatherAttrs {
		a := graph.OpGather.NewAttrs().(*graph.GatherAttrs)
		a.Axis = v
		return a
	}
	// embedding lookup: run-time indices with negative values
	nt.CheckNode(t, l, graph.OpGather, axis(0), 1, nt.In(table), nt.In(ids))
	// int32 indices along the last axis, negative axis
	ids32 := tensor.MustFromSlice(tensor.Shape{4}, []int32{-13, 12, 0, -2})
	nt.CheckNode(t, l, graph.OpGather, axis(-1), 1, nt.In(table), nt.In(ids32))
	// a middle axis of a rank-3 tensor, constant indices
	x := f32(13, 3, 7, 5)
	nt.CheckNode(t, l, graph.OpGather, axis(1), 1, nt.In(x), nt.C(i64s([]int{2, 2}, 6, -7, 3, -1)))
	// scalar indices reduce the rank: run time and constant
	nt.CheckNode(t, l, graph.OpGather, axis(-2), 1, nt.In(x), nt.In(tensor.Scalar[int64](-3)))
	nt.CheckNode(t, l, graph.OpGather, axis(0), 1, nt.In(x), nt.C(tensor.Scalar[int64](-1)))
	// integer data (a shape gather)
	nt.CheckNode(t, l, graph.OpGather, axis(0), 1, nt.In(vec(2, 128, 12, 64)), nt.C(vec(0, -1)))
}

func TestInjectiveGatherElements(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(14, 3, 7, 5)
	ind := i64s([]int{3, 2, 5},
		0, 6, -1, 3, 2, -7, 1, 1, 4, 5,
		6, 6, 0, -3, 2, 1, 2, 3, 4, 5,
		-1, -2, -3, -4, -5, 0, 0, 0, 0, 0)
	a := graph.OpGatherElements.NewAttrs().(*graph.GatherAttrs)
	a.Axis = -2
	nt.CheckNode(t, l, graph.OpGatherElements, a, 1, nt.In(x), nt.In(ind))
}

func TestInjectiveSlice(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(15, 5, 7, 9)
	cases := []struct{ starts, ends, axes, steps *tensor.Tensor }{
		{vec(1, 2), vec(4, -1), nil, nil},
		{vec(-100, 3), vec(100, -100), vec(-1, 1), vec(2, -1)},
		{vec(-1), vec(-1000), vec(2), vec(-3)},
		{vec(0, 0, 8), vec(5, 7, 0), vec(0, 1, 2), vec(3, 1, -2)},
		{vec(3), vec(2), vec(0), nil}, // empty
	}
	for _, c := range cases {
		args := []nt.Arg{nt.In(x), nt.C(c.starts), nt.C(c.ends)}
		if c.axes != nil {
			args = append(args, nt.C(c.axes))
		} else if c.steps != nil {
			args = append(args, nt.None)
		}
		if c.steps != nil {
			args = append(args, nt.C(c.steps))
		}
		nt.CheckNode(t, l, graph.OpSlice, nil, 1, args...)
	}
}

func TestInjectiveConcat(t *testing.T) {
	l := Strategies(kernels.Default())
	a := graph.OpConcat.NewAttrs().(*graph.AxisAttrs)
	a.Axis = -2
	nt.CheckNode(t, l, graph.OpConcat, a, 1, nt.In(f32(16, 2, 3, 5)), nt.In(f32(17, 2, 1, 5)), nt.In(f32(18, 2, 7, 5)))
	a.Axis = 0
	nt.CheckNode(t, l, graph.OpConcat, a, 1, nt.In(vec(2, 3)), nt.C(vec(4)), nt.In(vec(5, 6, 7)))
	nt.CheckNode(t, l, graph.OpConcat, a, 1, nt.In(f32(19, 3, 6)))
	a.Axis = 1 // an empty part
	nt.CheckNode(t, l, graph.OpConcat, a, 1, nt.In(f32(20, 3, 6)), nt.In(f32(21, 3, 0)), nt.In(f32(22, 3, 2)))
}

func TestInjectiveSplit(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(23, 3, 10, 7)
	a := graph.OpSplit.NewAttrs().(*graph.SplitAttrs)
	a.Axis = -2
	nt.CheckNode(t, l, graph.OpSplit, a, 3, nt.In(x), nt.C(vec(2, 5, 3)))
	nt.CheckNode(t, l, graph.OpSplit, a, 2, nt.In(x))
	nt.CheckNode(t, l, graph.OpSplit, a, 3, nt.In(x), nt.C(vec(4, 0, 6)))
	// 7 in parts of 3, 3, 1
	a.Axis, a.NumOutputs = 2, 3
	nt.CheckNode(t, l, graph.OpSplit, a, 3, nt.In(x))
}

func TestInjectiveExpand(t *testing.T) {
	l := Strategies(kernels.Default())
	nt.CheckNode(t, l, graph.OpExpand, nil, 1, nt.In(f32(24, 3, 1, 5)), nt.C(vec(2, 1, 6, 1)))
	nt.CheckNode(t, l, graph.OpExpand, nil, 1, nt.In(f32(25, 1)), nt.C(vec(4, 3)))
	nt.CheckNode(t, l, graph.OpExpand, nil, 1, nt.In(vec(1, 2, 3)), nt.C(vec(5, 1)))
}

func TestInjectiveReshapeFamily(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(26, 2, 3, 35)
	for _, shape := range []*tensor.Tensor{vec(0, -1, 5), vec(6, 35), vec(-1), vec(2, 1, 3, 5, 7), vec(14, 15), vec(7, 1, 30)} {
		nt.CheckNode(t, l, graph.OpReshape, nil, 1, nt.In(x), nt.C(shape))
	}
	fl := graph.OpFlatten.NewAttrs().(*graph.FlattenAttrs)
	for _, axis := range []int64{0, 1, -1, 3} {
		fl.Axis = axis
		nt.CheckNode(t, l, graph.OpFlatten, fl, 1, nt.In(x))
	}
	y := f32(27, 1, 3, 1, 5, 1)
	nt.CheckNode(t, l, graph.OpSqueeze, nil, 1, nt.In(y))
	nt.CheckNode(t, l, graph.OpSqueeze, nil, 1, nt.In(y), nt.C(vec(-1, 0)))
	nt.CheckNode(t, l, graph.OpUnsqueeze, nil, 1, nt.In(x), nt.C(vec(-1, 0, 2)))
	nt.CheckNode(t, l, graph.OpUnsqueeze, nil, 1, nt.In(iota64(3, 4)), nt.C(vec(1)))
}

func TestInjectivePad(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(28, 2, 3, 5, 7)
	mode := func(m string) *graph.PadAttrs {
		a := graph.OpPad.NewAttrs().(*graph.PadAttrs)
		a.Mode = m
		return a
	}
	pads := vec(0, 0, 1, 2, 0, 1, 3, 0)
	nt.CheckNode(t, l, graph.OpPad, mode("constant"), 1, nt.In(x), nt.C(pads))
	nt.CheckNode(t, l, graph.OpPad, mode("constant"), 1, nt.In(x), nt.C(pads), nt.C(tensor.Scalar[float32](-2.5)))
	nt.CheckNode(t, l, graph.OpPad, mode("constant"), 1, nt.In(x), nt.C(pads), nt.In(tensor.Scalar[float32](0.75)))
	for _, m := range []string{"reflect", "edge", "wrap"} {
		nt.CheckNode(t, l, graph.OpPad, mode(m), 1, nt.In(x), nt.C(vec(0, 1, 4, 2, 0, 2, 3, 6)))
	}
	// negative pads crop; axes select which axes the pads apply to
	nt.CheckNode(t, l, graph.OpPad, mode("constant"), 1, nt.In(x), nt.C(vec(-1, 2, 3, -2)), nt.None, nt.C(vec(-1, 2)))
	nt.CheckNode(t, l, graph.OpPad, mode("reflect"), 1, nt.In(x), nt.C(vec(4, -1)), nt.None, nt.C(vec(-2)))
	nt.CheckNode(t, l, graph.OpPad, mode("edge"), 1, nt.In(f32(29, 1, 3)), nt.C(vec(2, 1, 3, 2)))
	// wrap: pads longer than the axis, an axis cropped at one end and padded at the other
	nt.CheckNode(t, l, graph.OpPad, mode("wrap"), 1, nt.In(f32(31, 2, 3)), nt.C(vec(3, 7, 4, 5)))
	nt.CheckNode(t, l, graph.OpPad, mode("wrap"), 1, nt.In(x), nt.C(vec(-1, 2, 3, -2)), nt.None, nt.C(vec(-1, 2)))
	nt.CheckNode(t, l, graph.OpPad, mode("reflect"), 1, nt.In(f32(30, 1, 3)), nt.C(vec(2, 0, 3, 0)))
	nt.CheckNode(t, l, graph.OpPad, mode("constant"), 1, nt.In(iota64(3, 4)), nt.C(vec(1, 2, 0, 1)), nt.C(tensor.Scalar[int64](-9)))
}

func TestInjectiveTile(t *testing.T) {
	l := Strategies(kernels.Default())
	nt.CheckNode(t, l, graph.OpTile, nil, 1, nt.In(f32(31, 2, 1, 5)), nt.C(vec(3, 4, 1)))
	nt.CheckNode(t, l, graph.OpTile, nil, 1, nt.In(iota64(3, 7)), nt.C(vec(2, 3)))
}

func TestInjectiveSpaceDepth(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(32, 2, 12, 3, 5)
	d2s := graph.OpDepthToSpace.NewAttrs().(*graph.DepthToSpaceAttrs)
	d2s.BlockSize = 2
	for _, m := range []string{"DCR", "CRD"} {
		d2s.Mode = m
		nt.CheckNode(t, l, graph.OpDepthToSpace, d2s, 1, nt.In(x))
	}
	s2d := graph.OpSpaceToDepth.NewAttrs().(*graph.SpaceToDepthAttrs)
	s2d.BlockSize = 3
	nt.CheckNode(t, l, graph.OpSpaceToDepth, s2d, 1, nt.In(f32(33, 2, 5, 6, 9)))
}

func TestInjectiveTrilu(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(34, 2, 5, 7)
	a := graph.OpTrilu.NewAttrs().(*graph.TriluAttrs)
	for _, upper := range []int64{1, 0} {
		a.Upper = upper
		nt.CheckNode(t, l, graph.OpTrilu, a, 1, nt.In(x))
		nt.CheckNode(t, l, graph.OpTrilu, a, 1, nt.In(x), nt.C(tensor.Scalar[int64](-2)))
		nt.CheckNode(t, l, graph.OpTrilu, a, 1, nt.In(x), nt.In(tensor.Scalar[int64](3)))
	}
}

func TestInjectiveOneHot(t *testing.T) {
	l := Strategies(kernels.Default())
	ind := i64s([]int{2, 3}, 0, 4, -1, -5, 9, 2)
	a := graph.OpOneHot.NewAttrs().(*graph.OneHotAttrs)
	vals := tensor.MustFromSlice(tensor.Shape{2}, []float32{-0.5, 3})
	for _, axis := range []int64{-1, 0, 1} {
		a.Axis = axis
		nt.CheckNode(t, l, graph.OpOneHot, a, 1, nt.In(ind), nt.C(tensor.Scalar[int64](5)), nt.C(vals))
	}
	nt.CheckNode(t, l, graph.OpOneHot, a, 1, nt.In(ind), nt.C(tensor.Scalar[float32](6)), nt.In(vec(0, 1)))
}

// TestInjectiveSymbolic lowers definitions on placeholders with a symbolic leading extent
// (a kernel parameter) and runs them at one value of it.
func TestInjectiveSymbolic(t *testing.T) {
	reg := kernels.Default()
	const b = 3
	run := func(op graph.Op, attrs any, shapes [][]int, args ...*tensor.Tensor) {
		t.Helper()
		dim := te.Dim("b")
		var in []kernels.Input
		var data [][]float32
		for k, x := range args {
			ext := make([]loopir.Expr, len(shapes[k]))
			for a, e := range shapes[k] {
				ext[a] = loopir.Int(int64(e))
				if e < 0 {
					ext[a] = dim
				}
			}
			in = append(in, kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", k), x.DType, ext...)})
			data = append(data, x.Data.([]float32))
		}
		n := &graph.Node{Op: op, Attrs: attrs, Outputs: []*graph.Value{{}}}
		impl, err := kernels.Generic(reg, "sym", n, in, ScheduleGeneric)
		if err != nil {
			t.Fatal(err)
		}
		want := kt.Ref(t, op, attrs, args)
		got := kt.Run(t, impl.Func, []int64{b}, want.Len(), data...)
		kt.Close(t, op.String(), got, want)
	}
	tr := graph.OpTranspose.NewAttrs().(*graph.TransposeAttrs)
	tr.Perm = []int64{2, 0, 1}
	run(graph.OpTranspose, tr, [][]int{{-1, 3, 5}}, f32(40, b, 3, 5))
	cat := graph.OpConcat.NewAttrs().(*graph.AxisAttrs)
	cat.Axis = -1
	run(graph.OpConcat, cat, [][]int{{-1, 3}, {-1, 2}}, f32(41, b, 3), f32(42, b, 2))
	cat.Axis = 0
	run(graph.OpConcat, cat, [][]int{{2, 4}, {-1, 4}, {1, 4}}, f32(43, 2, 4), f32(44, b, 4), f32(45, 1, 4))
	tri := graph.OpTrilu.NewAttrs().(*graph.TriluAttrs)
	run(graph.OpTrilu, tri, [][]int{{-1, 4, 6}}, f32(46, b, 4, 6))
	d2s := graph.OpDepthToSpace.NewAttrs().(*graph.DepthToSpaceAttrs)
	d2s.BlockSize = 2
	run(graph.OpDepthToSpace, d2s, [][]int{{-1, 8, 3, 2}}, f32(47, b, 8, 3, 2))
}

// TestInjectiveLarge runs sizes above the parallel threshold (fused parallel loops)
// and element types other than float32.
func TestInjectiveLarge(t *testing.T) {
	l := Strategies(kernels.Default())
	ids := make([]int64, 4*129)
	for k := range ids {
		ids[k] = int64(k*37%2001) - 1000
	}
	ga := graph.OpGather.NewAttrs().(*graph.GatherAttrs)
	nt.CheckNode(t, l, graph.OpGather, ga, 1, nt.In(f32(50, 1000, 65)), nt.In(i64s([]int{4, 129}, ids...)))
	tr := graph.OpTranspose.NewAttrs().(*graph.TransposeAttrs)
	tr.Perm = []int64{0, 2, 1, 3}
	nt.CheckNode(t, l, graph.OpTranspose, tr, 1, nt.In(f32(51, 2, 67, 12, 11)))
	cat := graph.OpConcat.NewAttrs().(*graph.AxisAttrs)
	cat.Axis = -1
	nt.CheckNode(t, l, graph.OpConcat, cat, 1, nt.In(f32(52, 130, 100)), nt.In(f32(53, 130, 77)))
	bools := tensor.FromFloat64s(tensor.Bool, tensor.Shape{3, 5}, []float64{1, 0, 0, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1, 1, 1})
	nt.CheckNode(t, l, graph.OpTranspose, nil, 1, nt.In(bools))
	i32 := tensor.MustFromSlice(tensor.Shape{2, 3}, []int32{1, -2, 3, -4, 5, -6})
	nt.CheckNode(t, l, graph.OpTile, nil, 1, nt.In(i32), nt.C(vec(2, 2)))
}

// lowerErr builds a one-node graph and returns the error of lowering it.
func lowerErr(t *testing.T, op graph.Op, attrs any, args ...nt.Arg) error {
	t.Helper()
	return nt.LowerErr(t, Strategies(kernels.Default()), op, attrs, 1, args...)
}

// TestInjectiveUnsupported checks that what the definitions cannot do is refused with
// ErrNoKernel.
func TestInjectiveUnsupported(t *testing.T) {
	x := f32(60, 4, 6)
	pad := graph.OpPad.NewAttrs().(*graph.PadAttrs)
	pad.Mode = "wrap"
	cases := map[string]error{
		"pad mode wrap, run-time pads": lowerErr(t, graph.OpPad, pad, nt.In(x), nt.In(vec(1, 1, 1, 1))),
		"pad mode wrap, cropped away":  lowerErr(t, graph.OpPad, pad, nt.In(x), nt.C(vec(-4, 0, 1, 0))),
		"transpose of float16":         lowerErr(t, graph.OpTranspose, nil, nt.In(tensor.New(tensor.Float16, tensor.Shape{2, 3}))),
	}
	for what, err := range cases {
		if !errors.Is(err, kernels.ErrNoKernel) {
			t.Errorf("%s: got %v, want ErrNoKernel", what, err)
		}
	}
}

// TestInjectiveRuntimeOperandsLower: operands known only at run time lower to a kernel
// over the output type's extents (the compiler binds them on the host; its
// TestRuntimeOperandsMatchReference compares the results with the reference).
func TestInjectiveRuntimeOperandsLower(t *testing.T) {
	x := f32(60, 4, 6)
	cases := map[string]error{
		"slice with run-time starts": lowerErr(t, graph.OpSlice, nil, nt.In(x), nt.In(vec(1)), nt.C(vec(3))),
		"pad with run-time pads":     lowerErr(t, graph.OpPad, nil, nt.In(x), nt.In(vec(1, 1, 1, 1))),
		"tile with run-time repeats": lowerErr(t, graph.OpTile, nil, nt.In(x), nt.In(vec(2, 2))),
	}
	for what, err := range cases {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}
