package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Image geometry ops: Col2Im, CenterCropPad and AffineGrid. Their shape inputs must be
// constants (the output extents and the index arithmetic follow from them); Col2Im's
// batch and CenterCropPad's axes not listed may be symbolic.

func imageComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpCol2Im:        computeCol2Im,
		graph.OpCenterCropPad: computeCenterCropPad,
		graph.OpAffineGrid:    computeAffineGrid,
	}
}

// paddingZero is 0 in dt (a half float's as the conversion of a float32 0: the code
// generators print no half-float literal).
func paddingZero(dt tensor.DType) loopir.Expr {
	if halfFloat(dt) {
		return te.Cast(dt, loopir.Float(0, tensor.Float32))
	}
	return lit(0, &loopir.IntImm{DT: dt})
}

// computeCol2Im is Col2Im as a gather: each image element sums, over the offsets k of a
// block, the column of the block position l whose offset k lands on it, l·stride +
// k·dilation − pad_begin = y on every axis; offsets that no position brings there
// (outside the positions, or between strides) add nothing, their reads clamped in
// bounds.
func computeCol2Im(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if !plainNumeric(x.DT) || len(x.Shape) != 3 {
		return nil, Unsupported("Col2Im on %v of rank %d", x.DT, len(x.Shape))
	}
	image, ok1 := ConstInts(in, 1)
	block, ok2 := ConstInts(in, 2)
	if !ok1 || !ok2 {
		return nil, Unsupported("Col2Im with image_shape or block_shape computed at run time (they must be constants)")
	}
	w, err := graph.NewCol2ImWindow(attrs[graph.Col2ImAttrs](n), image, block)
	if err != nil {
		return nil, Unsupported("Col2Im: %v", err)
	}
	cb, ok1 := x.Shape[1].(*loopir.IntImm)
	l, ok2 := x.Shape[2].(*loopir.IntImm)
	if !ok1 || !ok2 {
		return nil, Unsupported("Col2Im on an input of symbolic extents %v", x.Shape)
	}
	p, ok1 := w.BlockSize()
	count, ok2 := w.BlockCount()
	if !ok1 || !ok2 || cb.V%p != 0 || count != l.V {
		return nil, Unsupported("Col2Im input %v for block_shape %v and %d block positions", x.Shape, block, count)
	}
	r := len(image)
	rv := make([]loopir.IterVar, r)
	shape := []loopir.Expr{x.Shape[0], i64(cb.V / p)}
	for d := range r {
		rv[d] = te.RAxis(fmt.Sprintf("k%d", d), i64(block[d]))
		shape = append(shape, i64(image[d]))
	}
	return []*te.Tensor{te.Compute("col2im", shape, func(i []loopir.Expr) loopir.Expr {
		var hit loopir.Expr
		both := func(c loopir.Expr) {
			if hit == nil {
				hit = c
			} else {
				hit = loopir.Bin(loopir.And, hit, c)
			}
		}
		var kf, lf loopir.Expr = i64(0), i64(0) // row-major offset and position numbers
		for d := range r {
			t := sub(add(i[2+d], i64(w.PadBegin[d])), mul(rv[d].Var, i64(w.Dilations[d]))) // l·stride
			q := t
			if s := w.Strides[d]; s > 1 {
				both(loopir.Bin(loopir.EQ, loopir.Bin(loopir.Mod, t, i64(s)), i64(0)))
				q = loopir.Bin(loopir.Div, t, i64(s))
			}
			both(inside(q, i64(w.Blocks[d])))
			kf = add(mul(kf, i64(block[d])), rv[d].Var)
			lf = add(mul(lf, i64(w.Blocks[d])), injClamp(q, i64(w.Blocks[d])))
		}
		col := x.At(i[0], add(mul(i[1], i64(p)), kf), lf)
		return te.Sum(te.Select(hit, col, paddingZero(x.DT)), rv...)
	})}, nil
}

