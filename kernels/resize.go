package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// resizeMaxTaps bounds the input elements one output element of a Resize reads (4 per
// cubic axis, 2 per linear axis): 256 is cubic over four axes.
const resizeMaxTaps = 256

func resizeComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{graph.OpResize: injTyped(computeResize)}
}

// computeResize resamples x to the sizes (input 3) or scales (input 2), which must be
// constants, as one injective computation: per resized axis the source coordinate of the
// output index (resize_axis.go), then a gather of the nearest element, or a weighted sum
// over the 2 linear or 4 cubic neighbours (indices clamped into the axis) nested over
// the axes; tf_crop_and_resize takes its roi (input 1, constant) and writes the
// extrapolation value where a coordinate falls outside the input. An axis whose extent
// and scale are unchanged is copied (it may be symbolic); every other axis is static.
// Nearest takes any element type; linear and cubic take float32 and float64.
func computeResize(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.ResizeAttrs](n)
	x := in[0].T
	r := len(x.Shape)
	if err := checkResizeAttrs(a, x.DT); err != nil {
		return nil, err
	}
	crop := a.CoordinateTransformationMode == "tf_crop_and_resize"
	given := func(i int) bool {
		return i < len(in) && in[i].Present() && (in[i].Const == nil || in[i].Const.Len() > 0)
	}
	var sizes []int64
	var scales []float64
	switch {
	case given(3):
		if in[3].Const == nil {
			return nil, Unsupported("Resize with run-time sizes")
		}
		sizes = in[3].Const.Int64s()
		if len(sizes) != r {
			return nil, Unsupported("Resize with %d sizes for rank %d", len(sizes), r)
		}
	case given(2):
		if in[2].Const == nil {
			return nil, Unsupported("Resize with run-time scales")
		}
		scales = in[2].Const.Float64s()
		if len(scales) != r {
			return nil, Unsupported("Resize with %d scales for rank %d", len(scales), r)
		}
	default:
		return nil, Unsupported("Resize without scales or sizes")
	}
	var roi []float64
	if crop {
		if !given(1) || in[1].Const == nil {
			return nil, Unsupported("Resize tf_crop_and_resize with a run-time or absent roi")
		}
		if roi = in[1].Const.Float64s(); len(roi) != 2*r {
			return nil, Unsupported("Resize roi with %d values for rank %d", len(roi), r)
		}
	}
	axes := make([]*resizeAxis, r)
	shape := make([]loopir.Expr, r)
	taps := 1
	for ax := range r {
		if sizes == nil && scales[ax] == 1 && !crop {
			axes[ax], shape[ax] = &resizeAxis{identity: true}, x.Shape[ax]
			continue
		}
		c, ok := x.Shape[ax].(*loopir.IntImm)
		if !ok {
			return nil, Unsupported("Resize of axis %d with symbolic extent %v", ax, x.Shape[ax])
		}
		inLen := c.V
		var outLen int64
		var scale float64
		if sizes != nil {
			outLen, scale = sizes[ax], float64(sizes[ax])/float64(max(inLen, 1))
		} else {
			if scales[ax] <= 0 || math.IsNaN(scales[ax]) || math.IsInf(scales[ax], 0) {
				return nil, Unsupported("Resize scale %g on axis %d", scales[ax], ax)
			}
			outLen, scale = int64(math.Floor(float64(inLen)*scales[ax])), scales[ax]
		}
		if outLen < 0 || outLen > 1<<31 {
			return nil, Unsupported("Resize of axis %d to %d", ax, outLen)
		}
		shape[ax] = i64(outLen)
		if outLen == inLen && scale == 1 && !crop {
			axes[ax] = &resizeAxis{identity: true}
			continue
		}
		if inLen == 0 && outLen > 0 {
			return nil, Unsupported("Resize of the empty axis %d to %d", ax, outLen)
		}
		var roiStart, roiEnd float64
		if crop {
			roiStart, roiEnd = roi[ax], roi[ax+r]
		}
		p, err := planResizeAxis(a, inLen, outLen, scale, roiStart, roiEnd)
		if err != nil {
			return nil, err
		}
		axes[ax] = p
		taps *= map[string]int{"nearest": 1, "linear": 2, "cubic": 4}[a.Mode]
	}
	if taps > resizeMaxTaps {
		return nil, Unsupported("Resize %s over %d axes reads %d elements per output (at most %d)", a.Mode, r, taps, resizeMaxTaps)
	}
	out := te.Compute("resize", shape, func(i []loopir.Expr) loopir.Expr {
		var outside loopir.Expr
		tp := make([][]resizeTap, r)
		for ax, p := range axes {
			if p.identity {
				tp[ax] = []resizeTap{{idx: i[ax]}}
				continue
			}
			c := p.coord(i[ax])
			if crop {
				o := loopir.Bin(loopir.Or, loopir.Bin(loopir.LT, c, i64(0)), loopir.Bin(loopir.GT, c, i64((p.in-1)<<p.k)))
				if outside == nil {
					outside = o
				} else {
					outside = loopir.Bin(loopir.Or, outside, o)
				}
			}
			tp[ax] = p.taps(a, c, x.DT)
		}
		v := resizeSum(x, tp, nil)
		if outside != nil {
			v = te.Select(outside, lit(float64(a.ExtrapolationValue), v), v)
		}
		return v
	})
	return []*te.Tensor{out}, nil
}

