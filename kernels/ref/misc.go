package ref

// Resize: separable along each resized axis; each output coordinate maps back to the
// input through the coordinate transformation, then nearest / linear / cubic weights.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func miscKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpResize: T(miscResize),
		// a storage-order change: the value itself is unchanged
		graph.OpLayoutTransform: T(func(_ *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) { return in[:1], nil }),
		graph.OpShapeExpr:       shapeExprKernel,
		graph.OpFail:            failKernel,
	}
}

// tap is one input index and its weight; extrap marks "use the extrapolation value".
type tap struct {
	idx    int
	w      float64
	extrap bool
}

func miscResize(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ResizeAttrs](n)
	x := in[0]
	r := len(x.Shape)
	get := func(i int) *tensor.Tensor {
		if i < len(in) && in[i] != nil && in[i].Len() > 0 {
			return in[i]
		}
		return nil
	}
	axes, err := miscResizeAxes(a.Axes, r)
	if err != nil {
		return nil, err
	}
	if a.Antialias != 0 && a.Mode == "nearest" {
		return nil, Badf("Resize antialias with mode nearest")
	}
	out, scales, err := miscResizeExtents(a, x.Shape, axes, get(2), get(3))
	if err != nil {
		return nil, err
	}
	if _, err := out.CheckedNumElements(1 << 32); err != nil {
		return nil, Badf("%v", err)
	}
	var roi []float64
	if t := get(1); t != nil && a.CoordinateTransformationMode == "tf_crop_and_resize" {
		// given over the resized axes: every other axis spans [0, 1]
		if len(t.Float64s()) != 2*len(axes) {
			return nil, Badf("roi has %d values for %d axes", t.Len(), len(axes))
		}
		roi = make([]float64, 2*r)
		for i := range r {
			roi[r+i] = 1
		}
		for k, ax := range axes {
			roi[ax], roi[r+ax] = t.Float64s()[k], t.Float64s()[len(axes)+k]
		}
	}
	cur := x.Float64s()
	shape := x.Shape.Clone()
	for ax := 0; ax < r; ax++ {
		crop := a.CoordinateTransformationMode == "tf_crop_and_resize"
		if out[ax] == shape[ax] && scales[ax] == 1 && !crop {
			continue
		}
		taps, err := miscTaps(a, shape[ax], out[ax], scales[ax], roi, ax, r)
		if err != nil {
			return nil, err
		}
		cur, shape = miscApplyAxis(cur, shape, ax, out[ax], taps, float64(a.ExtrapolationValue))
	}
	return one(tensor.FromFloat64s(x.DType, shape, cur)), nil
}

// miscResizeAxes normalizes the axes attribute (every axis when empty).
func miscResizeAxes(attr []int64, r int) ([]int, error) {
	if len(attr) == 0 {
		axes := make([]int, r)
		for i := range axes {
			axes[i] = i
		}
		return axes, nil
	}
	var axes []int
	seen := map[int]bool{}
	for _, v := range attr {
		ax := int(v)
		if ax < 0 {
			ax += r
		}
		if ax < 0 || ax >= r || seen[ax] {
			return nil, Badf("Resize axes %v for rank %d", attr, r)
		}
		seen[ax] = true
		axes = append(axes, ax)
	}
	return axes, nil
}

