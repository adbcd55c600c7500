package passes

import (
	"github.com/kilnrt/kiln/graph"
)

// BindDims replaces the symbols of ctx.Dims in the main function's parameter types by
// their values and infers every node's output types again, in order, descending into
// subgraphs: a Loop body's loop-carried parameters take the types of the loop's initial
// values when the body keeps them unchanged (otherwise the model's declared types stay).
// With no dims to bind it still infers again, so that loop-carried values get the
// symbols of their initial values instead of the fresh ones a model declares.
func BindDims(ctx *Context, m *graph.Module) error {
	for _, p := range m.Main.Params {
		p.Type = bindType(p.Type, ctx.Dims)
	}
	return reinfer(&graph.InferCtx{M: m}, m.Main, ctx.Dims)
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

// reinfer infers the types of f's nodes again from its (already updated) parameters.
func reinfer(ic *graph.InferCtx, f *graph.Func, env map[string]int64) error {
	for _, n := range f.Nodes {
		switch a := n.Attrs.(type) {
		case *graph.LoopAttrs:
			if err := reinferLoop(ic, n, a.Body, env); err != nil {
				return err
			}
		default:
			for _, sub := range n.Subgraphs() {
				for _, p := range sub.Params {
					p.Type = bindType(p.Type, env)
				}
				if err := reinfer(ic, sub, env); err != nil {
					return err
				}
			}
		}
		types, err := graph.InferNode(ic, n)
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
func reinferLoop(ic *graph.InferCtx, n *graph.Node, body *graph.Func, env map[string]int64) error {
	declared := make([]graph.Type, len(body.Params))
	for i, p := range body.Params {
		declared[i] = bindType(p.Type, env)
	}
	carried := len(n.Inputs) - 2
	use := make([]bool, len(body.Params))
	for i := 0; i < carried && 2+i < len(body.Params); i++ {
		use[2+i] = n.Inputs[2+i] != nil
	}
	for attempt := 0; attempt < 2; attempt++ {
		for i, p := range body.Params {
			p.Type = declared[i]
			if use[i] {
				p.Type = n.Inputs[i].Type
				p.Type.Known = nil
			}
		}
		if err := reinfer(ic, body, env); err != nil {
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
