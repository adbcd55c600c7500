package graph

import (
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// The seed of a random op is NaN when the model gives none: every run then draws a
// fresh stream (vm.NewRandom).

// RandomNormalAttrs as in ONNX.
type RandomNormalAttrs struct {
	DType int64   `attr:"dtype" default:"1"`
	Mean  float32 `attr:"mean"`
	Scale float32 `attr:"scale" default:"1"`
	Seed  float32 `attr:"seed" default:"NaN"`
	Shape []int64 `attr:"shape" required:"true" min:"0"`
}

// RandomUniformAttrs as in ONNX.
type RandomUniformAttrs struct {
	DType int64   `attr:"dtype" default:"1"`
	High  float32 `attr:"high" default:"1"`
	Low   float32 `attr:"low"`
	Seed  float32 `attr:"seed" default:"NaN"`
	Shape []int64 `attr:"shape" required:"true" min:"0"`
}

// RandomNormalLikeAttrs: DType 0 is the input's element type.
type RandomNormalLikeAttrs struct {
	DType int64   `attr:"dtype"`
	Mean  float32 `attr:"mean"`
	Scale float32 `attr:"scale" default:"1"`
	Seed  float32 `attr:"seed" default:"NaN"`
}

// RandomUniformLikeAttrs: DType 0 is the input's element type.
type RandomUniformLikeAttrs struct {
	DType int64   `attr:"dtype"`
	High  float32 `attr:"high" default:"1"`
	Low   float32 `attr:"low"`
	Seed  float32 `attr:"seed" default:"NaN"`
}

// BernoulliAttrs: DType 0 is the input's element type.
type BernoulliAttrs struct {
	DType int64   `attr:"dtype"`
	Seed  float32 `attr:"seed" default:"NaN"`
}

// MultinomialAttrs as in ONNX (int32 samples by default).
type MultinomialAttrs struct {
	DType      int64   `attr:"dtype" default:"6"`
	SampleSize int64   `attr:"sample_size" default:"1" min:"0"`
	Seed       float32 `attr:"seed" default:"NaN"`
}

// randomOps: the generators. Their values differ from run to run (unless seeded), so
// they are Stochastic: never folded, merged or compared with a reference; the compiler
// runs them as host ops (vm/hostop_random.go, which documents the generator).
func randomOps() []OpInfo {
	row := func(op Op, in int, attrs reflect.Type, infer InferFunc) OpInfo {
		return OpInfo{Op: op, MinIn: in, MaxIn: in, MinOut: 1, MaxOut: 1, Attrs: attrs, Pattern: Opaque, Flags: Stochastic, Infer: infer}
	}
	return []OpInfo{
		row(OpRandomNormal, 0, reflect.TypeFor[RandomNormalAttrs](), inferRandom),
		row(OpRandomUniform, 0, reflect.TypeFor[RandomUniformAttrs](), inferRandom),
		row(OpRandomNormalLike, 1, reflect.TypeFor[RandomNormalLikeAttrs](), inferRandomLike),
		row(OpRandomUniformLike, 1, reflect.TypeFor[RandomUniformLikeAttrs](), inferRandomLike),
		row(OpBernoulli, 1, reflect.TypeFor[BernoulliAttrs](), inferBernoulli),
		row(OpMultinomial, 1, reflect.TypeFor[MultinomialAttrs](), inferMultinomial),
	}
}

// randomFloat checks the element type of a generator's output: a float type.
func randomFloat(n *Node, dt tensor.DType) error {
	switch dt {
	case tensor.Float32, tensor.Float64, tensor.Float16:
		return nil
	}
	return Inferf(n, "dtype %v: the generator draws float16, float32 or float64", dt)
}

func inferRandom(_ *InferCtx, n *Node) ([]Type, error) {
	var dt int64
	var shape []int64
	switch a := n.Attrs.(type) {
	case *RandomNormalAttrs:
		dt, shape = a.DType, a.Shape
	case *RandomUniformAttrs:
		dt, shape = a.DType, a.Shape
	}
	if err := randomFloat(n, tensor.DType(dt)); err != nil {
		return nil, err
	}
	dims := make([]Dim, len(shape))
	for i, d := range shape {
		dims[i] = Const(d)
	}
	return []Type{TensorType(tensor.DType(dt), dims...)}, nil
}

// likeType is input 0's type with the element type dt (0: the input's).
func likeType(n *Node, dt int64) (Type, error) {
	x, err := TensorIn(n, 0)
	if err != nil {
		return Type{}, err
	}
	if dt != 0 {
		x.DType = tensor.DType(dt)
		if !x.DType.Valid() {
			return Type{}, Inferf(n, "dtype %d", dt)
		}
	}
	x.Known = nil
	return x, nil
}

func inferRandomLike(_ *InferCtx, n *Node) ([]Type, error) {
	var dt int64
	switch a := n.Attrs.(type) {
	case *RandomNormalLikeAttrs:
		dt = a.DType
	case *RandomUniformLikeAttrs:
		dt = a.DType
	}
	t, err := likeType(n, dt)
	if err != nil {
		return nil, err
	}
	if err := randomFloat(n, t.DType); err != nil {
		return nil, err
	}
	return []Type{t}, nil
}

func inferBernoulli(_ *InferCtx, n *Node) ([]Type, error) {
	if x, ok := InType(n, 0); ok && !x.DType.IsFloat() {
		return nil, Inferf(n, "probabilities of type %v, want a float type", x.DType)
	}
	t, err := likeType(n, n.Attrs.(*BernoulliAttrs).DType)
	if err != nil {
		return nil, err
	}
	if !t.DType.IsNumeric() && t.DType != tensor.Bool {
		return nil, Inferf(n, "dtype %v: samples are numbers or booleans", t.DType)
	}
	return []Type{t}, nil
}

func inferMultinomial(_ *InferCtx, n *Node) ([]Type, error) {
	a := n.Attrs.(*MultinomialAttrs)
	x, err := TensorIn(n, 0)
	if err != nil {
		return nil, err
	}
	if !x.DType.IsFloat() || x.UnknownRank || len(x.Shape) != 2 {
		return nil, Inferf(n, "input %v: want [batch_size, class_size] log-probabilities of a float type", x)
	}
	dt := tensor.DType(a.DType)
	if dt != tensor.Int32 && dt != tensor.Int64 {
		return nil, Inferf(n, "dtype %v: samples are int32 or int64", dt)
	}
	return []Type{TensorType(dt, x.Shape[0], Const(a.SampleSize))}, nil
}
