package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// resizeMaxTaps bounds the input elements one output element of a Resize reads (4 per
// cubic axis, 2 per linear axis, 2⌈1/scale⌉ and 4⌈1/scale⌉ with antialias): 256 is
// cubic over four axes, 1024 a 2-D antialiased linear downscale by 1/16.
const resizeMaxTaps = 1024

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
	case given(3) && in[3].Const == nil, !given(3) && given(2) && in[2].Const == nil,
		crop && given(1) && in[1].Const == nil:
		return runtimeResize(n, in, a)
	case given(3):
		sizes = in[3].Const.Int64s()
	case given(2):
		scales = in[2].Const.Float64s()
	default:
		return nil, Unsupported("Resize without scales or sizes")
	}
	resized := make([]bool, r)
	for _, ax := range graph.ResizeAxes(a, r) {
		if ax >= 0 && ax < r {
			resized[ax] = true
		}
	}
	// a symbolic extent stands in as 1: it may only be an axis left as it is
	from := make([]int64, r)
	for ax, e := range x.Shape {
		from[ax] = 1
		if c, ok := e.(*loopir.IntImm); ok {
			from[ax] = c.V
		} else if resized[ax] && (sizes != nil || crop) {
			return nil, Unsupported("Resize of axis %d with symbolic extent %v", ax, e)
		}
	}
	outExt, scale, err := graph.ResizeOutput(a, from, scales, sizes)
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	var roi []float64
	if crop {
		if !given(1) || in[1].Const == nil {
			return nil, Unsupported("Resize tf_crop_and_resize with a run-time or absent roi")
		}
		if roi, err = resizeRoi(a, in[1].Const.Float64s(), r); err != nil {
			return nil, err
		}
	}
	axes := make([]*resizeAxis, r)
	shape := make([]loopir.Expr, r)
	taps := 1
	for ax := range r {
		_, static := x.Shape[ax].(*loopir.IntImm)
		if scale[ax] == 1 && !crop && (!static || outExt[ax] == from[ax]) {
			axes[ax], shape[ax] = &resizeAxis{identity: true}, x.Shape[ax]
			continue
		}
		if !static {
			return nil, Unsupported("Resize of axis %d with symbolic extent %v", ax, x.Shape[ax])
		}
		inLen, outLen := from[ax], outExt[ax]
		if outLen > 1<<31 {
			return nil, Unsupported("Resize of axis %d to %d", ax, outLen)
		}
		shape[ax] = i64(outLen)
		if inLen == 0 && outLen > 0 {
			return nil, Unsupported("Resize of the empty axis %d to %d", ax, outLen)
		}
		var roiStart, roiEnd float64
		if crop {
			roiStart, roiEnd = roi[ax], roi[ax+r]
		}
		p, err := planResizeAxis(a, inLen, outLen, scale[ax], roiStart, roiEnd)
		if err != nil {
			return nil, err
		}
		axes[ax] = p
		taps *= p.numTaps(a)
		if taps > resizeMaxTaps {
			return nil, Unsupported("Resize %s reads more than %d elements per output", a.Mode, resizeMaxTaps)
		}
	}
	out := te.Compute("resize", shape, func(i []loopir.Expr) loopir.Expr {
		var outside, norm loopir.Expr
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
			var sum loopir.Expr
			tp[ax], sum = p.taps(a, c, x.DT)
			if sum != nil && norm == nil {
				norm = sum
			} else if sum != nil {
				norm = te.Mul(norm, sum)
			}
		}
		var v loopir.Expr
		if a.Mode == "linear" && a.Antialias == 0 {
			v = resizeCornerSum(x, tp)
		} else {
			v = resizeSum(x, tp, nil)
		}
		if norm != nil { // weights that sum to norm (not zero unless every tap is outside)
			v = te.Select(loopir.Bin(loopir.NE, norm, lit(0, norm)), te.Div(v, norm), v)
		}
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
		if a.Antialias != 0 {
			return Unsupported("Resize antialias with mode nearest")
		}
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
	case "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize":
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

// resizeCornerSum is the linear interpolation's Σ over the corners of the taps' box of
// (the product of their weights)·x at the corner: the corners in row-major order (the
// last axis fastest), each corner's weight multiplied from the last axis's outward,
// the terms added left to right. That is ONNX Runtime's bilinear and trilinear order
// (dx·dy·X11 + dx·dy·X21 + ...), so that a kernel built without contraction (whose
// result a quantizer rounds, compiler.noContract) rounds where it does: a one-ulp
// difference in an upsampled map moves the next layer's quantization, and a
// dynamically quantized segmentation network's outputs drifted by up to 0.06 that way.
func resizeCornerSum(x *te.Tensor, taps [][]resizeTap) loopir.Expr {
	var sum loopir.Expr
	corner := make([]int, len(taps))
	for {
		idx := make([]loopir.Expr, len(taps))
		var w loopir.Expr
		for ax := len(taps) - 1; ax >= 0; ax-- {
			t := taps[ax][corner[ax]]
			idx[ax] = t.idx
			if t.w != nil {
				if w == nil {
					w = t.w
				} else {
					w = te.Mul(w, t.w)
				}
			}
		}
		v := x.At(idx...)
		if w != nil {
			v = te.Mul(w, v)
		}
		sum = addOrFirst(sum, v)
		ax := len(taps) - 1
		for ; ax >= 0; ax-- {
			if corner[ax]++; corner[ax] < len(taps[ax]) {
				break
			}
			corner[ax] = 0
		}
		if ax < 0 {
			return sum
		}
	}
}

// taps are the input indices and weights for the fixed-point source coordinate c, as
// decideFixed derives them, and the sum the weights are to be divided by (nil: they sum
// to 1).
func (ax *resizeAxis) taps(a *graph.ResizeAttrs, c loopir.Expr, dt tensor.DType) ([]resizeTap, loopir.Expr) {
	if ax.antialias {
		return ax.antialiasTaps(a, c, dt)
	}
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
		return []resizeTap{{idx: injClamp(i, i64(ax.in))}}, nil
	case "linear":
		xc := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, c, i64((ax.in-1)*one)), i64(0))
		lo := div(xc, i64(one))
		f := frac(loopir.Bin(loopir.Mod, xc, i64(one)))
		// at the last element both taps read it, with weights 1/2 each as in ONNX
		// Runtime (the same value, rounded where its corner sum rounds)
		atLast := loopir.Bin(loopir.GE, lo, last)
		half := loopir.Float(0.5, dt)
		return []resizeTap{
			{idx: lo, w: te.Select(atLast, half, te.Sub(loopir.Float(1, dt), f))},
			{idx: loopir.Bin(loopir.Min, add(lo, i64(1)), last), w: te.Select(atLast, half, f)},
		}, nil
	}
	// cubic: Keys' kernel at distances 1+t, t, 1-t, 2-t
	t := frac(fr)
	w := []loopir.Expr{keys(a, te.Add(t, lit(1, t))), keys(a, t), keys(a, te.Sub(lit(1, t), t)), keys(a, te.Sub(lit(2, t), t))}
	taps := make([]resizeTap, 4)
	var sum loopir.Expr
	for k := range taps {
		i := add(fl, i64(int64(k)-1))
		taps[k] = resizeTap{idx: injClamp(i, i64(ax.in)), w: w[k]}
		if a.ExcludeOutside != 0 {
			taps[k].w = te.Select(inside(i, i64(ax.in)), w[k], lit(0, t))
			sum = addOrFirst(sum, taps[k].w)
		}
	}
	return taps, sum // renormalized over the taps inside with exclude_outside
}

