package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Resize with scales, sizes or roi known only at run time. The output's extents are its
// type's, bound (or checked) on the host by vm.BuiltinShapeResize, which also refuses
// hostile operands (a scale that is not finite and above 0, a size past the limits, a
// count that does not match the axes). The kernel reads the operands (small 1-D
// tensors) and computes each source coordinate in float64 as ONNX defines it (no
// compile-time plan is possible), then takes the decisions of resize_axis.go from it in
// float64: float32 would round some coordinates to the other side of a nearest tie.
// Those taps (indices and weights) are computed once per output index of each axis into
// small tables that the weighted sum reads (runtimeResizeTables). A dialect without
// double (OpenCL's) does not print the kernel (codegen's ErrUnsupported) rather than
// compute it in float32. Every float → integer conversion is
// clamped first (a NaN goes to 0), so no operand value makes an index out of range.

// runtimeResize is computeResize for run-time scales or sizes (input 3 when present,
// else input 2) and roi.
func runtimeResize(n *graph.Node, in []Input, a *graph.ResizeAttrs) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	if a.Antialias != 0 && a.Mode != "nearest" {
		return nil, Unsupported("Resize antialias with run-time scales or sizes (the taps depend on the scale)")
	}
	shape, ok := outputShape(n, 0, in, x)
	if !ok || len(shape) != r {
		return nil, Unsupported("Resize with run-time scales or sizes and no output type of the input's rank")
	}
	axes := graph.ResizeAxes(a, r)
	for _, ax := range axes {
		if ax < 0 || ax >= r {
			return nil, Unsupported("Resize axis %d for rank %d", ax, r)
		}
		if c, ok := x.Shape[ax].(*loopir.IntImm); ok && c.V == 0 {
			return nil, Unsupported("Resize of the empty axis %d", ax)
		}
	}
	useSizes := len(in) > 3 && in[3].Present() && (in[3].Const == nil || in[3].Const.Len() > 0)
	op := 2
	if useSizes {
		op = 3
	}
	if l, ok := staticLen1(in, op); !ok || l != len(axes) {
		return nil, Unsupported("Resize with run-time %s not of static length %d", map[bool]string{true: "sizes", false: "scales"}[useSizes], len(axes))
	}
	f64 := func(e loopir.Expr) loopir.Expr { return asType(tensor.Float64, e) }
	operand := func(i, k int) loopir.Expr {
		if in[i].Const != nil {
			return loopir.Float(in[i].Const.Float64s()[k], tensor.Float64)
		}
		return f64(in[i].T.At(i64(int64(k))))
	}
	scale := make([]loopir.Expr, r)
	for k, ax := range axes {
		if useSizes {
			scale[ax] = te.Div(operand(3, k), f64(loopir.Bin(loopir.Max, x.Shape[ax], i64(1))))
		} else {
			scale[ax] = operand(2, k)
		}
	}
	if p := a.KeepAspectRatioPolicy; useSizes && (p == "not_larger" || p == "not_smaller") {
		common := scale[axes[0]]
		for _, ax := range axes[1:] {
			if p == "not_larger" {
				common = te.MinOf(common, scale[ax])
			} else {
				common = te.MaxOf(common, scale[ax])
			}
		}
		for _, ax := range axes {
			scale[ax] = common
		}
	} else if p != "" && p != "stretch" && useSizes {
		return nil, Unsupported("Resize keep_aspect_ratio_policy %q", p)
	}
	crop := a.CoordinateTransformationMode == "tf_crop_and_resize"
	if crop && (len(in) < 2 || !in[1].Present()) {
		return nil, Unsupported("Resize tf_crop_and_resize without a roi")
	}
	if crop {
		if l, ok := staticLen1(in, 1); !ok || l != 2*len(axes) {
			return nil, Unsupported("Resize roi not of static length %d", 2*len(axes))
		}
	}
	tabs := make([]*runtimeResizeAxis, r)
	for _, ax := range axes {
		var roiStart, roiEnd loopir.Expr
		if crop {
			k := resizeAxisIndex(axes, ax)
			roiStart, roiEnd = operand(1, k), operand(1, len(axes)+k)
		}
		tabs[ax] = runtimeResizeTables(a, ax, x, shape[ax], scale[ax], roiStart, roiEnd)
	}
	out := te.Compute("resize", shape, func(i []loopir.Expr) loopir.Expr {
		var outside loopir.Expr
		tp := make([][]resizeTap, r)
		for ax := range r {
			t := tabs[ax]
			if t == nil {
				tp[ax] = []resizeTap{{idx: i[ax]}}
				continue
			}
			for k := range t.taps {
				tap := resizeTap{idx: t.idx.At(i[ax], i64(int64(k)))}
				if crop { // a coordinate outside the input has the index -1
					if k == 0 {
						outside = orOrFirst(outside, loopir.Bin(loopir.LT, tap.idx, i64(0)))
					}
					tap.idx = loopir.Bin(loopir.Max, tap.idx, i64(0))
				}
				if t.w != nil {
					tap.w = t.w.At(i[ax], i64(int64(k)))
				}
				tp[ax] = append(tp[ax], tap)
			}
		}
		v := resizeSum(x, tp, nil)
		if outside != nil {
			v = te.Select(outside, lit(float64(a.ExtrapolationValue), v), v)
		}
		return v
	})
	return []*te.Tensor{out}, nil
}

