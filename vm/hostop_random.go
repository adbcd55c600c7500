package vm

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kilnrt/kiln/tensor"
)

// The random ops run on the host, on the compiled engine as on the reference evaluator
// (which calls the same functions), so a seeded op gives the same numbers on both.
//
// The generator: a PCG-DXSM stream (math/rand/v2's PCG, whose output is fixed by its
// algorithm) seeded with (the IEEE bits of the float32 seed, 0x6b696c6e2d726e67) when the
// op has a seed, so every run of the op draws the same numbers; without a seed (NaN) it
// is seeded from math/rand/v2's runtime-seeded source, a fresh stream per run. From it:
//   - a uniform u in [0, 1): the top 53 bits of the next 64-bit word times 2⁻⁵³;
//   - normals by Box–Muller, two per pair of uniforms (u₁ = 1 − u, u₂ = the next u):
//     √(−2 ln u₁)·cos 2πu₂, then √(−2 ln u₁)·sin 2πu₂;
//   - RandomUniform(Like): low + (high − low)·u per element, row-major;
//     RandomNormal(Like): mean + scale·z;
//   - Bernoulli: 1 where u < p (p the element's probability; NaN gives 0);
//   - Multinomial: per batch row, the weights exp(x − max x) and their running sums S;
//     per sample, the first class whose running sum exceeds u·S_last (the last class
//     when rounding or NaN leaves none), rows then samples in order.
// Values are drawn in float64 and rounded to the output's element type.

// Host op names of the random ops.
const (
	HostRandomNormal      = "RandomNormal"
	HostRandomUniform     = "RandomUniform"
	HostRandomNormalLike  = "RandomNormalLike"
	HostRandomUniformLike = "RandomUniformLike"
	HostBernoulli         = "Bernoulli"
	HostMultinomial       = "Multinomial"
)

// seedWord is the second word of a seeded stream's state ("kiln-rng").
const seedWord = 0x6b696c6e2d726e67

// Random is the stream of one run of a random op.
type Random struct {
	src    *rand.PCG
	spare  float64 // the second normal of the last Box–Muller pair
	spared bool
}

// NewRandom returns the stream of a random op with the given seed attribute: the same
// numbers for the same seed, a fresh stream when seed is NaN (no seed).
func NewRandom(seed float32) *Random {
	if math.IsNaN(float64(seed)) {
		return &Random{src: rand.NewPCG(rand.Uint64(), rand.Uint64())}
	}
	return &Random{src: rand.NewPCG(uint64(math.Float32bits(seed)), seedWord)}
}

// Uniform returns the next uniform number in [0, 1).
func (r *Random) Uniform() float64 {
	return float64(r.src.Uint64()>>11) * 0x1p-53
}

// Normal returns the next standard normal number.
func (r *Random) Normal() float64 {
	if r.spared {
		r.spared = false
		return r.spare
	}
	u1 := 1 - r.Uniform()
	u2 := r.Uniform()
	rad := math.Sqrt(-2 * math.Log(u1))
	s, c := math.Sincos(2 * math.Pi * u2)
	r.spare, r.spared = rad*s, true
	return rad * c
}

// RandomNormalValues draws n numbers mean + scale·z.
func RandomNormalValues(r *Random, n int, mean, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean + scale*r.Normal()
	}
	return v
}

// RandomUniformValues draws n numbers low + (high − low)·u.
func RandomUniformValues(r *Random, n int, low, high float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = low + (high-low)*r.Uniform()
	}
	return v
}

// BernoulliValues draws 1 with probability p[i], else 0.
func BernoulliValues(r *Random, p []float64) []float64 {
	v := make([]float64, len(p))
	for i, pi := range p {
		if r.Uniform() < pi {
			v[i] = 1
		}
	}
	return v
}

// MultinomialValues draws samples classes per row of logp (rows × classes
// unnormalized log-probabilities, row-major).
func MultinomialValues(r *Random, logp []float64, rows, classes, samples int) []int64 {
	out := make([]int64, 0, rows*samples)
	sums := make([]float64, classes)
	for b := 0; b < rows; b++ {
		row := logp[b*classes : (b+1)*classes]
		top := math.Inf(-1)
		for _, x := range row {
			top = max(top, x)
		}
		total := 0.0
		for k, x := range row {
			total += math.Exp(x - top)
			sums[k] = total
		}
		for range samples {
			u := r.Uniform() * total
			pick := classes - 1
			for k, s := range sums {
				if s > u {
					pick = k
					break
				}
			}
			out = append(out, int64(pick))
		}
	}
	return out
}

