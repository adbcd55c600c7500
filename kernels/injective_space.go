package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Block rearrangements (DepthToSpace, SpaceToDepth) and index-masked copies (Trilu,
// OneHot).

// computeDepthToSpace moves blocks of b·b channels into b×b spatial blocks of an NCHW
// tensor: DCR reads channel (by·b+bx)·C' + c, CRD reads c·b·b + by·b + bx.
func computeDepthToSpace(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	a := attrs[graph.DepthToSpaceAttrs](n)
	if a.Mode != "DCR" && a.Mode != "CRD" {
		return nil, Unsupported("DepthToSpace mode %q", a.Mode)
	}
	b := a.BlockSize
	if len(x.Shape) != 4 || b <= 0 {
		return nil, Unsupported("DepthToSpace of rank %d with blocksize %d", len(x.Shape), b)
	}
	c, ok := x.Shape[1].(*loopir.IntImm)
	if !ok || c.V%(b*b) != 0 {
		return nil, Unsupported("DepthToSpace of %v channels with blocksize %d", x.Shape[1], b)
	}
	oc := c.V / (b * b)
	bb := i64(b)
	shape := []loopir.Expr{x.Shape[0], i64(oc), mul(x.Shape[2], bb), mul(x.Shape[3], bb)}
	out := injCopy("depth_to_space", x, shape, func(i []loopir.Expr) []loopir.Expr {
		by, bx := loopir.Bin(loopir.Mod, i[2], bb), loopir.Bin(loopir.Mod, i[3], bb)
		var ch loopir.Expr
		if a.Mode == "CRD" {
			ch = add(mul(i[1], i64(b*b)), add(mul(by, bb), bx))
		} else {
			ch = add(mul(add(mul(by, bb), bx), i64(oc)), i[1])
		}
		return []loopir.Expr{i[0], ch, div(i[2], bb), div(i[3], bb)}
	})
	return []*te.Tensor{out}, nil
}

// computeSpaceToDepth moves b×b spatial blocks of an NCHW tensor into channels: output
// channel (by·b+bx)·C + c.
func computeSpaceToDepth(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	b := attrs[graph.SpaceToDepthAttrs](n).BlockSize
	if len(x.Shape) != 4 || b <= 0 {
		return nil, Unsupported("SpaceToDepth of rank %d with blocksize %d", len(x.Shape), b)
	}
	ext, err := Extents(x)
	if err != nil {
		return nil, err
	}
	if ext[2]%b != 0 || ext[3]%b != 0 {
		return nil, Unsupported("SpaceToDepth of %dx%d with blocksize %d", ext[2], ext[3], b)
	}
	c, bb := i64(ext[1]), i64(b)
	shape := Static(ext[0], ext[1]*b*b, ext[2]/b, ext[3]/b)
	out := injCopy("space_to_depth", x, shape, func(i []loopir.Expr) []loopir.Expr {
		blk, ch := div(i[1], c), loopir.Bin(loopir.Mod, i[1], c)
		by, bx := div(blk, bb), loopir.Bin(loopir.Mod, blk, bb)
		return []loopir.Expr{i[0], ch, add(mul(i[2], bb), by), add(mul(i[3], bb), bx)}
	})
	return []*te.Tensor{out}, nil
}

// computeTrilu keeps the upper (col-row >= k) or lower (col-row <= k) triangle of the
// last two axes and zeroes the rest; k is input 1 (constant or read at run time), else 0.
func computeTrilu(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	if r < 2 {
		return nil, Unsupported("Trilu of rank %d", r)
	}
	upper := attrs[graph.TriluAttrs](n).Upper != 0
	var k loopir.Expr = i64(0)
	if len(in) > 1 && in[1].Present() {
		switch {
		case in[1].Const != nil:
			v, _ := ConstInts(in, 1)
			if len(v) != 1 {
				return nil, Unsupported("Trilu k with %d elements", in[1].Const.Len())
			}
			k = i64(v[0])
		case in[1].T.DT.IsInt():
			k = injScalar(in[1].T, tensor.Int64)
		default:
			return nil, Unsupported("Trilu k of type %v", in[1].T.DT)
		}
	}
	out := te.Compute("trilu", x.Shape, func(i []loopir.Expr) loopir.Expr {
		diag := sub(i[r-1], i[r-2])
		keep := loopir.Bin(loopir.GE, diag, k)
		if !upper {
			keep = loopir.Bin(loopir.LE, diag, k)
		}
		v := x.At(i...)
		return te.Select(keep, v, lit(0, v))
	})
	return []*te.Tensor{out}, nil
}

// computeOneHot writes values[1] where the output's coordinate on axis equals the index
// (negative indices count from depth) and values[0] elsewhere; a depth known only at
// run time is the output type's extent on axis.
func computeOneHot(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	ind, vals := in[0].T, in[2].T
	axis, err := NormAxis(attrs[graph.OneHotAttrs](n).Axis, len(ind.Shape)+1)
	if err != nil {
		return nil, err
	}
	var depth loopir.Expr
	switch {
	case in[1].Const != nil && in[1].Const.Len() == 1 && in[1].Const.DType.IsNumeric():
		d := int64(in[1].Const.Float64s()[0])
		if d < 0 {
			return nil, Unsupported("OneHot depth %d", d)
		}
		depth = i64(d)
	case len(in[1].T.Shape) == 0 || (len(in[1].T.Shape) == 1 && isOne(in[1].T.Shape[0])):
		// a run-time depth: the output's extent on axis, bound on the host from it
		shape, ok := outputShape(n, 0, in, vals)
		if !ok || len(shape) != len(ind.Shape)+1 {
			return nil, Unsupported("OneHot with a run-time depth and no output type")
		}
		depth = shape[axis]
	default:
		return nil, Unsupported("OneHot with a non-scalar depth")
	}
	if !ind.DT.IsNumeric() {
		return nil, Unsupported("OneHot indices of type %v", ind.DT)
	}
	var off, on loopir.Expr
	switch {
	case in[2].Const != nil && in[2].Const.Len() == 2:
		off, on = injConst(in[2].Const, 0, vals.DT), injConst(in[2].Const, 1, vals.DT)
	case len(vals.Shape) == 1 && injExtentIs(vals.Shape[0], 2):
		off, on = vals.At(i64(0)), vals.At(i64(1))
	default:
		return nil, Unsupported("OneHot values must have shape [2]")
	}
	shape := append(append(append([]loopir.Expr{}, ind.Shape[:axis]...), depth), ind.Shape[axis:]...)
	out := te.Compute("one_hot", shape, func(i []loopir.Expr) loopir.Expr {
		src := append(append([]loopir.Expr{}, i[:axis]...), i[axis+1:]...)
		v := ind.At(src...)
		if v.DType() != tensor.Int64 {
			v = te.Cast(tensor.Int64, v) // floats truncate toward zero, as the reference does
		}
		v = te.Select(loopir.Bin(loopir.LT, v, i64(0)), add(v, depth), v)
		return te.Select(loopir.Bin(loopir.EQ, i[axis], v), on, off)
	})
	return []*te.Tensor{out}, nil
}

// injExtentIs reports a constant extent equal to v.
func injExtentIs(e loopir.Expr, v int64) bool {
	c, ok := e.(*loopir.IntImm)
	return ok && c.V == v
}
