package ref

import (
	"context"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Options tune an evaluation.
type Options struct {
	// Context cancels a long evaluation between nodes; nil means Background.
	Context context.Context
	// MaxLoopIterations bounds Loop trip counts (0: 1<<24) so that a bad model cannot spin
	// forever.
	MaxLoopIterations int64
}

// Ctx is the state of one evaluation: values bound in the current scope chain.
type Ctx struct {
	opts    Options
	kernels *[graph.NumOps]Kernel // the table (held here so that kernels can recurse)
	syms    map[string]int64      // the symbols' values, bound from the main inputs' shapes
	env     map[*graph.Value]Value
	outer   *Ctx
}

func (c *Ctx) lookup(v *graph.Value) (Value, bool) {
	for s := c; s != nil; s = s.outer {
		if x, ok := s.env[v]; ok {
			return x, true
		}
	}
	return nil, false
}

// Eval runs the module's main function. inputs are keyed by parameter name; a parameter
// with a default (initializer-backed input) may be left out. Results come in the order of
// Main.Results.
func Eval(m *graph.Module, inputs map[string]Value, opts Options) ([]Value, error) {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.MaxLoopIterations <= 0 {
		opts.MaxLoopIterations = 1 << 24
	}
	f := m.Main
	args := make([]Value, len(f.Params))
	for i, p := range f.Params {
		v, ok := inputs[p.Name]
		if !ok {
			if p.Const == nil {
				return nil, fmt.Errorf("%w: missing input %q (%v)", ErrBadInput, p.Name, p.Type)
			}
			v = p.Const
		}
		if err := checkArg(p, v); err != nil {
			return nil, err
		}
		args[i] = v
	}
	for name := range inputs {
		found := false
		for _, p := range f.Params {
			found = found || p.Name == name
		}
		if !found {
			return nil, fmt.Errorf("%w: unknown input %q", ErrBadInput, name)
		}
	}
	syms, err := bindSymbols(f.Params, args)
	if err != nil {
		return nil, err
	}
	root := &Ctx{opts: opts, kernels: &kernelTable, syms: syms}
	return root.Run(f, args)
}

// checkArg compares a runtime input with the parameter's declared type.
func checkArg(p *graph.Value, v Value) error {
	t, isTensor := v.(*tensor.Tensor)
	if p.Type.Kind != graph.KindTensor {
		if isTensor {
			return fmt.Errorf("%w: input %q: got a tensor, want %v", ErrBadInput, p.Name, p.Type)
		}
		return nil
	}
	if !isTensor {
		return fmt.Errorf("%w: input %q: got %s, want %v", ErrBadInput, p.Name, Describe(v), p.Type)
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("input %q: %w", p.Name, err)
	}
	if t.DType != p.Type.DType {
		return fmt.Errorf("%w: input %q: got %v, want %v", ErrBadInput, p.Name, t.DType, p.Type.DType)
	}
	if p.Type.UnknownRank {
		return nil
	}
	if len(t.Shape) != len(p.Type.Shape) {
		return fmt.Errorf("%w: input %q: got shape %v, want %v", ErrBadInput, p.Name, t.Shape, p.Type)
	}
	for i, d := range p.Type.Shape {
		if x, ok := d.Value(); ok && int(x) != t.Shape[i] {
			return fmt.Errorf("%w: input %q: got shape %v, want %v", ErrBadInput, p.Name, t.Shape, p.Type)
		}
	}
	return nil
}

// Run evaluates f with the given parameter values in a new scope nested in c (so a
// subgraph sees the values of its enclosing functions).
func (c *Ctx) Run(f *graph.Func, args []Value) ([]Value, error) {
	if len(args) != len(f.Params) {
		return nil, fmt.Errorf("BUG: func @%s called with %d args, has %d params", f.Name, len(args), len(f.Params))
	}
	sc := &Ctx{opts: c.opts, kernels: c.kernels, syms: c.syms, env: make(map[*graph.Value]Value, len(f.Nodes)+len(f.Params)), outer: c}
	if c.env == nil { // the root context has no scope of its own
		sc.outer = nil
	}
	for i, p := range f.Params {
		sc.env[p] = args[i]
	}
	for _, k := range f.Consts {
		sc.env[k] = k.Const
	}
	for _, n := range f.Nodes {
		if err := c.opts.Context.Err(); err != nil {
			return nil, err
		}
		if err := sc.evalNode(n); err != nil {
			return nil, err
		}
	}
	out := make([]Value, len(f.Results))
	for i, r := range f.Results {
		v, ok := sc.lookup(r)
		if !ok {
			return nil, fmt.Errorf("BUG: result %q of @%s has no value", r.Name, f.Name)
		}
		out[i] = v
	}
	return out, nil
}

func (c *Ctx) evalNode(n *graph.Node) (err error) {
	k := c.kernels[n.Op]
	if k == nil {
		return fmt.Errorf("node %v: %w", n, ErrUnsupported)
	}
	in := make([]Value, len(n.Inputs))
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		x, ok := c.lookup(v)
		if !ok {
			return fmt.Errorf("BUG: node %v: input %q has no value", n, v.Name)
		}
		in[i] = x
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("node %v: reference kernel panicked: %v", n, r)
		}
	}()
	outs, err := k(c, n, in)
	if err != nil {
		return fmt.Errorf("node %v: %w", n, err)
	}
	if len(outs) < len(n.Outputs) {
		return fmt.Errorf("BUG: node %v: kernel returned %d values for %d outputs", n, len(outs), len(n.Outputs))
	}
	for i, o := range n.Outputs {
		c.env[o] = outs[i]
	}
	return nil
}

// EvalNode evaluates one node on tensor inputs (nil: omitted) outside any graph, as
// constant folding does. Nodes with subgraphs are evaluated too, but may only read
// their own inputs.
func EvalNode(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	root := &Ctx{opts: Options{Context: context.Background(), MaxLoopIterations: 1 << 24}, kernels: &kernelTable}
	sc := &Ctx{opts: root.opts, kernels: root.kernels, env: map[*graph.Value]Value{}, outer: nil}
	for i, v := range n.Inputs {
		if v != nil && i < len(in) && in[i] != nil {
			sc.env[v] = in[i]
		}
	}
	if err := sc.evalNode(n); err != nil {
		return nil, err
	}
	out := make([]*tensor.Tensor, len(n.Outputs))
	for i, o := range n.Outputs {
		t, ok := sc.env[o].(*tensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("node %v: output %d is %s, not a tensor", n, i, Describe(sc.env[o]))
		}
		out[i] = t
	}
	return out, nil
}