// numTaps is how many input elements the axis reads per output.
func (ax *resizeAxis) numTaps(a *graph.ResizeAttrs) int {
	switch {
	case ax.identity || a.Mode == "nearest":
		return 1
	case ax.antialias:
		return int(1 - 2*ax.antialiasStart(a))
	case a.Mode == "linear":
		return 2
	}
	return 4
}

// antialiasStart is the first tap's offset from the index below the coordinate: the
// filter (half-width 1 for linear, 2 for cubic) stretched by 1/scale.
func (ax *resizeAxis) antialiasStart(a *graph.ResizeAttrs) int64 {
	support := 1.0
	if a.Mode == "cubic" {
		support = 2
	}
	return int64(math.Floor(-support/ax.scale)) + 1
}

// antialiasTaps are the taps of a downscale with the filter stretched by 1/scale: base
// the index below c (c itself minus one at an integer), ratio the rest in (0, 1], tap j
// at base+j weighted by the filter at scale·|j − ratio|; the weights are divided by
// their sum.
func (ax *resizeAxis) antialiasTaps(a *graph.ResizeAttrs, c loopir.Expr, dt tensor.DType) ([]resizeTap, loopir.Expr) {
	one := int64(1) << ax.k
	base := div(sub(c, i64(1)), i64(one))
	ratio := sub(c, mul(base, i64(one))) // in (0, one]
	start := ax.antialiasStart(a)
	var taps []resizeTap
	var sum loopir.Expr
	for j := start; j < 2-start; j++ {
		d := te.Abs(te.Mul(te.Cast(dt, sub(i64(j*one), ratio)), loopir.Float(ax.scale/float64(one), dt)))
		var w loopir.Expr
		if a.Mode == "linear" {
			w = te.MaxOf(te.Sub(loopir.Float(1, dt), d), loopir.Float(0, dt))
		} else {
			w = te.Select(loopir.Bin(loopir.LT, d, loopir.Float(2, dt)), keys(a, d), loopir.Float(0, dt))
		}
		i := add(base, i64(j))
		if a.ExcludeOutside != 0 {
			w = te.Select(inside(i, i64(ax.in)), w, loopir.Float(0, dt))
		}
		taps = append(taps, resizeTap{idx: injClamp(i, i64(ax.in)), w: w})
		sum = addOrFirst(sum, w)
	}
	return taps, sum
}

