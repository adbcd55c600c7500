package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
)

// workloadKey is the structural key of the kernel of n and its chain that tuning
// records name: kernelKey's structure with constants by type rather than identity (the
// schedule does not depend on their values), hashed, after the anchor's op for people:
// "matmul-3f2a…". It is the same in every process and every model.
func (c *compile) workloadKey(n *graph.Node, chain []*graph.Node) string {
	key := c.chainStructure(n, chain, func(*graph.Value) string { return "=const" })
	h := sha256.Sum256([]byte(key))
	return strings.ToLower(n.Op.String()) + "-" + hex.EncodeToString(h[:10])
}

// lowerTuned builds the kernel with the tuning record of its workload, if there is one
// and p's strategies can build its choice; it returns nil (and no error) otherwise, and
// the default is built. A record is untrusted input: one that names an unknown strategy,
// knob or value is ignored, never a compile error.
func (c *compile) lowerTuned(p *place, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, workload string) (*kernels.Impl, string, error) {
	rec, ok := c.opts.Tuning.Record(workload)
	if !ok {
		return nil, "", nil
	}
	knobs, err := kernels.ParseKnobs(rec.Knobs)
	if err != nil {
		return nil, "", nil
	}
	choice := kernels.Choice{Strategy: rec.Strategy, Knobs: knobs}
	impl, err := p.strategies.LowerChoice(n, in, epi, p.t, choice)
	if errors.Is(err, kernels.ErrBadChoice) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("tuning record %s: %w", choice, err)
	}
	return impl, choice.String(), nil
}

// tuneSpace is a kernel's search space in the engine's terms.
func tuneSpace(opts []kernels.Option) []engine.TuneOption {
	out := make([]engine.TuneOption, len(opts))
	for i, o := range opts {
		out[i].Strategy = o.Strategy
		for _, k := range o.Knobs {
			out[i].Knobs = append(out[i].Knobs, engine.TuneKnob{Name: k.Name, Values: k.Values, Default: k.Default})
		}
	}
	return out
}