// computeCenterCropPad reads each output element at the input index offset by
// graph.CenterCropOffset on the listed axes; along a padded axis an index outside the
// input reads zero (the read clamped in bounds).
func computeCenterCropPad(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	if x.DT == tensor.String {
		return nil, Unsupported("CenterCropPad on strings")
	}
	want, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("CenterCropPad with a shape computed at run time (it must be a constant)")
	}
	axes, err := graph.CenterCropPadAxes(attrs[graph.CenterCropPadAttrs](n), len(x.Shape))
	if err != nil {
		return nil, Unsupported("CenterCropPad: %v", err)
	}
	if len(want) != len(axes) {
		return nil, Unsupported("CenterCropPad with %d shape values for %d axes", len(want), len(axes))
	}
	r := len(x.Shape)
	shape := append([]loopir.Expr{}, x.Shape...)
	off, from := make([]int64, r), make([]int64, r)
	padded := make([]bool, r)
	for k, ax := range axes {
		d, ok := x.Shape[ax].(*loopir.IntImm)
		if !ok || want[k] < 0 {
			return nil, Unsupported("CenterCropPad of axis %d (extent %v) to %d", ax, x.Shape[ax], want[k])
		}
		shape[ax] = i64(want[k])
		off[ax], from[ax], padded[ax] = graph.CenterCropOffset(d.V, want[k]), d.V, want[k] > d.V
	}
	empty := false // an input with no element: the output is all padding
	for _, e := range x.Shape {
		if c, ok := e.(*loopir.IntImm); ok && c.V == 0 {
			empty = true
		}
	}
	zero := paddingZero(x.DT)
	return []*te.Tensor{te.Compute("center_crop_pad", shape, func(i []loopir.Expr) loopir.Expr {
		if empty {
			return zero
		}
		src := make([]loopir.Expr, r)
		var ok loopir.Expr
		for a := range src {
			src[a] = add(i[a], i64(off[a]))
			if padded[a] {
				in := inside(src[a], i64(from[a]))
				if ok == nil {
					ok = in
				} else {
					ok = loopir.Bin(loopir.And, ok, in)
				}
				src[a] = injClamp(src[a], i64(from[a]))
			}
		}
		v := x.At(src...)
		if ok != nil {
			v = te.Select(ok, v, zero)
		}
		return v
	})}, nil
}

// computeAffineGrid is AffineGrid: each output pixel's normalized position (x along the
// last spatial axis, then y, then z) through its instance's matrix, in theta's type. An
// axis of one pixel has its position at 0 (as the reference evaluator). theta's batch
// must be static (the constant size gives the output's).
func computeAffineGrid(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	theta := in[0].T
	dt := theta.DT
	if !plainFloat(dt) || len(theta.Shape) != 3 {
		return nil, Unsupported("AffineGrid on theta of %v and rank %d", dt, len(theta.Shape))
	}
	size, ok := ConstInts(in, 1)
	if !ok {
		return nil, Unsupported("AffineGrid with a size computed at run time (it must be a constant)")
	}
	r := len(size) - 2
	if r != 2 && r != 3 {
		return nil, Unsupported("AffineGrid with size %v", size)
	}
	align := attrs[graph.AffineGridAttrs](n).AlignCorners != 0
	if b, ok := theta.Shape[0].(*loopir.IntImm); !ok || b.V != size[0] {
		// inference gives the output size's batch, which theta's must be
		return nil, Unsupported("AffineGrid on theta of batch %v for size %v", theta.Shape[0], size)
	}
	shape := []loopir.Expr{theta.Shape[0]}
	for _, s := range size[2:] {
		if s < 0 {
			return nil, Unsupported("AffineGrid with size %v", size)
		}
		shape = append(shape, i64(s))
	}
	shape = append(shape, i64(int64(r)))
	// coord is pixel i's position along an axis of s pixels: i·scale + offset
	coord := func(i loopir.Expr, s int64) loopir.Expr {
		if s <= 1 {
			return loopir.Float(0, dt)
		}
		scale, offset := 2/float64(s), 1/float64(s)-1
		if align {
			scale, offset = 2/float64(s-1), -1
		}
		return te.Add(te.Mul(te.Cast(dt, i), loopir.Float(scale, dt)), loopir.Float(offset, dt))
	}
	return []*te.Tensor{te.Compute("affine_grid", shape, func(i []loopir.Expr) loopir.Expr {
		row := i[r+1] // the output component: the row of theta
		v := theta.At(i[0], row, i64(int64(r)))
		for k := range r { // component k runs along spatial axis r-1-k (output axis r-k)
			v = te.Add(v, te.Mul(theta.At(i[0], row, i64(int64(k))), coord(i[r-k], size[r+1-k])))
		}
		return v
	})}, nil
}
