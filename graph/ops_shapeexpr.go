package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// ShapeExprAttrs: Value is the result's type, whose Known elements are the value: dims
// over the model's symbols ("i64[3]{batch,seq,256}").
type ShapeExprAttrs struct {
	Value *Type `attr:"value"`
}

// shapeExprOps: kiln.ShapeExpr is an integer tensor computed from the symbols alone — a
// shape, or part of one, that Shape/Gather/Concat/arithmetic chains produced over
// symbolic dims. Fold-constants makes it from such chains (with every symbol bound it is
// a constant instead); the compiler evaluates it on the host from the input shapes, so
// no kernel computes shapes.
func shapeExprOps() []OpInfo {
	return []OpInfo{
		{Op: OpShapeExpr, Domain: KilnDomain, MinIn: 0, MaxIn: 0, MinOut: 1, MaxOut: 1,
			Attrs: reflect.TypeFor[ShapeExprAttrs](), Pattern: Opaque, Infer: inferShapeExpr},
	}
}

func inferShapeExpr(_ *InferCtx, n *Node) ([]Type, error) {
	v := n.Attrs.(*ShapeExprAttrs).Value
	if v == nil {
		return nil, Inferf(n, "no value")
	}
	if err := CheckShapeExpr(*v); err != nil {
		return nil, Inferf(n, "%v", err)
	}
	return []Type{*v}, nil
}

// CheckShapeExpr reports whether t can be a ShapeExpr's value: an integer tensor of a
// static shape with one known dim per element.
func CheckShapeExpr(t Type) error {
	if t.Kind != KindTensor || t.UnknownRank || !t.DType.IsInt() {
		return Inferf(&Node{Op: OpShapeExpr}, "value %v is not an integer tensor", t)
	}
	shape, ok := t.ConstShape()
	if !ok {
		return Inferf(&Node{Op: OpShapeExpr}, "value %v has a symbolic shape", t)
	}
	if len(t.Known) != shape.NumElements() {
		return Inferf(&Node{Op: OpShapeExpr}, "value %v has %d known elements for %d", t, len(t.Known), shape.NumElements())
	}
	return nil
}

// ShapeExprOf returns the known value of an integer tensor type when it is fully known
// and not constant (a ShapeExpr can stand for it), else false.
func ShapeExprOf(t Type) (Type, bool) {
	if CheckShapeExpr(t) != nil {
		return Type{}, false
	}
	for _, d := range t.Known {
		if !d.IsConst() {
			return t, true
		}
	}
	return Type{}, false
}

// EvalKnown evaluates a fully known integer type's elements with symbol values; ok is
// false when a symbol is missing from env.
func EvalKnown(t Type, env map[string]int64) (*tensor.Tensor, bool) {
	shape, _ := t.ConstShape()
	vals := make([]int64, len(t.Known))
	for i, d := range t.Known {
		v, ok := d.Eval(env)
		if !ok {
			return nil, false
		}
		vals[i] = v
	}
	out, err := tensor.FromSlice(shape, vals)
	if err != nil {
		return nil, false
	}
	if t.DType != tensor.Int64 {
		out = out.Cast(t.DType)
	}
	return out, true
}
