package ref

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// The random ops draw from the generator the compiled engine's host ops use
// (vm.NewRandom documents it), so a seeded op gives the same numbers on both engines;
// the reference is these functions, checked by statistics rather than values.

func randomKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpRandomNormal: T(func(n *graph.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.RandomNormalAttrs](n)
			return randomDist(tensor.DType(a.DType), shapeOf(a.Shape), a.Seed, false, float64(a.Mean), float64(a.Scale)), nil
		}),
		graph.OpRandomUniform: T(func(n *graph.Node, _ []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.RandomUniformAttrs](n)
			return randomDist(tensor.DType(a.DType), shapeOf(a.Shape), a.Seed, true, float64(a.Low), float64(a.High)), nil
		}),
		graph.OpRandomNormalLike: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.RandomNormalLikeAttrs](n)
			return randomDist(likeDType(a.DType, in[0]), in[0].Shape, a.Seed, false, float64(a.Mean), float64(a.Scale)), nil
		}),
		graph.OpRandomUniformLike: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.RandomUniformLikeAttrs](n)
			return randomDist(likeDType(a.DType, in[0]), in[0].Shape, a.Seed, true, float64(a.Low), float64(a.High)), nil
		}),
		graph.OpBernoulli: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.BernoulliAttrs](n)
			v := vm.BernoulliValues(vm.NewRandom(a.Seed), in[0].Float64s())
			return []*tensor.Tensor{tensor.FromFloat64s(likeDType(a.DType, in[0]), in[0].Shape.Clone(), v)}, nil
		}),
		graph.OpMultinomial: T(func(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			a := attrs[graph.MultinomialAttrs](n)
			x := in[0]
			if len(x.Shape) != 2 || !x.DType.IsFloat() {
				return nil, Badf("Multinomial input %v%v, want [batch_size, class_size] floats", x.DType, x.Shape)
			}
			if a.SampleSize > 0 && x.Shape[1] == 0 {
				return nil, Badf("Multinomial samples from zero classes")
			}
			v := vm.MultinomialValues(vm.NewRandom(a.Seed), x.Float64s(), x.Shape[0], x.Shape[1], int(a.SampleSize))
			return []*tensor.Tensor{tensor.FromInt64s(tensor.DType(a.DType), tensor.Shape{x.Shape[0], int(a.SampleSize)}, v)}, nil
		}),
	}
}

// likeDType is dtype, or x's element type when dtype is 0.
func likeDType(dtype int64, x *tensor.Tensor) tensor.DType {
	if dtype == 0 {
		return x.DType
	}
	return tensor.DType(dtype)
}

func shapeOf(dims []int64) tensor.Shape {
	s := make(tensor.Shape, len(dims))
	for i, d := range dims {
		s[i] = int(d)
	}
	return s
}

func randomDist(dt tensor.DType, shape tensor.Shape, seed float32, uniform bool, a, b float64) []*tensor.Tensor {
	r := vm.NewRandom(seed)
	var v []float64
	if uniform {
		v = vm.RandomUniformValues(r, shape.NumElements(), a, b)
	} else {
		v = vm.RandomNormalValues(r, shape.NumElements(), a, b)
	}
	return []*tensor.Tensor{tensor.FromFloat64s(dt, shape.Clone(), v)}
}