// miscResizeExtents is the output shape and the scale of every axis: sizes (over the
// resized axes; their scales size/in, or one common scale under keep_aspect_ratio_policy
// with the extent rounded half up) or else scales (extent floor(in·scale)).
func miscResizeExtents(a *graph.ResizeAttrs, shape tensor.Shape, axes []int, scalesT, sizesT *tensor.Tensor) (tensor.Shape, []float64, error) {
	r := len(shape)
	out := shape.Clone()
	scales := make([]float64, r)
	for i := range scales {
		scales[i] = 1
	}
	switch {
	case sizesT != nil:
		sv := sizesT.Int64s()
		if len(sv) != len(axes) {
			return nil, nil, Badf("%d sizes for %d axes", len(sv), len(axes))
		}
		for k, ax := range axes {
			if sv[k] < 0 || sv[k] > 1<<32 {
				return nil, nil, Badf("size %d", sv[k])
			}
			out[ax] = int(sv[k])
			scales[ax] = float64(sv[k]) / float64(max(shape[ax], 1))
		}
		switch a.KeepAspectRatioPolicy {
		case "", "stretch":
		case "not_larger", "not_smaller":
			common := scales[axes[0]]
			for _, ax := range axes[1:] {
				if (a.KeepAspectRatioPolicy == "not_larger") == (scales[ax] < common) {
					common = scales[ax]
				}
			}
			for _, ax := range axes {
				scales[ax] = common
				out[ax] = int(common*float64(shape[ax]) + 0.5)
			}
		default:
			return nil, nil, Badf("keep_aspect_ratio_policy %q", a.KeepAspectRatioPolicy)
		}
	case scalesT != nil:
		sv := scalesT.Float64s()
		if len(sv) != len(axes) {
			return nil, nil, Badf("%d scales for %d axes", len(sv), len(axes))
		}
		for k, ax := range axes {
			if !(sv[k] > 0) || math.IsInf(sv[k], 0) || float64(shape[ax])*sv[k] > 1<<32 {
				return nil, nil, Badf("scale %g", sv[k])
			}
			scales[ax] = sv[k]
			out[ax] = int(math.Floor(float64(shape[ax]) * sv[k]))
		}
	default:
		return nil, nil, Badf("Resize needs scales or sizes")
	}
	return out, scales, nil
}

// miscOriginal maps an output coordinate to the input coordinate.
func miscOriginal(mode string, o, inLen, outLen int, scale float64, roi []float64, ax, r int) (float64, error) {
	x := float64(o)
	switch mode {
	case "half_pixel":
		return (x+0.5)/scale - 0.5, nil
	case "pytorch_half_pixel":
		if outLen > 1 {
			return (x+0.5)/scale - 0.5, nil
		}
		return 0, nil
	case "align_corners":
		// the resized length is in*scale before flooring, as ONNX defines it
		resized := float64(inLen) * scale
		if resized == 1 {
			return 0, nil
		}
		return x * float64(inLen-1) / (resized - 1), nil
	case "asymmetric":
		return x / scale, nil
	case "half_pixel_symmetric":
		// the centre of the input maps to the centre of the output when the output
		// extent was rounded from in·scale
		adjust := float64(outLen) / (scale * float64(inLen))
		return float64(inLen)/2*(1-adjust) + (x+0.5)/scale - 0.5, nil
	case "tf_half_pixel_for_nn":
		return (x + 0.5) / scale, nil
	case "tf_crop_and_resize":
		if len(roi) != 2*r {
			return 0, Badf("roi has %d values for rank %d", len(roi), r)
		}
		start, end := roi[ax], roi[ax+r]
		if outLen > 1 {
			return start*float64(inLen-1) + x*(end-start)*float64(inLen-1)/float64(outLen-1), nil
		}
		return 0.5 * (start + end) * float64(inLen-1), nil
	}
	return 0, Badf("unknown coordinate_transformation_mode %q", mode)
}

