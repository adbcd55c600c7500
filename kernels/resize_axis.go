package kernels

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
)

// Resize's source coordinates, planned at compile time per axis.
//
// Each mode maps output index o on an axis to a source coordinate x(o) = a·o + b (a, b
// from the scale, the extents and the roi), and every decision after it (the nearest
// index, the lower linear neighbour, the cubic base, "outside the crop") is a floor or a
// comparison of x. The kernel computes x in fixed point, X(o) = P·o + Q with D = 2^k
// fractional units, in int64: integer arithmetic gives the same answer on every target
// (C, OpenCL without doubles, CUDA), where float arithmetic would round differently from
// one compiler to the next exactly at the ties and integers the modes decide on. The plan
// computes x(o) in float64 as ONNX defines it, derives every decision from it and from
// X(o), and where they differ (a coordinate a rounding away from an integer or a tie)
// pins X(o) to a value that decides as float64 does: a Select on o in the kernel.

// resizeFracBits is the most fractional bits of X; fewer when |x| is large.
const resizeFracBits = 40

// resizeMaxFixes bounds the pinned coordinates per axis: an affine fit needs a few at
// ties; more means the fit failed and the axis is refused.
const resizeMaxFixes = 64

// resizeAxis is the plan for one axis: identity, or X(o) = P·o + Q pinned at fixes;
// antialias stretches a linear or cubic filter by 1/scale (a downscale).
type resizeAxis struct {
	identity  bool
	antialias bool
	scale     float64
	in, out   int64
	k         uint // D = 1 << k
	p, q      int64
	fixes     []resizeFix
}

type resizeFix struct{ o, x int64 }

// resizeCoord is the source coordinate of output o in float64, as ONNX defines it.
func resizeCoord(mode string, o, in, out int64, scale, roiStart, roiEnd float64) (float64, error) {
	x := float64(o)
	switch mode {
	case "half_pixel":
		return (x+0.5)/scale - 0.5, nil
	case "pytorch_half_pixel":
		if out > 1 {
			return (x+0.5)/scale - 0.5, nil
		}
		return 0, nil
	case "align_corners":
		resized := float64(in) * scale // before flooring, as ONNX defines it
		if resized == 1 {
			return 0, nil
		}
		return x * float64(in-1) / (resized - 1), nil
	case "asymmetric":
		return x / scale, nil
	case "half_pixel_symmetric":
		adjust := float64(out) / (scale * float64(in))
		return float64(in)/2*(1-adjust) + (x+0.5)/scale - 0.5, nil
	case "tf_half_pixel_for_nn":
		return (x + 0.5) / scale, nil
	case "tf_crop_and_resize":
		if out > 1 {
			return roiStart*float64(in-1) + x*(roiEnd-roiStart)*float64(in-1)/float64(out-1), nil
		}
		return 0.5 * (roiStart + roiEnd) * float64(in-1), nil
	}
	return 0, Unsupported("Resize coordinate_transformation_mode %q", mode)
}

// resizeDecision is what the kernel derives from one coordinate: outside the crop
// or not, and the nearest index, which must match exactly; linear and cubic
// interpolation are continuous in the coordinate (at an integer, lower neighbour i−1
// with weight 1 reads as neighbour i with weight 1), so for them the position itself
// must match within resizeFracTol.
type resizeDecision struct {
	idx, extrap int64
	pos         float64
}

const resizeFracTol = 1e-6

// decideFloat derives the decision from the float64 coordinate.
func decideFloat(a *graph.ResizeAttrs, aa bool, x float64, in int64) resizeDecision {
	var d resizeDecision
	if a.CoordinateTransformationMode == "tf_crop_and_resize" && (x < 0 || x > float64(in-1)) {
		d.extrap = 1
	}
	switch a.Mode {
	case "nearest":
		fl := math.Floor(x)
		i := fl
		switch {
		case a.NearestMode == "round_prefer_floor" && x-fl > 0.5,
			a.NearestMode == "round_prefer_ceil" && x-fl >= 0.5,
			a.NearestMode == "ceil" && x > fl:
			i++
		}
		d.idx = min(max(int64(i), 0), in-1)
	case "linear":
		d.pos = max(0, min(x, float64(in-1)))
		if aa {
			d.pos = x
		}
	case "cubic":
		d.pos = x
	}
	return d
}