// runtimeResizeAxis holds one resized axis's taps per output index o: idx[o, k] the
// input index of tap k (-1 under tf_crop_and_resize where the coordinate is outside
// the input), w[o, k] its weight (nil for nearest), divided by the sum of the weights
// where they do not sum to 1.
type runtimeResizeAxis struct {
	idx, w *te.Tensor
	taps   int
}

// runtimeResizeTables computes the taps of axis ax (output extent out) once per output
// index into small tables the resize reads: the float64 coordinate and the Keys
// weights stay out of the weighted sum, whose terms (up to 4 per axis, multiplied over
// the axes) would each repeat them. An axis of unchanged extent and scale 1 is copied,
// whatever the mode, as the reference does (except under tf_crop_and_resize).
func runtimeResizeTables(a *graph.ResizeAttrs, ax int, x *te.Tensor, out, scale, roiStart, roiEnd loopir.Expr) *runtimeResizeAxis {
	crop := a.CoordinateTransformationMode == "tf_crop_and_resize"
	f64 := func(e loopir.Expr) loopir.Expr { return asType(tensor.Float64, e) }
	n := x.Shape[ax]
	taps := func(o loopir.Expr) []resizeTap {
		c := resizeCoordExpr(a.CoordinateTransformationMode, f64(o), f64(n), f64(out), scale, roiStart, roiEnd)
		last := f64(sub(n, i64(1)))
		tp, sum := runtimeTaps(a, c, last, n, x.DT)
		if sum != nil { // weights that sum to sum (not zero unless every tap is outside)
			for k := range tp {
				tp[k].w = te.Select(loopir.Bin(loopir.NE, sum, lit(0, sum)), te.Div(tp[k].w, sum), tp[k].w)
			}
		}
		if crop {
			o := loopir.Bin(loopir.Or, loopir.Bin(loopir.LT, c, lit(0, c)), loopir.Bin(loopir.GT, c, last))
			for k := range tp {
				tp[k].idx = te.Select(o, i64(-1), tp[k].idx)
			}
			return tp
		}
		same := loopir.Bin(loopir.And, loopir.Bin(loopir.EQ, out, n), loopir.Bin(loopir.EQ, scale, lit(1, scale)))
		copyTap := resizeCopyTap(len(tp))
		for k, t := range tp {
			tp[k].idx = te.Select(same, o, t.idx)
			if t.w != nil {
				w := 0.0
				if k == copyTap {
					w = 1
				}
				tp[k].w = te.Select(same, lit(w, t.w), t.w)
			}
		}
		return tp
	}
	// tap k of the taps at o, as a chain of selects on k
	pick := func(o, k loopir.Expr, part func(resizeTap) loopir.Expr) loopir.Expr {
		tp := taps(o)
		v := part(tp[len(tp)-1])
		for j := len(tp) - 2; j >= 0; j-- {
			v = te.Select(loopir.Bin(loopir.EQ, k, i64(int64(j))), part(tp[j]), v)
		}
		return v
	}
	nt := len(taps(i64(0)))
	ext := []loopir.Expr{out, i64(int64(nt))}
	t := &runtimeResizeAxis{taps: nt}
	t.idx = te.Compute(fmt.Sprintf("resize_idx%d", ax), ext, func(i []loopir.Expr) loopir.Expr {
		return pick(i[0], i[1], func(t resizeTap) loopir.Expr { return t.idx })
	})
	if a.Mode != "nearest" {
		t.w = te.Compute(fmt.Sprintf("resize_w%d", ax), ext, func(i []loopir.Expr) loopir.Expr {
			return pick(i[0], i[1], func(t resizeTap) loopir.Expr { return t.w })
		})
	}
	return t
}

// resizeCopyTap is the tap that carries weight 1 on a copied axis: the first of the
// nearest or linear taps, the second of the 4 cubic ones.
func resizeCopyTap(taps int) int {
	if taps == 4 {
		return 1
	}
	return 0
}

func resizeAxisIndex(axes []int, ax int) int {
	for k, a := range axes {
		if a == ax {
			return k
		}
	}
	panic("BUG: Resize axis not among the resized axes")
}