func miscTaps(a *graph.ResizeAttrs, inLen, outLen int, scale float64, roi []float64, ax, r int) ([][]tap, error) {
	taps := make([][]tap, outLen)
	clampIdx := func(i int) int { return max(0, min(i, inLen-1)) }
	for o := 0; o < outLen; o++ {
		xo, err := miscOriginal(a.CoordinateTransformationMode, o, inLen, outLen, scale, roi, ax, r)
		if err != nil {
			return nil, err
		}
		if a.CoordinateTransformationMode == "tf_crop_and_resize" && (xo < 0 || xo > float64(inLen-1)) {
			taps[o] = []tap{{extrap: true}}
			continue
		}
		if a.Antialias != 0 && scale < 1 && a.Mode != "nearest" {
			taps[o] = miscAntialiasTaps(a, xo, scale, inLen)
			continue
		}
		switch a.Mode {
		case "nearest":
			var i float64
			switch a.NearestMode {
			case "round_prefer_floor":
				if xo-math.Floor(xo) == 0.5 {
					i = math.Floor(xo)
				} else {
					i = math.Round(xo)
				}
			case "round_prefer_ceil":
				if xo-math.Floor(xo) == 0.5 {
					i = math.Ceil(xo)
				} else {
					i = math.Round(xo)
				}
			case "floor":
				i = math.Floor(xo)
			case "ceil":
				i = math.Ceil(xo)
			default:
				return nil, Badf("unknown nearest_mode %q", a.NearestMode)
			}
			taps[o] = []tap{{idx: clampIdx(int(i)), w: 1}}
		case "linear":
			xc := max(0, min(xo, float64(inLen-1)))
			lo := int(math.Floor(xc))
			hi := min(lo+1, inLen-1)
			f := xc - float64(lo)
			taps[o] = []tap{{idx: lo, w: 1 - f}, {idx: hi, w: f}}
		case "cubic":
			A := float64(a.CubicCoeffA)
			base := math.Floor(xo)
			t := xo - base
			ws := [4]float64{
				((A*(t+1)-5*A)*(t+1)+8*A)*(t+1) - 4*A,
				((A+2)*t-(A+3))*t*t + 1,
				((A+2)*(1-t)-(A+3))*(1-t)*(1-t) + 1,
				((A*(2-t)-5*A)*(2-t)+8*A)*(2-t) - 4*A,
			}
			var ts []tap
			sum := 0.0
			for k := 0; k < 4; k++ {
				i := int(base) - 1 + k
				if a.ExcludeOutside != 0 && (i < 0 || i >= inLen) {
					continue
				}
				ts = append(ts, tap{idx: clampIdx(i), w: ws[k]})
				sum += ws[k]
			}
			if a.ExcludeOutside != 0 && sum != 0 {
				for k := range ts {
					ts[k].w /= sum
				}
			}
			taps[o] = ts
		default:
			return nil, Badf("unknown mode %q", a.Mode)
		}
	}
	return taps, nil
}

// miscApplyAxis resamples v (of shape) along axis ax to outLen with the given taps.
func miscApplyAxis(v []float64, shape tensor.Shape, ax, outLen int, taps [][]tap, extrap float64) ([]float64, tensor.Shape) {
	outer, inLen, inner := shape[:ax].NumElements(), shape[ax], shape[ax+1:].NumElements()
	res := make([]float64, outer*outLen*inner)
	for o := 0; o < outer; o++ {
		for k := 0; k < outLen; k++ {
			for i := 0; i < inner; i++ {
				s := 0.0
				for _, t := range taps[k] {
					if t.extrap {
						s = extrap
						break
					}
					s += t.w * v[(o*inLen+t.idx)*inner+i]
				}
				res[(o*outLen+k)*inner+i] = s
			}
		}
	}
	ns := shape.Clone()
	ns[ax] = outLen
	return res, ns
}

// miscAntialiasTaps: linear or cubic downscaling with the filter stretched by 1/scale:
// the taps around x (base the index below x, the fraction in (0, 1]) at distances
// scaled by scale, weights normalized to sum 1 (after exclude_outside drops the taps
// outside the input).
func miscAntialiasTaps(a *graph.ResizeAttrs, x, scale float64, inLen int) []tap {
	base, ratio := math.Floor(x), x-math.Floor(x)
	if ratio == 0 {
		base, ratio = base-1, 1
	}
	support := 1.0 // the filter's half-width at scale 1
	if a.Mode == "cubic" {
		support = 2
	}
	start := int(math.Floor(-support/scale)) + 1
	A := float64(a.CubicCoeffA)
	var ts []tap
	sum := 0.0
	for j := start; j < 2-start; j++ {
		i := int(base) + j
		if a.ExcludeOutside != 0 && (i < 0 || i >= inLen) {
			continue
		}
		d := math.Abs(scale * (float64(j) - ratio))
		var w float64
		switch {
		case a.Mode == "linear":
			w = max(0, 1-d)
		case d <= 1:
			w = ((A+2)*d-(A+3))*d*d + 1
		case d < 2:
			w = ((A*d-5*A)*d+8*A)*d - 4*A
		}
		ts = append(ts, tap{idx: max(0, min(i, inLen-1)), w: w})
		sum += w
	}
	if sum != 0 {
		for k := range ts {
			ts[k].w /= sum
		}
	}
	return ts
}
