package graph

import (
	"math"
	"reflect"
)

// Resize (Upsample is rewritten to it by the loader).

// ResizeAttrs as in ONNX opset 13.
type ResizeAttrs struct {
	CoordinateTransformationMode string  `attr:"coordinate_transformation_mode" default:"half_pixel"`
	CubicCoeffA                  float32 `attr:"cubic_coeff_a" default:"-0.75"`
	ExcludeOutside               int64   `attr:"exclude_outside"`
	ExtrapolationValue           float32 `attr:"extrapolation_value"`
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