// resizeCoordExpr is resizeCoord as a float64 expression of the output index o, the
// extents in and out and the scale.
func resizeCoordExpr(mode string, o, in, out, scale, roiStart, roiEnd loopir.Expr) loopir.Expr {
	f := func(v float64) loopir.Expr { return loopir.Float(v, tensor.Float64) }
	half := f(0.5)
	gt1 := loopir.Bin(loopir.GT, out, f(1))
	switch mode {
	case "half_pixel":
		return te.Sub(te.Div(te.Add(o, half), scale), half)
	case "pytorch_half_pixel":
		return te.Select(gt1, te.Sub(te.Div(te.Add(o, half), scale), half), f(0))
	case "align_corners":
		resized := te.Mul(in, scale)
		return te.Select(loopir.Bin(loopir.EQ, resized, f(1)), f(0), te.Div(te.Mul(o, te.Sub(in, f(1))), te.Sub(resized, f(1))))
	case "asymmetric":
		return te.Div(o, scale)
	case "half_pixel_symmetric":
		adjust := te.Div(out, te.Mul(scale, in))
		return te.Add(te.Mul(te.Div(in, f(2)), te.Sub(f(1), adjust)), te.Sub(te.Div(te.Add(o, half), scale), half))
	case "tf_half_pixel_for_nn":
		return te.Div(te.Add(o, half), scale)
	case "tf_crop_and_resize":
		n1 := te.Sub(in, f(1))
		many := te.Add(te.Mul(roiStart, n1), te.Div(te.Mul(te.Mul(o, te.Sub(roiEnd, roiStart)), n1), te.Sub(out, f(1))))
		return te.Select(gt1, many, te.Mul(te.Mul(half, te.Add(roiStart, roiEnd)), n1))
	}
	panic("BUG: Resize coordinate_transformation_mode " + mode + " passed checkResizeAttrs")
}

// clampF is v limited to [lo, hi] with a NaN taken to lo, all float64.
func clampF(v, lo, hi loopir.Expr) loopir.Expr {
	return te.Select(loopir.Bin(loopir.GE, v, lo), te.Select(loopir.Bin(loopir.LE, v, hi), v, hi), lo)
}

// runtimeTaps are the taps of the float64 coordinate c on an axis of extent n (last =
// n−1 in float64), as miscTaps in the reference derives them, and the sum to divide by
// (nil: the weights sum to 1).
func runtimeTaps(a *graph.ResizeAttrs, c, last, n loopir.Expr, dt tensor.DType) ([]resizeTap, loopir.Expr) {
	f := func(v float64) loopir.Expr { return loopir.Float(v, tensor.Float64) }
	idx := func(v loopir.Expr) loopir.Expr { return te.Cast(tensor.Int64, v) }
	fl := te.Floor(c)
	switch a.Mode {
	case "nearest":
		fr := te.Sub(c, fl)
		var up loopir.Expr
		switch a.NearestMode {
		case "round_prefer_floor":
			up = loopir.Bin(loopir.GT, fr, f(0.5))
		case "round_prefer_ceil":
			up = loopir.Bin(loopir.GE, fr, f(0.5))
		case "ceil":
			up = loopir.Bin(loopir.GT, fr, f(0))
		}
		i := fl
		if up != nil {
			i = te.Select(up, te.Add(fl, f(1)), fl)
		}
		return []resizeTap{{idx: idx(clampF(i, f(0), last))}}, nil
	case "linear":
		xc := clampF(c, f(0), last)
		lo := te.Floor(xc)
		w := te.Sub(xc, lo)
		li := idx(lo)
		return []resizeTap{
			{idx: li, w: asType(dt, te.Sub(f(1), w))},
			{idx: loopir.Bin(loopir.Min, add(li, i64(1)), sub(n, i64(1))), w: asType(dt, w)},
		}, nil
	}
	// cubic: Keys' kernel at distances 1+t, t, 1-t, 2-t; the base clamped to
	// [-3, n+2], where every tap is outside as it is past the clamp
	base := clampF(fl, f(-3), te.Add(last, f(3)))
	t := te.Sub(c, fl)
	w := []loopir.Expr{keys(a, te.Add(t, f(1))), keys(a, t), keys(a, te.Sub(f(1), t)), keys(a, te.Sub(f(2), t))}
	bi := idx(base)
	taps := make([]resizeTap, 4)
	var sum loopir.Expr
	for k := range taps {
		i := add(bi, i64(int64(k)-1))
		wk := asType(dt, w[k])
		if a.ExcludeOutside != 0 {
			wk = te.Select(inside(i, n), wk, lit(0, wk))
			sum = addOrFirst(sum, wk)
		}
		taps[k] = resizeTap{idx: injClamp(i, n), w: wk}
	}
	return taps, sum
}

func orOrFirst(acc, v loopir.Expr) loopir.Expr {
	if acc == nil {
		return v
	}
	return loopir.Bin(loopir.Or, acc, v)
}