// decideFixed derives the decision from the fixed-point coordinate X = x·2^k, as the
// kernel does (resizeAxis.taps).
func decideFixed(a *graph.ResizeAttrs, aa bool, x int64, k uint, in int64) resizeDecision {
	one := int64(1) << k
	var d resizeDecision
	if a.CoordinateTransformationMode == "tf_crop_and_resize" && (x < 0 || x > (in-1)*one) {
		d.extrap = 1
	}
	switch a.Mode {
	case "nearest":
		fl, fr := x>>k, x&(one-1) // floor division and modulo by 2^k
		i := fl
		switch {
		case a.NearestMode == "round_prefer_floor" && fr > one/2,
			a.NearestMode == "round_prefer_ceil" && fr >= one/2,
			a.NearestMode == "ceil" && fr > 0:
			i++
		}
		d.idx = min(max(i, 0), in-1)
	case "linear":
		d.pos = float64(min(max(x, 0), (in-1)*one)) / float64(one)
		if aa {
			d.pos = float64(x) / float64(one)
		}
	case "cubic":
		d.pos = float64(x) / float64(one)
	}
	return d
}

func (d resizeDecision) matches(e resizeDecision) bool {
	if d.extrap == 1 && e.extrap == 1 {
		return true // the extrapolation value, whatever the taps
	}
	return d.idx == e.idx && d.extrap == e.extrap && math.Abs(d.pos-e.pos) <= resizeFracTol*max(1, math.Abs(e.pos))
}

// planResizeAxis fits X(o) to the float64 coordinates of every output index on an axis
// of in → out, and pins the indices where the fit decides otherwise.
func planResizeAxis(a *graph.ResizeAttrs, in, out int64, scale, roiStart, roiEnd float64) (*resizeAxis, error) {
	xs := make([]float64, out)
	most := 0.0
	for o := range out {
		x, err := resizeCoord(a.CoordinateTransformationMode, o, in, out, scale, roiStart, roiEnd)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, Unsupported("Resize source coordinate %v for output %d of %d (input %d, scale %g)", x, o, out, in, scale)
		}
		xs[o], most = x, max(most, math.Abs(x))
	}
	// |X| + |P|·o stays below 2^61
	_, exp := math.Frexp(most + float64(in) + 2)
	bits := min(resizeFracBits, 61-exp)
	if bits < 16 {
		return nil, Unsupported("Resize source coordinates up to %g exceed the fixed-point range", most)
	}
	aa := a.Antialias != 0 && scale < 1 && a.Mode != "nearest"
	ax := &resizeAxis{in: in, out: out, k: uint(bits), antialias: aa, scale: scale}
	one := float64(int64(1) << ax.k)
	if out > 0 {
		ax.q = int64(math.Round(xs[0] * one))
	}
	if out > 1 {
		ax.p = int64(math.Round((xs[out-1] - xs[0]) / float64(out-1) * one))
	}
	for o, x := range xs {
		want := decideFloat(a, aa, x, in)
		fit := ax.p*int64(o) + ax.q
		if decideFixed(a, aa, fit, ax.k, in).matches(want) {
			continue
		}
		pinned, ok := pinResize(a, aa, x, want, ax.k, in)
		if !ok {
			return nil, Unsupported("Resize output %d (source coordinate %g) has no fixed-point coordinate that decides as ONNX does", o, x)
		}
		ax.fixes = append(ax.fixes, resizeFix{o: int64(o), x: pinned})
		if len(ax.fixes) > resizeMaxFixes {
			return nil, Unsupported("Resize axis %d → %d: the fixed-point fit of the coordinates fails at more than %d outputs", in, out, resizeMaxFixes)
		}
	}
	return ax, nil
}

// pinResize finds a fixed-point coordinate near x that decides as want.
func pinResize(a *graph.ResizeAttrs, aa bool, x float64, want resizeDecision, k uint, in int64) (int64, bool) {
	one := int64(1) << k
	fl := math.Floor(x)
	base := int64(fl)*one + min(max(int64(math.Round((x-fl)*float64(one))), 0), one-1)
	for _, d := range []int64{0, -1, 1, -2, 2} {
		if decideFixed(a, aa, base+d, k, in).matches(want) {
			return base + d, true
		}
	}
	return 0, false
}

// coord is X(o) in the kernel.
func (ax *resizeAxis) coord(o loopir.Expr) loopir.Expr {
	var x loopir.Expr = i64(ax.q)
	if ax.out > 1 {
		x = add(mul(o, i64(ax.p)), i64(ax.q))
	}
	for _, f := range ax.fixes {
		x = &loopir.Select{Cond: loopir.Bin(loopir.EQ, o, i64(f.o)), T: i64(f.x), F: x}
	}
	return x
}
