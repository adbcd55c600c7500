package kernels

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// ErrNotApplicable: a strategy does not fit this node (layout, dtype, attribute); the
// next strategy is tried.
var ErrNotApplicable = errors.New("strategy not applicable")

// Impl is a node lowered for one target: a scheduled loop function (parameters: inputs,
// then outputs in node output order) and where each input parameter comes from.
type Impl struct {
	Strategy string
	Func     *loopir.PrimFunc
	Trace    *schedule.Trace
	Params   []Param // one per input parameter of Func, in order
}

// Param says which node input feeds a kernel parameter. Prepack, when set, rewrites a
// constant input on the host before the kernel reads it (weights in a blocked layout);
// the strategy only sets it for inputs that are constants. Layout names the rewrite for
// reports and for sharing one packed copy between nodes.
type Param struct {
	// Node is 0 for the node being lowered, k+1 for its epilogue k (a fused chain).
	Node    int
	Input   int
	Prepack func(*tensor.Tensor) (*tensor.Tensor, error)
	Layout  string
}

// Strategy is one way to implement an op on a target. Build wraps ErrNotApplicable when
// it does not fit the node.
type Strategy struct {
	Name  string
	Build func(n *graph.Node, in []Input, t target.Target) (*Impl, error)
	// Fused, when set, builds n with elementwise epilogues inside its kernel (the
	// Impl's output is the last epilogue's).
	Fused func(n *graph.Node, in []Input, epi []Epilogue, t target.Target) (*Impl, error)
	// Knobs are the strategy's tunable decisions (none: it has one schedule); Tuned
	// builds n (with epilogues when epi is not empty) under an assignment of every
	// knob, Resolve'd against Knobs. The defaults build what Build and Fused build.
	Knobs []Knob
	Tuned func(n *graph.Node, in []Input, epi []Epilogue, t target.Target, k Knobs) (*Impl, error)
}

// Strategies is one target's strategy table: per op, candidates in order of preference,
// then a fallback for every op that has a compute definition.
type Strategies struct {
	table    [graph.NumOps][]Strategy
	fallback Strategy
}

// NewStrategies builds a table from per-op lists and a fallback.
func NewStrategies(fallback Strategy, lists map[graph.Op][]Strategy) *Strategies {
	s := &Strategies{fallback: fallback}
	for op, l := range lists {
		s.table[op] = l
	}
	return s
}

// First is a copy of the table with the given strategies tried before every op's
// own, in order (a target's optional path, such as textures, ahead of its rules).
func (s *Strategies) First(first ...Strategy) *Strategies {
	out := &Strategies{fallback: s.fallback}
	for op, l := range s.table {
		out.table[op] = append(append([]Strategy{}, first...), l...)
	}
	return out
}

// Lower implements n with the first strategy that applies.
func (s *Strategies) Lower(n *graph.Node, in []Input, t target.Target) (*Impl, error) {
	for _, st := range append(append([]Strategy{}, s.table[n.Op]...), s.fallback) {
		impl, err := st.Build(n, in, t)
		if errors.Is(err, ErrNotApplicable) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", st.Name, err)
		}
		impl.Strategy = st.Name
		return impl, nil
	}
	return nil, fmt.Errorf("%v: %w: no strategy applies", n, ErrNoKernel)
}

// LowerFused implements n followed by the epilogues in one kernel with the first
// strategy that can (ErrNotApplicable when none can: lower the chain node by node).
func (s *Strategies) LowerFused(n *graph.Node, in []Input, epi []Epilogue, t target.Target) (*Impl, error) {
	for _, st := range append(append([]Strategy{}, s.table[n.Op]...), s.fallback) {
		if st.Fused == nil {
			if _, err := st.Build(n, in, t); err == nil {
				break // the strategy that would take n cannot fuse
			}
			continue
		}
		impl, err := st.Fused(n, in, epi, t)
		if errors.Is(err, ErrNotApplicable) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", st.Name, err)
		}
		impl.Strategy = st.Name + "+epilogue"
		return impl, nil
	}
	return nil, fmt.Errorf("%w: no strategy fuses %v with %d epilogues", ErrNotApplicable, n, len(epi))
}

// Generic lowers a node through its compute definition and a schedule rule: the
// parameters are the inputs the outputs read, in input order.
func Generic(reg *Registry, name string, n *graph.Node, in []Input, rule func(*schedule.Schedule) error) (*Impl, error) {
	return GenericFused(reg, name, n, in, nil, rule)
}

// KernelParams are the parameters of a kernel computing outs, in order: the node's inputs
// the definition reads (fed by position), then the epilogues' operands it reads (fed as
// efeeds says). A placeholder that is neither is a broken definition (BUG error).
func KernelParams(n *graph.Node, outs []*te.Tensor, in []Input, eparams []*te.Tensor, efeeds []Param) ([]*te.Tensor, []Param, error) {
	used := map[*te.Tensor]bool{}
	for _, t := range te.Inputs(outs...) {
		used[t] = true
	}
	var params []*te.Tensor
	var feeds []Param
	for i, x := range in {
		if x.T != nil && used[x.T] {
			params = append(params, x.T)
			feeds = append(feeds, Param{Input: i})
			delete(used, x.T)
		}
	}
	for i, p := range eparams {
		if used[p] {
			params = append(params, p)
			feeds = append(feeds, efeeds[i])
			delete(used, p)
		}
	}
	if len(used) > 0 {
		return nil, nil, fmt.Errorf("BUG: %v: the definition reads a placeholder that is not among its inputs", n)
	}
	return params, feeds, nil
}

// GenericFused is Generic with elementwise epilogues composed onto the node's single
// output.
func GenericFused(reg *Registry, name string, n *graph.Node, in []Input, epi []Epilogue, rule func(*schedule.Schedule) error) (*Impl, error) {
	outs, err := reg.Build(n, in)
	if err != nil {
		return nil, err
	}
	var eparams []*te.Tensor
	var efeeds []Param
	if len(epi) > 0 {
		if len(outs) != 1 {
			return nil, fmt.Errorf("%w: %v has %d outputs", ErrNotApplicable, n, len(outs))
		}
		if outs[0], eparams, efeeds, err = ApplyEpilogues(reg, outs[0], epi); err != nil {
			return nil, err
		}
	}
	last := n
	if len(epi) > 0 {
		last = epi[len(epi)-1].Node
	}
	for i, o := range outs {
		// a definition of the plain layout stored into a blocked value would pass the
		// byte count and write the channels in the wrong order (the orders agree only
		// when H·W is 1)
		if i < len(last.Outputs) && last.Outputs[i].Type.Block != 0 && len(o.Shape) != 5 && !singlePixel(last.Outputs[i].Type) {
			return nil, fmt.Errorf("%w: %v: the definition computes a plain %d-D result, the graph stores it in channel blocks of %d",
				ErrNotApplicable, last, len(o.Shape), last.Outputs[i].Type.Block)
		}
	}
	params, feeds, err := KernelParams(n, outs, in, eparams, efeeds)
	if err != nil {
		return nil, err
	}
	f, err := te.Lower(name, params, outs)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	s := schedule.New(f)
	if rule != nil {
		if err := rule(s); err != nil {
			return nil, fmt.Errorf("%v: schedule: %w", n, err)
		}
	}
	return &Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// singlePixel reports a 4-D type whose H and W are both 1: its blocked and plain
// orders are the same.
func singlePixel(t graph.Type) bool {
	s, ok := t.ConstShape()
	return ok && len(s) == 4 && s[2] == 1 && s[3] == 1
}
