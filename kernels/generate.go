package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Generators: tensors made from scalars and a shape rather than read from an input
// (Range, ConstantOfShape). Their extents are the node's output type: with constant
// inputs fold-constants has already replaced them by constants, so what reaches a
// kernel has a shape over the symbols (a kiln.ShapeExpr's value), which the compiler
// binds at run time.

// generateComputes: Range, ConstantOfShape, EyeLike and the window functions.
func generateComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpRange:           computeRange,
		graph.OpConstantOfShape: computeConstantOfShape,
		graph.OpEyeLike:         computeEyeLike,
		graph.OpHannWindow:      computeWindow,
		graph.OpHammingWindow:   computeWindow,
		graph.OpBlackmanWindow:  computeWindow,
	}
}

// genShape is the node's output type as extents, refusing a rank that is unknown.
func genShape(n *graph.Node, in []Input, dt tensor.DType) ([]loopir.Expr, error) {
	if len(n.Outputs) == 0 || n.Outputs[0] == nil {
		return nil, Unsupported("%v without an output", n.Op)
	}
	t := n.Outputs[0].Type
	if t.Kind != graph.KindTensor || t.UnknownRank || t.DType != dt {
		return nil, Unsupported("%v with output type %v", n.Op, t)
	}
	return SymsOf(in).Shape(t.Shape), nil
}

// knownScalar is a scalar input as an element expression of type dt: a constant's
// literal, a value known over the symbols (kiln.ShapeExpr), or a read of the input.
func knownScalar(n *graph.Node, in []Input, i int, dt tensor.DType) loopir.Expr {
	x := in[i]
	if x.Const != nil && x.Const.Len() == 1 {
		if dt.IsFloat() {
			return loopir.Float(x.Const.Float64s()[0], dt)
		}
		return asType(dt, i64(x.Const.Int64s()[0]))
	}
	if known, ok := graph.KnownDims(n, i); ok && len(known) == 1 {
		return asType(dt, SymsOf(in).Expr(known[0]))
	}
	return x.T.At(zeros(len(x.T.Shape))...)
}

func asType(dt tensor.DType, e loopir.Expr) loopir.Expr {
	if e.DType() == dt {
		return e
	}
	return te.Cast(dt, e)
}

// computeRange: out[i] = start + i·delta, over the output type's extent (the count the
// graph inferred, max(0, ceil((limit-start)/delta))).
func computeRange(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	for k := range 3 {
		if k >= len(in) || !in[k].Present() || len(in[k].T.Shape) > 1 || (len(in[k].T.Shape) == 1 && !isOne(in[k].T.Shape[0])) {
			return nil, Unsupported("Range input %d is not a scalar", k)
		}
	}
	dt := in[0].T.DT
	if dt != tensor.Float32 && dt != tensor.Float64 && dt != tensor.Int32 && dt != tensor.Int64 && dt != tensor.Int16 {
		return nil, Unsupported("Range of %v", dt)
	}
	shape, err := genShape(n, in, dt)
	if err != nil {
		return nil, err
	}
	if len(shape) != 1 {
		return nil, Unsupported("Range with output rank %d", len(shape))
	}
	start, delta := knownScalar(n, in, 0, dt), knownScalar(n, in, 2, dt)
	out := te.Compute("range", shape, func(i []loopir.Expr) loopir.Expr {
		return loopir.Bin(loopir.Add, start, loopir.Bin(loopir.Mul, asType(dt, i[0]), delta))
	})
	return []*te.Tensor{out}, nil
}

// computeConstantOfShape fills the output type's shape with the value attribute (a
// one-element tensor, float32 0 by default).
func computeConstantOfShape(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	v := attrs[graph.ConstantOfShapeAttrs](n).Value
	dt := tensor.Float32
	var fill loopir.Expr = loopir.Float(0, dt)
	if v != nil {
		if v.Len() != 1 {
			return nil, Unsupported("ConstantOfShape value of %d elements", v.Len())
		}
		dt = v.DType
		switch {
		case dt.IsFloat() && dt != tensor.Float16 && dt != tensor.BFloat16:
			fill = loopir.Float(v.Float64s()[0], dt)
		case dt.IsInt() || dt == tensor.Bool:
			fill = &loopir.IntImm{V: v.Int64s()[0], DT: dt}
		default:
			return nil, Unsupported("ConstantOfShape of %v", dt)
		}
	}
	shape, err := genShape(n, in, dt)
	if err != nil {
		return nil, err
	}
	out := te.Compute("constant_of_shape", shape, func([]loopir.Expr) loopir.Expr { return fill })
	return []*te.Tensor{out}, nil
}
