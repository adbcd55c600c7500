package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

func axesT(axes ...int64) *tensor.Tensor {
	return tensor.MustFromSlice(tensor.Shape{len(axes)}, axes)
}

func reduceAttrs(keep, noop int64) *graph.ReduceAttrs {
	a := graph.OpReduceSum.NewAttrs().(*graph.ReduceAttrs)
	a.KeepDims, a.NoopWithEmptyAxes = keep, noop
	return a
}

// positive maps values to (0.05, 1.05]: inputs of logarithms.
func positive(t *tensor.Tensor) *tensor.Tensor {
	v := t.Float64s()
	for i := range v {
		v[i] = math.Abs(v[i]) + 0.05
	}
	return tensor.FromFloat64s(t.DType, t.Shape, v)
}

var reduceOps = []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax, graph.OpReduceMin,
	graph.OpReduceProd, graph.OpReduceL1, graph.OpReduceL2, graph.OpReduceSumSquare,
	graph.OpReduceLogSum, graph.OpReduceLogSumExp}

// TestReduceOpsAxes runs every Reduce* op over single, several non-adjacent, negative
// and all axes, with keepdims 0 and 1 (every combination for ReduceSum and ReduceMean,
// a sample for the others).
func TestReduceOpsAxes(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(11, 3, 5, 7, 6)
	axesSets := [][]int64{{1}, {-1}, {0, 2}, {-3, -1}, {0, 1, 2, 3}}
	for _, op := range reduceOps {
		in := x
		if op == graph.OpReduceLogSum {
			in = positive(x)
		}
		full := op == graph.OpReduceSum || op == graph.OpReduceMean
		for k, axes := range axesSets {
			for _, keep := range []int64{0, 1} {
				if full || (k%2 == 0) == (keep == 1) {
					nt.CheckNode(t, l, op, reduceAttrs(keep, 0), 1, nt.In(in), nt.C(axesT(axes...)))
				}
			}
		}
	}
}

// TestReduceAllAxesToScalar reduces with the axes input absent (every axis), keepdims 0:
// a rank-0 result.
func TestReduceAllAxesToScalar(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(12, 5, 9, 3)
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMean, graph.OpReduceMax, graph.OpReduceLogSumExp} {
		nt.CheckNode(t, l, op, reduceAttrs(0, 0), 1, nt.In(x))
		nt.CheckNode(t, l, op, reduceAttrs(1, 0), 1, nt.In(x), nt.None)
	}
}

// TestReduceNoopEmptyAxes: noop_with_empty_axes with no axes is the identity; without
// the flag an empty axes list reduces everything.
func TestReduceNoopEmptyAxes(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(13, 4, 7)
	nt.CheckNode(t, l, graph.OpReduceSum, reduceAttrs(1, 1), 1, nt.In(x))
	nt.CheckNode(t, l, graph.OpReduceMean, reduceAttrs(0, 1), 1, nt.In(x), nt.C(axesT()))
	nt.CheckNode(t, l, graph.OpReduceMean, reduceAttrs(0, 0), 1, nt.In(x), nt.C(axesT()))
}

// TestReduceIntegers: exact integer reductions keep the integer type; the others are
// refused.
func TestReduceIntegers(t *testing.T) {
	l := Strategies(kernels.Default())
	v := make([]int64, 4*6*5)
	for i := range v {
		v[i] = int64(i*7%11) - 5
	}
	x := tensor.MustFromSlice(tensor.Shape{4, 6, 5}, v)
	for _, op := range []graph.Op{graph.OpReduceSum, graph.OpReduceMax, graph.OpReduceMin, graph.OpReduceL1, graph.OpReduceSumSquare} {
		nt.CheckNode(t, l, op, reduceAttrs(0, 0), 1, nt.In(x), nt.C(axesT(0, -1)))
	}
	nt.CheckNode(t, l, graph.OpReduceProd, reduceAttrs(1, 0), 1, nt.In(x), nt.C(axesT(2)))
	expectUnsupported(t, l, graph.OpReduceMean, reduceAttrs(1, 0), 1, nt.In(x), nt.C(axesT(1)))
}

// TestReduceRuntimeAxesDroppingDimsUnsupported: axes computed at run time lower when
// the reduced axes are kept (the output type's extents, bound at run time, say which),
// and are refused when they are dropped (the compiler lowers that as the kept form and
// a view).
func TestReduceRuntimeAxesDroppingDimsUnsupported(t *testing.T) {
	l := Strategies(kernels.Default())
	if err := nt.LowerErr(t, l, graph.OpReduceSum, reduceAttrs(1, 0), 1, nt.In(f32(1, 3, 4)), nt.In(axesT(1))); err != nil {
		t.Errorf("keeping dims: %v", err)
	}
	expectUnsupported(t, l, graph.OpReduceSum, reduceAttrs(0, 0), 1, nt.In(f32(1, 3, 4)), nt.In(axesT(1)))
}

