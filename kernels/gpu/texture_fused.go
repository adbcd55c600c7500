package gpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// texEpilogueStep is what one member of a convolution's fused chain is to the texture
// convolution: its epilogue step and, for a TexAdd, the input that is the residual
// operand (the other input is the previous step's result).
type texEpilogueStep struct {
	step    TexEpilogue
	operand int // TexAdd: the residual input of the member; -1 otherwise
}

// texStepOf reads one chain member that follows prev (the value it must consume, the
// previous member's or the convolution's output): Relu, Clip with constant scalar
// bounds, or Add of prev and a float32 tensor blocked by four of prev's static shape.
func texStepOf(m *graph.Node, prev *graph.Value) (texEpilogueStep, error) {
	st := texEpilogueStep{operand: -1}
	if len(m.Outputs) != 1 || len(m.Inputs) == 0 || m.Inputs[0] == nil {
		return st, fmt.Errorf("%v: not a one-output elementwise step", m)
	}
	switch m.Op {
	case graph.OpRelu:
		if m.Inputs[0] != prev {
			return st, fmt.Errorf("%v does not read the previous step", m)
		}
		st.step.Kind = TexRelu
		return st, nil
	case graph.OpClip:
		if m.Inputs[0] != prev {
			return st, fmt.Errorf("%v does not read the previous step", m)
		}
		st.step = TexEpilogue{Kind: TexClip, Lo: -maxFloat32, Hi: maxFloat32}
		for i, bound := range []*float32{&st.step.Lo, &st.step.Hi} {
			if len(m.Inputs) <= i+1 || m.Inputs[i+1] == nil {
				continue
			}
			c := m.Inputs[i+1].Const
			if c == nil || c.Len() != 1 || c.DType != tensor.Float32 {
				return st, fmt.Errorf("%v: a bound that is not a constant float32 scalar", m)
			}
			*bound = float32(c.Float64s()[0])
		}
		return st, nil
	case graph.OpAdd:
		if len(m.Inputs) != 2 || m.Inputs[1] == nil || (m.Inputs[0] == prev) == (m.Inputs[1] == prev) {
			return st, fmt.Errorf("%v: not an addition of the previous step and another tensor", m)
		}
		st.step.Kind, st.operand = TexAdd, 0
		if m.Inputs[0] == prev {
			st.operand = 1
		}
		r := m.Inputs[st.operand].Type
		if r.Block != loopir.TexelLanes || r.DType != tensor.Float32 || !sameStaticShape(r, prev.Type) {
			return st, fmt.Errorf("%v: the residual operand %v is not a float32 tensor of %v blocked by %d", m, r, prev.Type, loopir.TexelLanes)
		}
		st.step.Global = r.Scope != graph.ScopeTexture
		return st, nil
	}
	return st, fmt.Errorf("%v: no texture epilogue step for %v", m, m.Op)
}

const maxFloat32 = 3.40282346638528859811704183484516925440e+38

// texFusedConv reads a fused group that is a convolution TexConv2DOf takes followed by a
// chain of texture epilogue steps, each reading the previous one's output: the
// convolution (its epilogue set) and the members after it. The members must be the
// body's nodes in that order.
func texFusedConv(n *graph.Node) (*TexConv2D, []texEpilogueStep, error) {
	fa, ok := n.Attrs.(*graph.FusedAttrs)
	if n.Op != graph.OpFused || !ok || len(fa.Body.Nodes) < 2 || len(n.Outputs) != 1 {
		return nil, nil, fmt.Errorf("%w: %v: not a fused convolution", ErrNotTexture, n)
	}
	nodes := fa.Body.Nodes
	c, err := TexConv2DOf(nodes[0])
	if err != nil {
		return nil, nil, err
	}
	if want := inputBlock(c); nodes[0].Inputs[0].Type.Block != want {
		return nil, nil, fmt.Errorf("%w: %v: input not stored in blocks of %d", ErrNotTexture, nodes[0], want)
	}
	prev := nodes[0].Outputs[0]
	var steps []texEpilogueStep
	for _, m := range nodes[1:] {
		st, err := texStepOf(m, prev)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrNotTexture, err)
		}
		steps = append(steps, st)
		c.Epilogue = append(c.Epilogue, st.step)
		prev = m.Outputs[0]
	}
	if len(fa.Body.Results) != 1 || fa.Body.Results[0] != prev {
		return nil, nil, fmt.Errorf("%w: %v: the group's result is not its last step", ErrNotTexture, n)
	}
	c.PlainOut = prev.Type.Block == 0
	if _, err := c.Func(); err != nil {
		return nil, nil, err
	}
	return c, steps, nil
}

// texFusedReads reports whether the fused convolution n reads its input i as a texture
// of packing p: the convolution's blocked input as NCHW4c, a residual operand as
// NCHW4c. (Its weight is a constant of the body, placed there.)
func texFusedReads(n *graph.Node, input int, p graph.Packing) bool {
	c, _, err := texFusedConv(n)
	if err != nil || p != graph.PackNCHW4c {
		return false
	}
	body := n.Attrs.(*graph.FusedAttrs).Body
	if input >= len(body.Params) {
		return false
	}
	param := body.Params[input]
	ok := false
	for _, m := range body.Nodes {
		for i, v := range m.Inputs {
			if v != param {
				continue
			}
			switch {
			case m == body.Nodes[0] && i == 0 && !c.PlainX:
				ok = true
			case m != body.Nodes[0] && m.Op == graph.OpAdd:
				ok = true
			default:
				return false // the bias, a Clip bound
			}
		}
	}
	return ok
}
