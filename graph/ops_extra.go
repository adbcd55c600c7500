package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Less common ops: NonMaxSuppression, MaxUnpool, Unique, Det, ReverseSequence and the
// window functions.

// NMSAttrs as in ONNX.
type NMSAttrs struct {
	CenterPointBox int64 `attr:"center_point_box"`
}

// MaxUnpoolAttrs as in ONNX.
type MaxUnpoolAttrs struct {
	KernelShape []int64 `attr:"kernel_shape" required:"true" min:"1"`
	Pads        []int64 `attr:"pads" min:"0"`
	Strides     []int64 `attr:"strides" min:"1"`
}

// UniqueAttrs: Axis is AbsentInt when not given (flatten).
type UniqueAttrs struct {
	Axis   int64 `attr:"axis" default:"-9223372036854775808"`
	Sorted int64 `attr:"sorted" default:"1"`
}

// ReverseSequenceAttrs as in ONNX.
type ReverseSequenceAttrs struct {
	BatchAxis int64 `attr:"batch_axis" default:"1"`
	TimeAxis  int64 `attr:"time_axis"`
}

// WindowAttrs is shared by the window functions.
type WindowAttrs struct {
	OutputDatatype int64 `attr:"output_datatype" default:"1"`
	Periodic       int64 `attr:"periodic" default:"1"`
}

func extraOps() []OpInfo {
	win := func(op Op) OpInfo {
		return OpInfo{Op: op, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[WindowAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferWindow}
	}
	return []OpInfo{
		{Op: OpNonMaxSuppression, MinIn: 2, MaxIn: 5, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[NMSAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferNMS},
		{Op: OpMaxUnpool, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[MaxUnpoolAttrs](), Pattern: Opaque, Infer: inferMaxUnpool},
		{Op: OpUnique, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 4, Attrs: reflect.TypeFor[UniqueAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferUnique},
		{Op: OpDet, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Pattern: Opaque, Infer: inferDet},
		{Op: OpReverseSequence, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ReverseSequenceAttrs](), Pattern: Injective, Infer: SameAs(0)},
		win(OpHannWindow), win(OpHammingWindow), win(OpBlackmanWindow),
	}
}

func inferNMS(ic *InferCtx, _ *Node) ([]Type, error) {
	return []Type{TensorType(tensor.Int64, ic.Fresh(), Const(3))}, nil
}

func inferMaxUnpool(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if n.Input(2) != nil {
		if s, ok := shapeValues(n, 2); ok {
			return []Type{TensorType(x.DType, s...)}, nil
		}
		return []Type{TensorType(x.DType, ic.FreshShape(len(x.Shape))...)}, nil
	}
	a := n.Attrs.(*MaxUnpoolAttrs)
	sp := len(x.Shape) - 2
	if sp < 1 || len(a.KernelShape) != sp {
		return nil, Inferf(n, "kernel_shape %v for input %v", a.KernelShape, x)
	}
	out := []Dim{x.Shape[0], x.Shape[1]}
	for i := 0; i < sp; i++ {
		d := x.Shape[2+i].Sub(Const(1)).Scale(AttrOr(a.Strides, i, 1)).Add(Const(a.KernelShape[i] - AttrOr(a.Pads, i, 0) - AttrOr(a.Pads, i+sp, 0)))
		out = append(out, d)
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferUnique(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	u := ic.Fresh()
	y := TensorType(x.DType, u)
	if a := n.Attrs.(*UniqueAttrs); a.Axis != AbsentInt && ok {
		ax, err := NormAxis(n, a.Axis, len(x.Shape))
		if err != nil {
			return nil, err
		}
		s := append([]Dim{}, x.Shape...)
		s[ax] = u
		y = TensorType(x.DType, s...)
	}
	return []Type{y, TensorType(tensor.Int64, u), TensorType(tensor.Int64, ic.Fresh()), TensorType(tensor.Int64, u)}, nil
}

func inferDet(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if len(x.Shape) < 2 {
		return nil, Inferf(n, "Det needs rank >= 2")
	}
	return []Type{TensorType(x.DType, x.Shape[:len(x.Shape)-2]...)}, nil
}

func inferWindow(ic *InferCtx, n *Node) ([]Type, error) {
	dt := tensor.DType(n.Attrs.(*WindowAttrs).OutputDatatype)
	if !dt.Valid() {
		return nil, Inferf(n, "output_datatype %d", dt)
	}
	if v, ok := shapeValues(n, 0); ok && len(v) == 1 {
		return []Type{TensorType(dt, v[0])}, nil
	}
	return []Type{TensorType(dt, ic.Fresh())}, nil
}
