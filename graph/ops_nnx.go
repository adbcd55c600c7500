package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Normalizations, softmax family and dropout.

// SoftmaxAttrs is shared by Softmax, LogSoftmax and Hardmax (opset-13 semantics).
type SoftmaxAttrs struct {
	Axis int64 `attr:"axis" default:"-1"`
}

// LayerNormAttrs as in ONNX.
type LayerNormAttrs struct {
	Axis      int64   `attr:"axis" default:"-1"`
	Epsilon   float32 `attr:"epsilon" default:"1e-05"`
	StashType int64   `attr:"stash_type" default:"1"`
}

// BatchNormAttrs as in ONNX (opset 15).
type BatchNormAttrs struct {
	Epsilon      float32 `attr:"epsilon" default:"1e-05"`
	Momentum     float32 `attr:"momentum" default:"0.9"`
	TrainingMode int64   `attr:"training_mode"`
}

// EpsilonAttrs is for InstanceNormalization.
type EpsilonAttrs struct {
	Epsilon float32 `attr:"epsilon" default:"1e-05"`
}

// GroupNormAttrs as in ONNX GroupNormalization-21: scale and bias hold one value per
// channel (the loader spreads GroupNormalization-18's per-group values over their
// groups' channels), and the first stage (the statistics and the normalized values) is
// computed in StashType, a tensor.DType number; the scale and bias apply in X's type.
type GroupNormAttrs struct {
	Epsilon   float32 `attr:"epsilon" default:"1e-05"`
	NumGroups int64   `attr:"num_groups" required:"true" min:"1"`
	StashType int64   `attr:"stash_type" default:"1"`
}

// LRNAttrs as in ONNX.
type LRNAttrs struct {
	Alpha float32 `attr:"alpha" default:"0.0001"`
	Beta  float32 `attr:"beta" default:"0.75"`
	Bias  float32 `attr:"bias" default:"1"`
	Size  int64   `attr:"size" required:"true" min:"1"`
}

// MVNAttrs as in ONNX.
type MVNAttrs struct {
	Axes []int64 `attr:"axes"`
}

// LpNormAttrs as in ONNX.
type LpNormAttrs struct {
	Axis int64 `attr:"axis" default:"-1"`
	P    int64 `attr:"p" default:"2"`
}

// DropoutAttrs as in ONNX (ratio and training_mode are inputs).
type DropoutAttrs struct {
	Seed int64 `attr:"seed"`
}

func nnxOps() []OpInfo {
	softmax := func(op Op) OpInfo {
		return OpInfo{Op: op, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[SoftmaxAttrs](), Pattern: Opaque, Infer: SameAs(0)}
	}
	return []OpInfo{
		softmax(OpSoftmax), softmax(OpLogSoftmax), softmax(OpHardmax),
		{Op: OpLayerNormalization, MinIn: 2, MaxIn: 3, MinOut: 1, MaxOut: 3, Attrs: reflect.TypeFor[LayerNormAttrs](), Pattern: Opaque, Infer: inferLayerNorm},
		{Op: OpBatchNormalization, MinIn: 5, MaxIn: 5, MinOut: 1, MaxOut: 3, Attrs: reflect.TypeFor[BatchNormAttrs](), Pattern: Opaque, Infer: inferBatchNorm},
		{Op: OpInstanceNormalization, MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[EpsilonAttrs](), Pattern: Opaque, Infer: SameAs(0)},
		{Op: OpGroupNormalization, MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[GroupNormAttrs](), Pattern: Opaque, Infer: inferGroupNorm},
		{Op: OpLRN, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[LRNAttrs](), Pattern: Opaque, Infer: SameAs(0)},
		{Op: OpMeanVarianceNormalization, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[MVNAttrs](), Pattern: Opaque, Infer: SameAs(0)},
		{Op: OpLpNormalization, MinIn: 1, MaxIn: 1, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[LpNormAttrs](), Pattern: Opaque, Infer: SameAs(0)},
		{Op: OpDropout, MinIn: 1, MaxIn: 3, MinOut: 1, MaxOut: 2, Attrs: reflect.TypeFor[DropoutAttrs](), Pattern: ElemWise, Infer: inferDropout},
	}
}

func inferLayerNorm(_ *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	out := []Type{x, unknownRank(tensor.Float32)[0], unknownRank(tensor.Float32)[0]}
	out[0].Known = nil
	if !ok {
		return out, nil
	}
	ax, err := NormAxis(n, n.Attrs.(*LayerNormAttrs).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	stat := append([]Dim{}, x.Shape[:ax]...)
	for range x.Shape[ax:] {
		stat = append(stat, Const(1))
	}
	out[1] = TensorType(tensor.Float32, stat...)
	out[2] = out[1]
	return out, nil
}

// inferGroupNorm checks X (N×C×D1…Dn, floating point, C divisible by num_groups where
// it is static), the per-channel scale and bias, and stash_type.
func inferGroupNorm(_ *InferCtx, n *Node) ([]Type, error) {
	a := n.Attrs.(*GroupNormAttrs)
	if st := tensor.DType(a.StashType); !st.Valid() || !st.IsFloat() {
		return nil, Inferf(n, "stash_type %d is not a floating-point type", a.StashType)
	}
	x, ok, err := ranked(n, 0)
	if err != nil {
		return nil, err
	}
	x.Known = nil
	if x.DType != tensor.Undefined && !x.DType.IsFloat() {
		return nil, Inferf(n, "X is %v, want a floating-point type", x.DType)
	}
	if !ok {
		return []Type{x}, nil
	}
	if len(x.Shape) < 2 {
		return nil, Inferf(n, "X %v: want N×C×D1…Dn", x)
	}
	c, static := x.Shape[1].Value()
	if static && c%a.NumGroups != 0 {
		return nil, Inferf(n, "%d channels are not divisible by num_groups=%d", c, a.NumGroups)
	}
	for i, what := range [...]string{"scale", "bias"} {
		p, ok, err := ranked(n, 1+i)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if len(p.Shape) != 1 {
			return nil, Inferf(n, "%s %v: want one value per channel", what, p)
		}
		if v, ok := p.Shape[0].Value(); ok && static && v != c {
			return nil, Inferf(n, "%s has %d values for %d channels (one per channel)", what, v, c)
		}
	}
	return []Type{x}, nil
}

func inferBatchNorm(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	mean, err := TensorIn(n, 3)
	if err != nil {
		return nil, err
	}
	x.Known, mean.Known = nil, nil
	return []Type{x, mean, mean}, nil
}

func inferDropout(_ *InferCtx, n *Node) ([]Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	x.Known = nil
	mask := x
	mask.DType = tensor.Bool
	return []Type{x, mask}, nil
}
