package passes

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Simplify removes nodes that do nothing: Identity, inference-mode Dropout, a Cast to
// the input's own type, a Reshape/Flatten/Squeeze/Unsqueeze to the input's own static
// shape, and x+0, x-0, x·1, x/1 with a constant that does not broadcast x to a larger
// shape. Their readers read the input instead; dce then removes the node. A node whose
// output is a result of its Func stays (the result keeps its name). Before that, the
// chain rules of simplify_chains.go rewrite each node in place (view chains, transpose
// pairs, transposes of size-1 axes).
func Simplify(_ *Context, m *graph.Module) error {
	results := resultSet(m)
	chains := newChainCtx(m)
	fwd := forwarding{}
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			fwd.rewire(n)
			chains.simplifyChain(f, n)
			src := noOpSource(n)
			if src == nil || results[n.Outputs[0]] {
				continue
			}
			fwd[n.Outputs[0]] = src
		}
	})
	return nil
}

func resultSet(m *graph.Module) map[*graph.Value]bool {
	r := map[*graph.Value]bool{}
	m.Main.Funcs(func(f *graph.Func) {
		for _, v := range f.Results {
			r[v] = true
		}
	})
	return r
}

// forwarding maps a value whose readers are to read another value instead. Passes that
// bypass nodes visit the module in Func.Funcs order and rewire each node as they reach
// it: every reader of a value comes after its definition in that order (a subgraph's
// nodes after all of its enclosing Func's), so one visit per node rewires the whole
// module, and the targets are final already (their own readers were rewired first).
type forwarding map[*graph.Value]*graph.Value

// rewire makes n read the forwarded values.
func (fw forwarding) rewire(n *graph.Node) {
	if len(fw) == 0 {
		return
	}
	for i, in := range n.Inputs {
		if v, ok := fw[in]; ok {
			n.Inputs[i] = v
		}
	}
}

// noOpSource returns the input a no-op node passes through unchanged, or nil.
func noOpSource(n *graph.Node) *graph.Value {
	if len(n.Outputs) == 0 || n.Inputs == nil || n.Input(0) == nil {
		return nil
	}
	x, out := n.Inputs[0], n.Outputs[0]
	same := x.Type.Kind == graph.KindTensor && out.Type.Kind == graph.KindTensor && x.Type.DType == out.Type.DType && sameStatic(x.Type, out.Type)
	if info := n.Op.Info(); info != nil && info.Flags&graph.View != 0 && n.Op != graph.OpIdentity && same {
		return x // a reshape to the input's own shape
	}
	switch n.Op {
	case graph.OpIdentity:
		if x.Type.Kind == out.Type.Kind {
			return x
		}
	case graph.OpDropout:
		training := n.ConstInput(2)
		if len(n.Outputs) == 1 && (n.Input(2) == nil || training != nil && training.Len() == 1 && training.Float64s()[0] == 0) {
			return x
		}
	case graph.OpCast:
		if same {
			return x
		}
	case graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv:
		c := n.ConstInput(1)
		neutral := 0.0
		if n.Op == graph.OpMul || n.Op == graph.OpDiv {
			neutral = 1
		}
		if same && c != nil && allEqual(c, neutral) {
			return x
		}
		if (n.Op == graph.OpAdd || n.Op == graph.OpMul) && n.Input(1) != nil && n.ConstInput(0) != nil {
			y := n.Inputs[1]
			if allEqual(n.ConstInput(0), neutral) && y.Type.DType == out.Type.DType && sameStatic(y.Type, out.Type) {
				return y
			}
		}
	}
	return nil
}

// sameStatic: both static with equal extents.
func sameStatic(a, b graph.Type) bool {
	sa, ok1 := a.ConstShape()
	sb, ok2 := b.ConstShape()
	return ok1 && ok2 && sa.Equal(sb)
}

func allEqual(t *tensor.Tensor, v float64) bool {
	if !t.DType.IsNumeric() {
		return false
	}
	for _, x := range t.Float64s() {
		if x != v {
			return false
		}
	}
	return true
}
