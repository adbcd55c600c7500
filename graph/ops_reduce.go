package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Reductions (axes are input 1 in the IR form), ArgMax/ArgMin, CumSum, TopK.

// ReduceAttrs is shared by every Reduce* op.
type ReduceAttrs struct {
	KeepDims          int64 `attr:"keepdims" default:"1"`
	NoopWithEmptyAxes int64 `attr:"noop_with_empty_axes"`
}

// ArgAttrs is shared by ArgMax and ArgMin.
type ArgAttrs struct {
	Axis            int64 `attr:"axis"`
	KeepDims        int64 `attr:"keepdims" default:"1"`
	SelectLastIndex int64 `attr:"select_last_index"`
}

// CumSumAttrs as in ONNX.
type CumSumAttrs struct {
	Exclusive int64 `attr:"exclusive"`
	Reverse   int64 `attr:"reverse"`
}

// TopKAttrs as in ONNX.
type TopKAttrs struct {
	Axis    int64 `attr:"axis" default:"-1"`
	Largest int64 `attr:"largest" default:"1"`
	Sorted  int64 `attr:"sorted" default:"1"`
}

func reduceOps() []OpInfo {
	var rows []OpInfo
	for _, op := range []Op{OpReduceSum, OpReduceMean, OpReduceMax, OpReduceMin, OpReduceProd, OpReduceL1,
		OpReduceL2, OpReduceLogSum, OpReduceLogSumExp, OpReduceSumSquare} {
		rows = append(rows, OpInfo{Op: op, MinIn: 1, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ReduceAttrs](), Pattern: CommReduce, Infer: inferReduce})
	}
	return append(rows,
		OpInfo{Op: OpArgMax, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ArgAttrs](), Pattern: CommReduce, Infer: inferArg},
		OpInfo{Op: OpArgMin, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ArgAttrs](), Pattern: CommReduce, Infer: inferArg},
		OpInfo{Op: OpCumSum, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[CumSumAttrs](), Pattern: Opaque, Infer: SameAs(0)},
		OpInfo{Op: OpTopK, MinIn: 2, MaxIn: 2, MinOut: 2, MaxOut: 2, Attrs: reflect.TypeFor[TopKAttrs](), Pattern: Opaque, Infer: inferTopK},
	)
}

// ReduceAxes resolves a reduction's axes from a rank, the optional axes values and the
// noop flag: nil with noop=true means "no reduction".
func ReduceAxes(rank int, axes []int64, given, noop bool) ([]bool, error) {
	red := make([]bool, rank)
	if !given || len(axes) == 0 {
		if noop {
			return nil, nil
		}
		for i := range red {
			red[i] = true
		}
		return red, nil
	}
	for _, a := range axes {
		ax, err := tensor.NormAxis(a, rank)
		if err != nil {
			return nil, err
		}
		red[ax] = true
	}
	return red, nil
}

func inferReduce(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	a := n.Attrs.(*ReduceAttrs)
	var axes []int64
	given := n.Input(1) != nil
	if given {
		l, static := staticLen(n, 1)
		if axes, ok = ConstInt64s(n, 1); !ok && (!static || l > 0) {
			switch {
			case a.KeepDims != 0:
				return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
			case static && l <= len(x.Shape): // distinct axes (checked at run time)
				return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape)-l)...)}, nil
			}
			return unknownRank(x.DType), nil
		}
	}
	red, err := ReduceAxes(len(x.Shape), axes, given, a.NoopWithEmptyAxes != 0)
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	if red == nil {
		x.Known = nil
		return []Type{x}, nil
	}
	var out []Dim
	for i, d := range x.Shape {
		switch {
		case !red[i]:
			out = append(out, d)
		case a.KeepDims != 0:
			out = append(out, Const(1))
		}
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferArg(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(tensor.Int64), err
	}
	a := n.Attrs.(*ArgAttrs)
	ax, err := NormAxis(n, a.Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	var out []Dim
	for i, d := range x.Shape {
		switch {
		case i != ax:
			out = append(out, d)
		case a.KeepDims != 0:
			out = append(out, Const(1))
		}
	}
	return []Type{TensorType(tensor.Int64, out...)}, nil
}

func inferTopK(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		return append(unknownRank(x.DType), unknownRank(tensor.Int64)...), nil
	}
	ax, err := NormAxis(n, n.Attrs.(*TopKAttrs).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	out := append([]Dim{}, x.Shape...)
	if k, ok := shapeValues(n, 1); ok && len(k) == 1 {
		out[ax] = k[0]
	} else {
		out[ax] = ic.Fresh()
	}
	return []Type{TensorType(x.DType, out...), TensorType(tensor.Int64, out...)}, nil
}