// checkResizeAttrs refuses modes the definition does not implement.
func checkResizeAttrs(a *graph.ResizeAttrs, dt tensor.DType) error {
	switch a.Mode {
	case "nearest":
		switch a.NearestMode {
		case "round_prefer_floor", "round_prefer_ceil", "floor", "ceil":
		default:
			return Unsupported("Resize nearest_mode %q", a.NearestMode)
		}
	case "linear", "cubic":
		if dt != tensor.Float32 && dt != tensor.Float64 {
			return Unsupported("Resize %s on %v", a.Mode, dt)
		}
	default:
		return Unsupported("Resize mode %q", a.Mode)
	}
	switch a.CoordinateTransformationMode {
	case "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize":
	default:
		return Unsupported("Resize coordinate_transformation_mode %q", a.CoordinateTransformationMode)
	}
	return nil
}

// resizeTap is one input index on an axis and its weight (nil: the only tap).
type resizeTap struct{ idx, w loopir.Expr }

// resizeSum is Σ over the taps of every axis of the product of their weights times x
// at their indices, nested axis by axis (the outer axes' weights multiply sums over the
// inner ones).
func resizeSum(x *te.Tensor, taps [][]resizeTap, idx []loopir.Expr) loopir.Expr {
	ax := len(idx)
	if ax == len(taps) {
		return x.At(idx...)
	}
	var sum loopir.Expr
	for _, t := range taps[ax] {
		v := resizeSum(x, taps, append(idx[:ax:ax], t.idx))
		if t.w != nil {
			v = te.Mul(t.w, v)
		}
		if sum == nil {
			sum = v
		} else {
			sum = te.Add(sum, v)
		}
	}
	return sum
}

// taps are the input indices and weights for the fixed-point source coordinate c, as
// decideFixed derives them.
func (ax *resizeAxis) taps(a *graph.ResizeAttrs, c loopir.Expr, dt tensor.DType) []resizeTap {
	one := int64(1) << ax.k
	last := i64(ax.in - 1)
	fl, fr := div(c, i64(one)), loopir.Bin(loopir.Mod, c, i64(one))
	frac := func(v loopir.Expr) loopir.Expr { return te.Mul(te.Cast(dt, v), loopir.Float(1/float64(one), dt)) }
	switch a.Mode {
	case "nearest":
		var up loopir.Expr
		switch a.NearestMode {
		case "round_prefer_floor":
			up = loopir.Bin(loopir.GT, fr, i64(one/2))
		case "round_prefer_ceil":
			up = loopir.Bin(loopir.GE, fr, i64(one/2))
		case "ceil":
			up = loopir.Bin(loopir.GT, fr, i64(0))
		}
		i := fl
		if up != nil {
			i = te.Select(up, add(fl, i64(1)), fl)
		}
		return []resizeTap{{idx: injClamp(i, i64(ax.in))}}
	case "linear":
		xc := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, c, i64((ax.in-1)*one)), i64(0))
		lo := div(xc, i64(one))
		f := frac(loopir.Bin(loopir.Mod, xc, i64(one)))
		return []resizeTap{
			{idx: lo, w: te.Sub(loopir.Float(1, dt), f)},
			{idx: loopir.Bin(loopir.Min, add(lo, i64(1)), last), w: f},
		}
	}
	// cubic: Keys' kernel with coefficient A at distances 1+t, t, 1-t, 2-t
	t := frac(fr)
	A := loopir.Float(float64(a.CubicCoeffA), dt)
	f := func(v float64) loopir.Expr { return loopir.Float(v, dt) }
	near := func(d loopir.Expr) loopir.Expr { // (A+2)d³ − (A+3)d² + 1
		return te.Add(te.Mul(te.Mul(te.Sub(te.Mul(te.Add(A, f(2)), d), te.Add(A, f(3))), d), d), f(1))
	}
	far := func(d loopir.Expr) loopir.Expr { // A·d³ − 5A·d² + 8A·d − 4A
		return te.Sub(te.Mul(te.Add(te.Mul(te.Sub(te.Mul(A, d), te.Mul(f(5), A)), d), te.Mul(f(8), A)), d), te.Mul(f(4), A))
	}
	w := []loopir.Expr{far(te.Add(t, f(1))), near(t), near(te.Sub(f(1), t)), far(te.Sub(f(2), t))}
	taps := make([]resizeTap, 4)
	for k := range taps {
		i := add(fl, i64(int64(k)-1))
		taps[k].idx = injClamp(i, i64(ax.in))
		if a.ExcludeOutside != 0 {
			w[k] = te.Select(inside(i, i64(ax.in)), w[k], f(0))
		}
	}
	var sum loopir.Expr
	if a.ExcludeOutside != 0 {
		sum = te.Add(te.Add(w[0], w[1]), te.Add(w[2], w[3]))
	}
	for k := range taps {
		taps[k].w = w[k]
		if sum != nil { // renormalized over the taps inside (a zero sum leaves them)
			taps[k].w = te.Select(loopir.Bin(loopir.NE, sum, f(0)), te.Div(w[k], sum), w[k])
		}
	}
	return taps
}