// randomHostOps are the host ops of the random ops.
func randomHostOps() HostOps {
	return HostOps{
		HostRandomNormal:      {Outputs: 1, Run: hostRandomDist(false, false)},
		HostRandomUniform:     {Outputs: 1, Run: hostRandomDist(true, false)},
		HostRandomNormalLike:  {Outputs: 1, Run: hostRandomDist(false, true)},
		HostRandomUniformLike: {Outputs: 1, Run: hostRandomDist(true, true)},
		HostBernoulli:         {Outputs: 1, Run: hostBernoulli},
		HostMultinomial:       {Outputs: 1, Run: hostMultinomial},
	}
}

// seedOf is a random op's seed attribute (NaN: none).
func seedOf(a HostAttrs) float32 { return float32(a.Float("seed", math.NaN())) }

// randomOut checks and counts an output of n elements of dt with its float64 scratch.
func randomOut(h *HostCtx, dt tensor.DType, shape []int64) (tensor.Shape, int, error) {
	t, err := h.Alloc(dt, shape...)
	if err != nil {
		return nil, 0, err
	}
	n := t.Len()
	if err := h.Reserve(8 * int64(n)); err != nil {
		return nil, 0, err
	}
	return t.Shape, n, nil
}

// hostRandomDist runs RandomNormal/RandomUniform and their Like forms (shape and, with
// dtype 0, element type from input 0).
func hostRandomDist(uniform, like bool) func(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	return func(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
		dt := tensor.DType(a.Int("dtype", 1))
		shape := a.Ints("shape")
		if like {
			x, err := hostInput(in, 0)
			if err != nil {
				return nil, err
			}
			if a.Int("dtype", 0) == 0 {
				dt = x.DType
			}
			shape = make([]int64, len(x.Shape))
			for i, d := range x.Shape {
				shape[i] = int64(d)
			}
		}
		if !dt.IsFloat() {
			return nil, fmt.Errorf("%w: a random %v output; the generators draw floats", ErrInput, dt)
		}
		s, n, err := randomOut(h, dt, shape)
		if err != nil {
			return nil, err
		}
		r := NewRandom(seedOf(a))
		var v []float64
		if uniform {
			v = RandomUniformValues(r, n, a.Float("low", 0), a.Float("high", 1))
		} else {
			v = RandomNormalValues(r, n, a.Float("mean", 0), a.Float("scale", 1))
		}
		return []*tensor.Tensor{tensor.FromFloat64s(dt, s, v)}, nil
	}
}

func hostBernoulli(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	p, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	if !p.DType.IsFloat() {
		return nil, fmt.Errorf("%w: Bernoulli probabilities of type %v", ErrInput, p.DType)
	}
	dt := tensor.DType(a.Int("dtype", 0))
	if dt == 0 {
		dt = p.DType
	}
	shape := make([]int64, len(p.Shape))
	for i, d := range p.Shape {
		shape[i] = int64(d)
	}
	s, _, err := randomOut(h, dt, shape)
	if err != nil {
		return nil, err
	}
	v := BernoulliValues(NewRandom(seedOf(a)), p.Float64s())
	return []*tensor.Tensor{tensor.FromFloat64s(dt, s, v)}, nil
}

func hostMultinomial(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	if len(x.Shape) != 2 || !x.DType.IsFloat() {
		return nil, fmt.Errorf("%w: Multinomial input %v%v, want [batch_size, class_size] floats", ErrInput, x.DType, x.Shape)
	}
	samples := a.Int("sample_size", 1)
	dt := tensor.DType(a.Int("dtype", int64(tensor.Int32)))
	if samples > 0 && x.Shape[1] == 0 {
		return nil, fmt.Errorf("%w: Multinomial samples from zero classes", ErrInput)
	}
	s, _, err := randomOut(h, dt, []int64{int64(x.Shape[0]), samples})
	if err != nil {
		return nil, err
	}
	v := MultinomialValues(NewRandom(seedOf(a)), x.Float64s(), x.Shape[0], x.Shape[1], int(samples))
	return []*tensor.Tensor{tensor.FromInt64s(dt, s, v)}, nil
}
