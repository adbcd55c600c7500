package tune

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels"
)

// space is one task's search space: its strategies with their knobs. A point is a
// strategy index and one value index per knob of that strategy.
type space struct {
	opts []engine.TuneOption
}

type point struct {
	opt  int
	vals []int // index into opts[opt].Knobs[k].Values
}

// size is the number of points.
func (s space) size() int {
	n := 0
	for _, o := range s.opts {
		c := 1
		for _, k := range o.Knobs {
			c *= len(k.Values)
		}
		n += c
	}
	return n
}

// tunable reports whether the space has more than the default's point.
func (s space) tunable() bool { return s.size() > 1 }

// candidate is the point as a candidate; the default point of the first strategy
// (the one the default rule takes) has no knobs written out.
func (s space) candidate(p point) Candidate {
	o := s.opts[p.opt]
	k := kernels.Knobs{}
	for i, kn := range o.Knobs {
		k[kn.Name] = kn.Values[p.vals[i]]
	}
	return Candidate{Strategy: o.Strategy, Knobs: k.String()}
}

// defaultPoint is the first strategy with its knobs' defaults.
func (s space) defaultPoint() point {
	return s.defaultsOf(0)
}

func (s space) defaultsOf(opt int) point {
	p := point{opt: opt}
	for _, k := range s.opts[opt].Knobs {
		i := slices.Index(k.Values, k.Default)
		p.vals = append(p.vals, max(i, 0))
	}
	return p
}

// random is a uniformly drawn strategy with uniformly drawn knob values.
func (s space) random(rng *rand.Rand) point {
	p := point{opt: rng.IntN(len(s.opts))}
	for _, k := range s.opts[p.opt].Knobs {
		p.vals = append(p.vals, rng.IntN(len(k.Values)))
	}
	return p
}

// mutate changes one decision of p: one knob to another legal value (mostly a
// neighbor), or, rarely, the strategy (with its knobs' defaults).
func (s space) mutate(p point, rng *rand.Rand) point {
	knobs := s.opts[p.opt].Knobs
	if len(s.opts) > 1 && (len(knobs) == 0 || rng.IntN(5) == 0) {
		q := s.defaultsOf((p.opt + 1 + rng.IntN(len(s.opts)-1)) % len(s.opts))
		return q
	}
	if len(knobs) == 0 {
		return p
	}
	q := point{opt: p.opt, vals: slices.Clone(p.vals)}
	k := rng.IntN(len(knobs))
	n := len(knobs[k].Values)
	if n < 2 {
		return q
	}
	if rng.IntN(3) > 0 { // a neighbor
		d := 1
		if rng.IntN(2) == 0 {
			d = -1
		}
		q.vals[k] = min(max(q.vals[k]+d, 0), n-1)
		if q.vals[k] != p.vals[k] {
			return q
		}
	}
	for q.vals[k] == p.vals[k] {
		q.vals[k] = rng.IntN(n)
	}
	return q
}

// maxKnobs is how many knob slots the cost model's encoding has.
const maxKnobs = 12

// encode is the cost model's view of a candidate of a task: the task's loop-IR
// features, the strategy's index, then per knob slot log2 of the value and whether it
// is the default. Each strategy's knobs have slots of their own (after the earlier
// strategies' knobs), so a slot means one knob of the task whatever the candidate's
// strategy; the slots of the other strategies read -1 (knobs past maxKnobs are not
// encoded).
func (s space) encode(p point, feats []float64) []float64 {
	x := make([]float64, 0, numLoopFeatures+1+2*maxKnobs)
	x = append(x, feats...)
	for len(x) < numLoopFeatures {
		x = append(x, 0)
	}
	x = append(x, float64(p.opt))
	slot := 0
	for o := range s.opts {
		for i, kn := range s.opts[o].Knobs {
			if slot >= maxKnobs {
				break
			}
			slot++
			if o != p.opt {
				x = append(x, -1, 0)
				continue
			}
			v := kn.Values[p.vals[i]]
			def := 0.0
			if v == kn.Default {
				def = 1
			}
			x = append(x, math.Log2(1+math.Abs(float64(v))), def)
		}
	}
	for ; slot < maxKnobs; slot++ {
		x = append(x, -1, 0)
	}
	return x
}
