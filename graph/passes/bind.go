package passes

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// BindDims replaces the symbols of ctx.Dims in the main function's parameter types by
// their values and infers every node's output types again, in order, descending into
// subgraphs: a Loop body's loop-carried parameters take the types of the loop's initial
// values when the body keeps them unchanged (otherwise the model's declared types stay).
// A branch of an If that does not type for the bound dims keeps its remaining types
// (stub-branches, after folding, replaces it by a branch that fails when taken).
// With no dims to bind it still infers again, so that loop-carried values get the
// symbols of their initial values instead of the fresh ones a model declares.
//
// A Loop whose body changes a carried type is inferred a second time with that
// parameter's declared type, and the choice is remembered for the Loop: inferred again
// inside an enclosing Loop's second round, it starts from it. Each Loop's choices only go
// from initial to declared, so nested Loops cost a number of rounds polynomial in their
// depth (trying afresh every time would double the work per level).
func BindDims(ctx *Context, m *graph.Module) error {
	for _, p := range m.Main.Params {
		p.Type = bindType(p.Type, ctx.Dims)
	}
	b := &binder{ctx: ctx, ic: &graph.InferCtx{M: m}, env: ctx.Dims, initial: map[*graph.Node][]bool{}}
	return b.reinfer(m.Main)
}

func bindType(t graph.Type, env map[string]int64) graph.Type {
	if t.Kind != graph.KindTensor || t.UnknownRank {
		return t
	}
	shape := make([]graph.Dim, len(t.Shape))
	for i, d := range t.Shape {
		if v, ok := d.Eval(env); ok {
			shape[i] = graph.Const(v)
		} else {
			shape[i] = d
		}
	}
	t.Shape = shape
	return t
}

// binder is one BindDims run.
type binder struct {
	ctx *Context
	ic  *graph.InferCtx
	env map[string]int64
	// initial says, per Loop, which body parameters take the loop's initial types
	initial map[*graph.Node][]bool
}

// reinfer infers the types of f's nodes again from its (already updated) parameters.
func (b *binder) reinfer(f *graph.Func) error {
	for _, n := range f.Nodes {
		if err := b.ctx.stopped(); err != nil {
			return fmt.Errorf("at %v: %w", n, err)
		}
		switch a := n.Attrs.(type) {
		case *graph.LoopAttrs:
			if err := b.reinferLoop(n, a.Body); err != nil {
				return err
			}
		default:
			for _, sub := range n.Subgraphs() {
				for _, p := range sub.Params {
					p.Type = bindType(p.Type, b.env)
				}
				if err := b.reinfer(sub); err != nil {
					if n.Op == graph.OpIf && errors.Is(err, graph.ErrInfer) {
						continue // a branch that does not type for these shapes: stub-branches replaces it
					}
					return err
				}
			}
		}
		types, err := graph.InferNode(b.ic, n)
		if err != nil {
			return err
		}
		for i, t := range types {
			n.Outputs[i].Type = t
		}
	}
	return nil
}

// reinferLoop tries the loop's initial types for the carried parameters; where the body
// then returns a different type, that parameter falls back to its declared type.
func (b *binder) reinferLoop(n *graph.Node, body *graph.Func) error {
	declared := make([]graph.Type, len(body.Params))
	for i, p := range body.Params {
		declared[i] = bindType(p.Type, b.env)
	}
	carried := len(n.Inputs) - 2
	use, seen := b.initial[n]
	if !seen {
		use = make([]bool, len(body.Params))
		for i := 0; i < carried && 2+i < len(body.Params); i++ {
			use[2+i] = n.Inputs[2+i] != nil
		}
		b.initial[n] = use
	}
	for attempt := 0; attempt < 2; attempt++ {
		for i, p := range body.Params {
			p.Type = declared[i]
			if use[i] {
				p.Type = n.Inputs[i].Type
				p.Type.Known = nil
			}
		}
		if err := b.reinfer(body); err != nil {
			return err
		}
		stable := true
		for i := 0; i < carried && 1+i < len(body.Results); i++ {
			if use[2+i] && !body.Results[1+i].Type.Equal(body.Params[2+i].Type) {
				use[2+i] = false
				stable = false
			}
		}
		if stable {
			return nil
		}
	}
	return nil
}