// expectUnsupported lowers a node and wants ErrNoKernel.
func expectUnsupported(t *testing.T, l nt.Lowerer, op graph.Op, attrs any, numOut int, args ...nt.Arg) {
	t.Helper()
	if err := nt.LowerErr(t, l, op, attrs, numOut, args...); !errors.Is(err, kernels.ErrNoKernel) {
		t.Fatalf("%v: got %v, want ErrNoKernel", op, err)
	}
}

// TestReduceArgMaxArgMin covers axis (negative too), keepdims and select_last_index on
// data with many ties.
func TestReduceArgMaxArgMin(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(14, 3, 7, 5)
	v := x.Float64s()
	for i := range v {
		v[i] = math.Round(v[i] * 2)
	}
	x = tensor.FromFloat64s(tensor.Float32, x.Shape, v)
	for _, op := range []graph.Op{graph.OpArgMax, graph.OpArgMin} {
		for _, axis := range []int64{0, 1, -1} {
			for _, keep := range []int64{0, 1} {
				for _, last := range []int64{0, 1} {
					a := op.NewAttrs().(*graph.ArgAttrs)
					a.Axis, a.KeepDims, a.SelectLastIndex = axis, keep, last
					nt.CheckNode(t, l, op, a, 1, nt.In(x))
				}
			}
		}
	}
}

// TestReduceNaNAndEmptyGroups: a NaN anywhere in a group is ArgMax's and ArgMin's
// answer (numpy's rule: the first NaN, or the last with select_last_index); a group of
// no element (a 0-long axis) answers the reduction's identity (−inf, +inf, 0, 1, and
// what follows from them) instead of the output's old content.
func TestReduceNaNAndEmptyGroups(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(61, 4, 37)
	v := x.Float64s()
	v[0], v[37+20], v[2*37+36], v[3*37+4], v[3*37+30] = nan, nan, nan, nan, nan
	x = tensor.FromFloat64s(tensor.Float32, x.Shape, v)
	for _, op := range []graph.Op{graph.OpArgMax, graph.OpArgMin} {
		for _, axis := range []int64{0, 1} {
			for _, last := range []int64{0, 1} {
				a := op.NewAttrs().(*graph.ArgAttrs)
				a.Axis, a.SelectLastIndex = axis, last
				nt.CheckNode(t, l, op, a, 1, nt.In(x))
			}
		}
	}
	empty := tensor.FromFloat64s(tensor.Float32, tensor.Shape{0, 3}, nil)
	for _, op := range reduceOps {
		nt.CheckNode(t, l, op, reduceAttrs(0, 0), 1, nt.In(empty), nt.C(axesT(0)))
	}
}

// TestReduceSoftmaxFamily: Softmax, LogSoftmax and Hardmax along every axis.
func TestReduceSoftmaxFamily(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(15, 3, 10, 7)
	v := x.Float64s()
	for i := range v {
		v[i] *= 8 // large enough that an unshifted exp would lose digits
	}
	x = tensor.FromFloat64s(tensor.Float32, x.Shape, v)
	for _, op := range []graph.Op{graph.OpSoftmax, graph.OpLogSoftmax, graph.OpHardmax} {
		for _, axis := range []int64{0, 1, -1, -2} {
			a := op.NewAttrs().(*graph.SoftmaxAttrs)
			a.Axis = axis
			nt.CheckNode(t, l, op, a, 1, nt.In(x))
		}
	}
}

// TestReduceLayerNorm: LayerNormalization over one or several trailing axes, with and
// without bias, with broadcast parameters and the Mean/InvStdDev outputs.
func TestReduceLayerNorm(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(16, 2, 5, 6, 12)
	cases := []struct {
		axis        int64
		scale, bias *tensor.Tensor
		outs        int
	}{
		{-1, f32(17, 12), f32(18, 12), 1},
		{-1, f32(17, 12), nil, 3},
		{2, f32(19, 6, 12), f32(20, 1, 12), 3},
		{1, f32(21, 5, 1, 12), f32(22, 12), 2},
		{-3, f32(21, 1), nil, 1},
	}
	for _, c := range cases {
		a := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
		a.Axis = c.axis
		bias := nt.None
		if c.bias != nil {
			bias = nt.In(c.bias)
		}
		nt.CheckNode(t, l, graph.OpLayerNormalization, a, c.outs, nt.In(x), nt.In(c.scale), bias)
	}
}

