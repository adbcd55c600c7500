package ref

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// bindSymbols reads the value of every symbol that is a whole extent of a main input
// (x: f32[batch,seq]) from the inputs' shapes; a symbol given two values is a bad input.
func bindSymbols(params []*graph.Value, args []Value) (map[string]int64, error) {
	syms := map[string]int64{}
	for i, p := range params {
		t, ok := args[i].(*tensor.Tensor)
		if !ok || p.Type.Kind != graph.KindTensor || p.Type.UnknownRank || len(t.Shape) != len(p.Type.Shape) {
			continue
		}
		for k, d := range p.Type.Shape {
			name, ok := d.IsSym()
			if !ok {
				continue
			}
			v := int64(t.Shape[k])
			if old, seen := syms[name]; seen && old != v {
				return nil, Badf("input %q: dim %q is %d here and %d in an earlier input", p.Name, name, v, old)
			}
			syms[name] = v
		}
	}
	return syms, nil
}

// shapeExprKernel evaluates a kiln.ShapeExpr with the symbols bound from the inputs.
func shapeExprKernel(c *Ctx, n *graph.Node, _ []Value) ([]Value, error) {
	t := n.Attrs.(*graph.ShapeExprAttrs).Value
	v, ok := graph.EvalKnown(*t, c.syms)
	if !ok {
		return nil, Badf("shape expression %v uses a symbol that no input's shape binds", t)
	}
	return []Value{v}, nil
}

// failKernel stops the evaluation with a kiln.Fail's message: the branch it stands for
// cannot run on the bound input shapes.
func failKernel(_ *Ctx, n *graph.Node, _ []Value) ([]Value, error) {
	return nil, Badf("%s", n.Attrs.(*graph.FailAttrs).Message)
}
