package vm_test

import (
	"math"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// samples is the sample count of the statistical tests: a mean's standard error is
// then σ/316, and each bound below is at least five standard errors.
const samples = 100_000

func moments(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(v))
}

// TestRandomNormalAndUniformHaveTheirMoments: 100k draws of RandomNormal(mean 2,
// scale 3) and RandomUniform[-2, 3) have the distributions' mean and variance, and the
// uniform ones stay in their interval.
func TestRandomNormalAndUniformHaveTheirMoments(t *testing.T) {
	m, v := moments(vm.RandomNormalValues(vm.NewRandom(1), samples, 2, 3))
	if math.Abs(m-2) > 0.05 || math.Abs(v-9) > 0.25 {
		t.Errorf("normal(2, 3): mean %.4f, variance %.4f; want 2 and 9", m, v)
	}
	u := vm.RandomUniformValues(vm.NewRandom(2), samples, -2, 3)
	m, v = moments(u)
	if math.Abs(m-0.5) > 0.03 || math.Abs(v-25.0/12) > 0.05 {
		t.Errorf("uniform[-2, 3): mean %.4f, variance %.4f; want 0.5 and %.4f", m, v, 25.0/12)
	}
	if lo, hi := slices.Min(u), slices.Max(u); lo < -2 || hi >= 3 {
		t.Errorf("uniform[-2, 3) drew %g .. %g", lo, hi)
	}
}

// TestBernoulliFrequenciesMatchProbabilities: over 100k draws per probability, the
// share of ones is the probability (0 and 1 exactly).
func TestBernoulliFrequenciesMatchProbabilities(t *testing.T) {
	for _, p := range []float64{0, 0.25, 0.9, 1} {
		ps := make([]float64, samples)
		for i := range ps {
			ps[i] = p
		}
		got, _ := moments(vm.BernoulliValues(vm.NewRandom(3), ps))
		if math.Abs(got-p) > 0.01 || (p == 0 || p == 1) && got != p {
			t.Errorf("p=%g: frequency %.4f", p, got)
		}
	}
}

// TestMultinomialCountsMatchProbabilities: 100k samples of unnormalized log-probabilities
// (shifted by a constant) fall in each class with its softmax probability; a class of
// log-probability −∞ is never drawn.
func TestMultinomialCountsMatchProbabilities(t *testing.T) {
	probs := []float64{0.1, 0.2, 0, 0.7}
	logp := make([]float64, 2*len(probs))
	for k, p := range probs {
		logp[k] = math.Log(p) + 5
		logp[len(probs)+k] = math.Log(probs[len(probs)-1-k]) - 40
	}
	got := vm.MultinomialValues(vm.NewRandom(4), logp, 2, len(probs), samples)
	for row := range 2 {
		counts := make([]float64, len(probs))
		for _, c := range got[row*samples : (row+1)*samples] {
			counts[c]++
		}
		for k := range probs {
			want := probs[k]
			if row == 1 {
				want = probs[len(probs)-1-k]
			}
			if f := counts[k] / samples; math.Abs(f-want) > 0.01 || want == 0 && f != 0 {
				t.Errorf("row %d class %d: frequency %.4f, probability %g", row, k, f, want)
			}
		}
	}
}

// TestSeededStreamsRepeatAndUnseededOnesDiffer: a seed fixes the numbers (another seed
// gives others); without one (NaN) every stream is fresh.
func TestSeededStreamsRepeatAndUnseededOnesDiffer(t *testing.T) {
	draw := func(seed float32) []float64 { return vm.RandomNormalValues(vm.NewRandom(seed), 8, 0, 1) }
	if a, b := draw(7), draw(7); !slices.Equal(a, b) {
		t.Errorf("seed 7 drew %v then %v", a, b)
	}
	if a, b := draw(7), draw(8); slices.Equal(a, b) {
		t.Errorf("seeds 7 and 8 drew the same %v", a)
	}
	noSeed := float32(math.NaN())
	if a, b := draw(noSeed), draw(noSeed); slices.Equal(a, b) {
		t.Errorf("two unseeded streams drew the same %v", a)
	}
}

func floats(name string, v float64) vm.HostAttr {
	return vm.HostAttr{Name: name, Kind: vm.AttrFloats, Floats: []float64{v}}
}

// TestRandomHostOpsHonourDTypeAndShape: through an executable, each random host op
// gives its output the dtype attribute's element type (or the input's) and the shape
// attribute's extents (or the input's, or [batch, sample_size]), and a seeded op draws
// the numbers the exported generator does.
func TestRandomHostOpsHonourDTypeAndShape(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		op    string
		attrs vm.HostAttrs
		in    []*tensor.Tensor
		dt    tensor.DType
		shape tensor.Shape
	}{
		{vm.HostRandomNormal, vm.HostAttrs{ints("dtype", int64(tensor.Float16)), floats("mean", 0), floats("scale", 1), floats("seed", nan), ints("shape", 2, 3)}, nil, tensor.Float16, tensor.Shape{2, 3}},
		{vm.HostRandomUniform, vm.HostAttrs{ints("dtype", int64(tensor.Float64)), floats("high", 1), floats("low", 0), floats("seed", 5), ints("shape", 4)}, nil, tensor.Float64, tensor.Shape{4}},
		{vm.HostRandomUniformLike, vm.HostAttrs{ints("dtype", 0), floats("high", 1), floats("low", 0), floats("seed", 5)}, []*tensor.Tensor{tensor.New(tensor.Float64, tensor.Shape{4})}, tensor.Float64, tensor.Shape{4}},
		{vm.HostRandomNormalLike, vm.HostAttrs{ints("dtype", int64(tensor.Float32)), floats("mean", 0), floats("scale", 1), floats("seed", nan)}, []*tensor.Tensor{tensor.New(tensor.Int64, tensor.Shape{3, 1})}, tensor.Float32, tensor.Shape{3, 1}},
		{vm.HostBernoulli, vm.HostAttrs{ints("dtype", int64(tensor.Bool)), floats("seed", nan)}, []*tensor.Tensor{f32s(tensor.Shape{5}, 0, 1, 0.5, 1, 0)}, tensor.Bool, tensor.Shape{5}},
		{vm.HostMultinomial, vm.HostAttrs{ints("dtype", int64(tensor.Int64)), ints("sample_size", 4), floats("seed", nan)}, []*tensor.Tensor{f32s(tensor.Shape{2, 3}, 0, 0, 0, 1, 2, 3)}, tensor.Int64, tensor.Shape{2, 4}},
	}
	for _, c := range cases {
		out, err := runStd(t, stdExe(c.op, c.attrs, len(c.in)), vm.Limits{}, c.in...)
		if err != nil {
			t.Errorf("%s: %v", c.op, err)
			continue
		}
		if out[0].DType != c.dt || !slices.Equal(out[0].Shape, c.shape) {
			t.Errorf("%s: %v%v, want %v%v", c.op, out[0].DType, out[0].Shape, c.dt, c.shape)
		}
		if c.op == vm.HostRandomUniform || c.op == vm.HostRandomUniformLike {
			if want := vm.RandomUniformValues(vm.NewRandom(5), 4, 0, 1); !slices.Equal(out[0].Float64s(), want) {
				t.Errorf("%s seeded 5: %v, the generator draws %v", c.op, out[0].Float64s(), want)
			}
		}
		if c.op == vm.HostBernoulli {
			if got := out[0].Data.([]bool); got[0] || !got[1] || got[4] || !got[3] {
				t.Errorf("Bernoulli of probabilities 0 and 1: %v", got)
			}
		}
	}
}