// TestReduceBatchInstanceLpNorm: BatchNormalization (inference), InstanceNormalization
// and LpNormalization.
func TestReduceBatchInstanceLpNorm(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(23, 2, 5, 7, 9)
	bn := graph.OpBatchNormalization.NewAttrs().(*graph.BatchNormAttrs)
	bn.Epsilon = 1e-3
	nt.CheckNode(t, l, graph.OpBatchNormalization, bn, 1, nt.In(x), nt.C(f32(24, 5)), nt.C(f32(25, 5)),
		nt.C(f32(26, 5)), nt.C(positive(f32(27, 5))))
	nt.CheckNode(t, l, graph.OpBatchNormalization, bn, 1, nt.In(f32(28, 3, 4)), nt.In(f32(24, 4)), nt.In(f32(25, 4)),
		nt.In(f32(26, 4)), nt.In(positive(f32(27, 4))))
	in := graph.OpInstanceNormalization.NewAttrs()
	nt.CheckNode(t, l, graph.OpInstanceNormalization, in, 1, nt.In(x), nt.In(f32(29, 5)), nt.In(f32(30, 5)))
	nt.CheckNode(t, l, graph.OpInstanceNormalization, in, 1, nt.In(f32(31, 3, 4, 11)), nt.In(f32(29, 4)), nt.In(f32(30, 4)))
	zeroRow := x.Float64s()
	for i := 0; i < 9; i++ {
		zeroRow[i] = 0 // one line along the last axis is all zeros
	}
	xz := tensor.FromFloat64s(tensor.Float32, x.Shape, zeroRow)
	for _, p := range []int64{1, 2} {
		for _, axis := range []int64{-1, 1, 0} {
			a := graph.OpLpNormalization.NewAttrs().(*graph.LpNormAttrs)
			a.Axis, a.P = axis, p
			nt.CheckNode(t, l, graph.OpLpNormalization, a, 1, nt.In(xz))
		}
	}
}

// TestReduceGlobalPool: global pooling over 1, 2 and 3 spatial axes.
func TestReduceGlobalPool(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, x := range []*tensor.Tensor{f32(32, 2, 3, 17), f32(33, 2, 5, 7, 9), f32(34, 1, 3, 4, 5, 6)} {
		for _, op := range []graph.Op{graph.OpGlobalAveragePool, graph.OpGlobalMaxPool, graph.OpGlobalLpPool} {
			nt.CheckNode(t, l, op, op.NewAttrs(), 1, nt.In(x))
		}
	}
}

// poolCase is one pooling configuration.
type poolCase struct {
	kernel, strides, pads, dil []int64
	autoPad                    string
	ceil, include              int64
}

func poolAttrs(op graph.Op, c poolCase) *graph.PoolAttrs {
	a := op.NewAttrs().(*graph.PoolAttrs)
	a.KernelShape, a.Strides, a.Pads, a.Dilations = c.kernel, c.strides, c.pads, c.dil
	a.CeilMode, a.CountIncludePad = c.ceil, c.include
	if c.autoPad != "" {
		a.AutoPad = c.autoPad
	}
	return a
}

// TestReducePool2D: MaxPool, AveragePool and LpPool over 2-D windows with asymmetric
// pads, strides, dilations, ceil mode, count_include_pad and every auto_pad.
func TestReducePool2D(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(40, 2, 3, 11, 13)
	cases := []poolCase{
		{kernel: []int64{3, 3}},
		{kernel: []int64{3, 3}, strides: []int64{2, 2}, pads: []int64{1, 1, 1, 1}},
		{kernel: []int64{3, 2}, strides: []int64{2, 3}, pads: []int64{0, 1, 2, 0}},
		{kernel: []int64{3, 3}, strides: []int64{2, 2}, pads: []int64{1, 0, 1, 2}, include: 1},
		{kernel: []int64{2, 3}, strides: []int64{3, 2}, ceil: 1},
		{kernel: []int64{3, 3}, strides: []int64{2, 2}, pads: []int64{1, 1, 1, 1}, ceil: 1, include: 1},
		{kernel: []int64{2, 2}, strides: []int64{2, 2}, dil: []int64{2, 3}, pads: []int64{1, 2, 0, 1}},
		{kernel: []int64{3, 4}, strides: []int64{2, 3}, autoPad: "SAME_UPPER"},
		{kernel: []int64{3, 4}, strides: []int64{2, 3}, autoPad: "SAME_LOWER"},
		{kernel: []int64{4, 3}, strides: []int64{3, 2}, autoPad: "VALID"},
		{kernel: []int64{3, 3}, strides: []int64{1, 1}, autoPad: "SAME_UPPER", include: 1, dil: []int64{1, 1}},
	}
	for _, c := range cases {
		for _, op := range []graph.Op{graph.OpMaxPool, graph.OpAveragePool, graph.OpLpPool} {
			a := poolAttrs(op, c)
			if op == graph.OpAveragePool && c.include != 0 && c.autoPad == "SAME_UPPER" {
				expectUnsupported(t, l, op, a, 1, nt.In(x))
				continue
			}
			nt.CheckNode(t, l, op, a, 1, nt.In(x))
		}
	}
	a := poolAttrs(graph.OpLpPool, cases[1])
	a.P = 3
	nt.CheckNode(t, l, graph.OpLpPool, a, 1, nt.In(positive(x)))
}

