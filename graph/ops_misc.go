package graph

import (
	"fmt"
	"math"
	"reflect"
)

// Resize (Upsample is rewritten to it by the loader).

// ResizeAttrs as in ONNX opset 19.
type ResizeAttrs struct {
	Antialias                    int64   `attr:"antialias"`
	Axes                         []int64 `attr:"axes"`
	CoordinateTransformationMode string  `attr:"coordinate_transformation_mode" default:"half_pixel"`
	CubicCoeffA                  float32 `attr:"cubic_coeff_a" default:"-0.75"`
	ExcludeOutside               int64   `attr:"exclude_outside"`
	ExtrapolationValue           float32 `attr:"extrapolation_value"`
	KeepAspectRatioPolicy        string  `attr:"keep_aspect_ratio_policy" default:"stretch"`
	Mode                         string  `attr:"mode" default:"nearest"`
	NearestMode                  string  `attr:"nearest_mode" default:"round_prefer_floor"`
}

func miscOps() []OpInfo {
	return []OpInfo{
		{Op: OpResize, MinIn: 1, MaxIn: 4, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[ResizeAttrs](), Pattern: Injective, Infer: inferResize},
	}
}

func inferResize(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	r := len(x.Shape)
	a, _ := n.Attrs.(*ResizeAttrs)
	if a != nil && (len(a.Axes) > 0 || a.KeepAspectRatioPolicy != "" && a.KeepAspectRatioPolicy != "stretch") {
		return inferResizeAxes(ic, n, a, x)
	}
	if n.Input(3) != nil {
		if sizes, ok := shapeValues(n, 3); ok && len(sizes) == r {
			return []Type{TensorType(x.DType, sizes...)}, nil
		}
		return []Type{TensorType(x.DType, ic.FreshShape(r)...)}, nil
	}
	sc := n.ConstInput(2)
	if sc == nil || sc.Len() != r {
		return []Type{TensorType(x.DType, ic.FreshShape(r)...)}, nil
	}
	out := make([]Dim, r)
	for i, s := range sc.Float64s() {
		v, isConst := x.Shape[i].Value()
		switch {
		case isConst:
			out[i] = Const(int64(math.Floor(float64(v) * s)))
		case s == math.Trunc(s) && s >= 1:
			out[i] = x.Shape[i].Scale(int64(s))
		default:
			out[i] = ic.Fresh()
		}
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

// inferResizeAxes infers a Resize with axes or an aspect-ratio policy: an axis not
// resized keeps its dim (symbolic too); the resized ones are static where their
// extents and the scales or sizes are constants, fresh dims otherwise.
func inferResizeAxes(ic *InferCtx, n *Node, a *ResizeAttrs, x Type) ([]Type, error) {
	r := len(x.Shape)
	resized := make([]bool, r)
	for _, ax := range ResizeAxes(a, r) {
		if ax >= 0 && ax < r {
			resized[ax] = true
		}
	}
	fresh := func() []Type {
		out := make([]Dim, r)
		for i, d := range x.Shape {
			out[i] = d
			if resized[i] {
				out[i] = ic.Fresh()
			}
		}
		return []Type{TensorType(x.DType, out...)}
	}
	in := make([]int64, r)
	for i, d := range x.Shape {
		v, ok := d.Value()
		if !ok && resized[i] {
			return fresh(), nil
		}
		in[i] = v
		if !ok {
			in[i] = 1 // an axis left as it is may be symbolic
		}
	}
	var scales []float64
	var sizes []int64
	if c := n.ConstInput(3); c != nil && c.Len() > 0 && c.DType.IsInt() {
		sizes = c.Int64s()
	} else if c := n.ConstInput(2); c != nil && c.Len() > 0 && n.Input(3) == nil {
		scales = c.Float64s()
	} else {
		return fresh(), nil
	}
	out, _, err := ResizeOutput(a, in, scales, sizes)
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	dims := make([]Dim, r)
	for i, d := range x.Shape {
		dims[i] = d
		if resized[i] {
			dims[i] = Const(out[i])
		}
	}
	return []Type{TensorType(x.DType, dims...)}, nil
}

// ResizeOutput resolves a Resize on input extents in: the output extent and the scale
// of every axis, from scales or sizes (one per axis of a.Axes when set, else per axis).
// Scales give floor(in·scale); sizes give the scale size/in, or under keep_aspect_ratio
// not_larger (not_smaller) the smallest (largest) of those scales over the resized axes
// for each of them, with the extent round-half-up(in·scale). Axes not resized keep their
// extent and scale 1.
func ResizeOutput(a *ResizeAttrs, in []int64, scales []float64, sizes []int64) (out []int64, scale []float64, err error) {
	r := len(in)
	axes := make([]int, 0, r)
	if len(a.Axes) == 0 {
		for i := range r {
			axes = append(axes, i)
		}
	}
	seen := make([]bool, r)
	for _, ax := range a.Axes {
		if ax < -int64(r) || ax >= int64(r) {
			return nil, nil, fmt.Errorf("Resize axis %d out of range for rank %d", ax, r)
		}
		if ax < 0 {
			ax += int64(r)
		}
		if seen[ax] {
			return nil, nil, fmt.Errorf("Resize axis %d repeated", ax)
		}
		seen[ax] = true
		axes = append(axes, int(ax))
	}
	out, scale = append([]int64{}, in...), make([]float64, r)
	for i := range scale {
		scale[i] = 1
	}
	switch {
	case sizes != nil:
		if len(sizes) != len(axes) {
			return nil, nil, fmt.Errorf("Resize with %d sizes for %d axes", len(sizes), len(axes))
		}
		for k, ax := range axes {
			if sizes[k] < 0 {
				return nil, nil, fmt.Errorf("Resize size %d", sizes[k])
			}
			out[ax], scale[ax] = sizes[k], float64(sizes[k])/float64(max(in[ax], 1))
		}
		policy := a.KeepAspectRatioPolicy
		if policy == "" || policy == "stretch" {
			break
		}
		if policy != "not_larger" && policy != "not_smaller" {
			return nil, nil, fmt.Errorf("Resize keep_aspect_ratio_policy %q", policy)
		}
		s := scale[axes[0]]
		for _, ax := range axes {
			if policy == "not_larger" {
				s = min(s, scale[ax])
			} else {
				s = max(s, scale[ax])
			}
		}
		for _, ax := range axes {
			scale[ax], out[ax] = s, int64(s*float64(in[ax])+0.5)
		}
	case scales != nil:
		if len(scales) != len(axes) {
			return nil, nil, fmt.Errorf("Resize with %d scales for %d axes", len(scales), len(axes))
		}
		for k, ax := range axes {
			s := scales[k]
			if !(s > 0) || math.IsInf(s, 0) {
				return nil, nil, fmt.Errorf("Resize scale %g", s)
			}
			out[ax], scale[ax] = int64(math.Floor(float64(in[ax])*s)), s
		}
	default:
		return nil, nil, fmt.Errorf("Resize needs scales or sizes")
	}
	return out, scale, nil
}

// ResizeAxes is a.Axes normalized into [0, r), or every axis when unset.
func ResizeAxes(a *ResizeAttrs, r int) []int {
	var axes []int
	for _, ax := range a.Axes {
		if ax < 0 {
			ax += int64(r)
		}
		axes = append(axes, int(ax))
	}
	if len(a.Axes) == 0 {
		for i := range r {
			axes = append(axes, i)
		}
	}
	return axes
}
