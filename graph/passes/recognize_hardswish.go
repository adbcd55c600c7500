package passes

import "github.com/kilnrt/kiln/graph"

// matchHardSwish anchors at the Div of x·Clip(x + 3, 0, 6) / 6 or the Mul of
// x·Clip(x + 3, 0, 6)·(1/6), as Paddle and older PyTorch exports write HardSwish: the
// product's and the sum's operands in either order, the constants one-element and the
// output of x's type.
func matchHardSwish(st *matchState, n *graph.Node) *rewrite {
	if (n.Op != graph.OpDiv && n.Op != graph.OpMul) || len(n.Inputs) != 2 {
		return nil
	}
	u, c, ok := recConstOperand(n)
	if !ok || (n.Op == graph.OpDiv && (n.Inputs[1].Const == nil || !recNear(c, 6))) || (n.Op == graph.OpMul && !recNear(c, 1.0/6)) {
		return nil
	}
	prod := st.def(u, graph.OpMul)
	if prod == nil || len(prod.Inputs) != 2 {
		return nil
	}
	for k := range 2 {
		x, clip := prod.Inputs[1-k], st.def(prod.Inputs[k], graph.OpClip)
		if clip == nil || len(clip.Inputs) != 3 || !recFloat(x) || !n.Outputs[0].Type.Equal(x.Type) {
			continue
		}
		lo, okLo := recScalar(clip.Inputs[1])
		hi, okHi := recScalar(clip.Inputs[2])
		add := st.def(clip.Inputs[0], graph.OpAdd)
		if !okLo || !okHi || lo != 0 || !recNear(hi, 6) || add == nil {
			continue
		}
		if y, three, ok := recConstOperand(add); !ok || y != x || !recNear(three, 3) {
			continue
		}
		return &rewrite{nodes: []*graph.Node{add, clip, prod, n}, final: n, op: graph.OpHardSwish, inputs: []*graph.Value{x}}
	}
	return nil
}