// TestReducePool1D3D: pooling over one and three spatial axes.
func TestReducePool1D3D(t *testing.T) {
	l := Strategies(kernels.Default())
	x1 := f32(41, 2, 3, 23)
	x3 := f32(42, 1, 2, 5, 6, 7)
	for _, op := range []graph.Op{graph.OpMaxPool, graph.OpAveragePool} {
		nt.CheckNode(t, l, op, poolAttrs(op, poolCase{kernel: []int64{4}, strides: []int64{3}, pads: []int64{2, 1}}), 1, nt.In(x1))
		nt.CheckNode(t, l, op, poolAttrs(op, poolCase{kernel: []int64{3}, strides: []int64{2}, ceil: 1, include: 1, pads: []int64{1, 1}}), 1, nt.In(x1))
		nt.CheckNode(t, l, op, poolAttrs(op, poolCase{kernel: []int64{5}, autoPad: "SAME_LOWER", strides: []int64{2}}), 1, nt.In(x1))
		nt.CheckNode(t, l, op, poolAttrs(op, poolCase{kernel: []int64{2, 3, 2}, strides: []int64{1, 2, 2}, pads: []int64{0, 1, 1, 1, 0, 1}}), 1, nt.In(x3))
	}
}

// TestReduceMaxPoolIndices: MaxPool's Indices output in both storage orders.
func TestReduceMaxPoolIndices(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(43, 2, 3, 9, 10)
	for _, order := range []int64{0, 1} {
		for _, c := range []poolCase{
			{kernel: []int64{3, 3}, strides: []int64{2, 2}, pads: []int64{1, 1, 1, 1}},
			{kernel: []int64{2, 3}, strides: []int64{2, 1}, pads: []int64{0, 1, 1, 0}, dil: []int64{2, 1}},
		} {
			a := poolAttrs(graph.OpMaxPool, c)
			a.StorageOrder = order
			nt.CheckNode(t, l, graph.OpMaxPool, a, 2, nt.In(x))
		}
	}
	nt.CheckNode(t, l, graph.OpMaxPool, poolAttrs(graph.OpMaxPool, poolCase{kernel: []int64{3}, strides: []int64{2}}), 2, nt.In(f32(44, 2, 2, 15)))
}

// TestReduceFloat64AndScalars: float64 inputs, a rank-0 input, and ArgMax to a scalar.
func TestReduceFloat64AndScalars(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(50, 3, 7, 10)
	x64 := tensor.FromFloat64s(tensor.Float64, x.Shape, x.Float64s())
	nt.CheckNode(t, l, graph.OpReduceLogSumExp, reduceAttrs(0, 0), 1, nt.In(x64), nt.C(axesT(0, 2)))
	nt.CheckNode(t, l, graph.OpReduceL2, reduceAttrs(1, 0), 1, nt.In(x64), nt.C(axesT(1)))
	nt.CheckNode(t, l, graph.OpSoftmax, nil, 1, nt.In(x64))
	nt.CheckNode(t, l, graph.OpLayerNormalization, nil, 3, nt.In(x64), nt.In(tensor.FromFloat64s(tensor.Float64, tensor.Shape{10}, f32(51, 10).Float64s())))
	nt.CheckNode(t, l, graph.OpAveragePool, poolAttrs(graph.OpAveragePool, poolCase{kernel: []int64{2}, pads: []int64{1, 1}}), 1, nt.In(x64))
	nt.CheckNode(t, l, graph.OpReduceSum, reduceAttrs(0, 0), 1, nt.In(tensor.Scalar[float32](2.5)))
	a := graph.OpArgMax.NewAttrs().(*graph.ArgAttrs)
	a.KeepDims = 0
	nt.CheckNode(t, l, graph.OpArgMax, a, 1, nt.In(f32(52, 19)))
	ints := make([]int64, 6*5)
	for i := range ints {
		ints[i] = int64(i*5%7) - 3
	}
	a = graph.OpArgMin.NewAttrs().(*graph.ArgAttrs)
	a.Axis, a.SelectLastIndex = -2, 1
	nt.CheckNode(t, l, graph.OpArgMin, a, 1, nt.In(tensor.MustFromSlice(tensor.Shape{6, 5}, ints)))
}