// keys is Keys' cubic convolution kernel with coefficient A at distance d in [0, 2):
// (A+2)d³ − (A+3)d² + 1 up to 1, A·d³ − 5A·d² + 8A·d − 4A beyond.
func keys(a *graph.ResizeAttrs, d loopir.Expr) loopir.Expr {
	f := func(v float64) loopir.Expr { return lit(v, d) }
	A := f(float64(a.CubicCoeffA))
	near := te.Add(te.Mul(te.Mul(te.Sub(te.Mul(te.Add(A, f(2)), d), te.Add(A, f(3))), d), d), f(1))
	far := te.Sub(te.Mul(te.Add(te.Mul(te.Sub(te.Mul(A, d), te.Mul(f(5), A)), d), te.Mul(f(8), A)), d), te.Mul(f(4), A))
	return te.Select(loopir.Bin(loopir.LE, d, f(1)), near, far)
}

func addOrFirst(sum, v loopir.Expr) loopir.Expr {
	if sum == nil {
		return v
	}
	return te.Add(sum, v)
}

// resizeRoi is the roi over every axis (starts, then ends): given over a.Axes it is
// widened with 0 and 1 on the other axes.
func resizeRoi(a *graph.ResizeAttrs, roi []float64, r int) ([]float64, error) {
	axes := graph.ResizeAxes(a, r)
	if len(roi) != 2*len(axes) {
		return nil, Unsupported("Resize roi with %d values for %d axes", len(roi), len(axes))
	}
	full := make([]float64, 2*r)
	for i := range r {
		full[r+i] = 1
	}
	for k, ax := range axes {
		full[ax], full[r+ax] = roi[k], roi[len(axes)+k]
	}
	return full, nil
}
