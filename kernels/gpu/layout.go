package gpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TextureLayoutPolicy is alter-layout's policy for OpenCL with textures on (off by
// default: the OpenCL backend has no layout policy otherwise), consistent with the
// texture kernels: a convolution TexConv2DOf takes reads its input and stores its
// output in blocks of 4 channels (NCHW4c, one texel per block); elementwise and
// broadcasting ops whose non-scalar inputs all have the output's extents and blocks of
// 4 keep blocks of 4 (ScheduleTextureInjective), and so do poolings and channel
// concatenations of blocked inputs (TexPool2D, TexConcat). Every other node reads plain tensors
// (alter-layout inserts the layout transforms).
func TextureLayoutPolicy(reg *kernels.Registry) *passes.LayoutPolicy {
	return &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			c, err := TexConv2DOf(n)
			if err != nil {
				return nil, 0, false
			}
			in := make([]int64, len(n.Inputs))
			for i := range in {
				in[i] = -1
			}
			in[0] = loopir.TexelLanes
			if c.PlainX {
				in[0] = 0
			}
			return in, loopir.TexelLanes, true
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			if texTakesBlocked(n, in) {
				if n.Op == graph.OpGlobalAveragePool || n.Op == graph.OpGlobalMaxPool {
					return 0, true // a plain [N, C, 1, 1]: what a classifier's Flatten reads
				}
				return loopir.TexelLanes, true
			}
			return texAccepts(reg, n, in)
		},
	}
}

// texTakesBlocked reports whether n is a pooling (TexPool2DOf) or a channel
// concatenation (TexConcatOf) with every input in blocks of 4: it keeps them blocked.
func texTakesBlocked(n *graph.Node, in []int64) bool {
	if len(in) == 0 || len(in) != len(n.Inputs) {
		return false
	}
	for _, b := range in {
		if b != loopir.TexelLanes {
			return false
		}
	}
	switch n.Op {
	case graph.OpConcat:
		_, err := TexConcatOf(n)
		return err == nil
	case graph.OpMaxPool, graph.OpAveragePool, graph.OpGlobalMaxPool, graph.OpGlobalAveragePool:
		_, err := TexPool2DOf(n)
		return err == nil
	}
	return false
}

func texAccepts(reg *kernels.Registry, n *graph.Node, in []int64) (int64, bool) {
	if len(n.Outputs) != 1 || len(in) == 0 {
		return 0, false
	}
	if _, ok := reg.Compute(n.Op); !ok {
		return 0, false
	}
	info := n.Op.Info()
	if info == nil || (info.Pattern != graph.ElemWise && info.Pattern != graph.Broadcast) {
		return 0, false
	}
	out := n.Outputs[0].Type
	if out.DType != tensor.Float32 {
		return 0, false
	}
	blocked := false
	for i, v := range n.Inputs {
		if v == nil {
			continue
		}
		switch {
		case in[i] == loopir.TexelLanes && sameStaticShape(v.Type, out):
			blocked = true
		case in[i] == 0 && allOnesShape(v.Type):
		default:
			return 0, false
		}
	}
	return loopir.TexelLanes, blocked
}

func sameStaticShape(a, b graph.Type) bool {
	sa, ok1 := a.ConstShape()
	sb, ok2 := b.ConstShape()
	return ok1 && ok2 && sa.Equal(sb)
}

// allOnesShape: a scalar or a tensor of extents 1, which broadcasts against any storage.
func allOnesShape(t graph.Type) bool {
	s, ok := t.ConstShape()
	if !ok {
		return false
	}
	for _, d := range s {
		if d != 1 {
			return false
		}
	}
	return true
}

// TexConv2DOf is the texture convolution of Conv node n: float32, static 4-D input and
// output, a constant weight, explicit pads (auto_pad NOTSET), output channels a
// multiple of 4, group 1 (input channels not a multiple of 4: PlainX) or depthwise
// (group = input = output channels); anything else is ErrNotTexture naming the node.
// Its output is plain (PlainOut) unless n's output type is stored in blocks.
func TexConv2DOf(n *graph.Node) (*TexConv2D, error) {
	refuse := func(format string, args ...any) (*TexConv2D, error) {
		return nil, fmt.Errorf("%w: %v: %s", ErrNotTexture, n, fmt.Sprintf(format, args...))
	}
	a, ok := n.Attrs.(*graph.ConvAttrs)
	if n.Op != graph.OpConv || !ok || len(n.Inputs) < 2 || len(n.Outputs) != 1 {
		return refuse("not a convolution")
	}
	if a.AutoPad != "" && a.AutoPad != "NOTSET" {
		return refuse("auto_pad %q", a.AutoPad)
	}
	xs, ok := n.Inputs[0].Type.ConstShape()
	if !ok || len(xs) != 4 || n.Inputs[0].Type.DType != tensor.Float32 {
		return refuse("input %v is not a static 4-D float32 tensor", n.Inputs[0].Type)
	}
	w := n.Inputs[1].Const
	if w == nil || len(w.Shape) != 4 || w.DType != tensor.Float32 {
		return refuse("the weight is not a constant 4-D float32 tensor")
	}
	c := &TexConv2D{Name: kernels.KernelName(n),
		N: int64(xs[0]), C: int64(xs[1]), H: int64(xs[2]), W: int64(xs[3]),
		M: int64(w.Shape[0]), KH: int64(w.Shape[2]), KW: int64(w.Shape[3]),
		Strides: [2]int64{1, 1}, Dilations: [2]int64{1, 1}, Block: DefaultBlock,
		Bias: len(n.Inputs) > 2 && n.Inputs[2] != nil, PlainOut: n.Outputs[0].Type.Block == 0}
	switch {
	case a.Group == 1 && int64(w.Shape[1]) == c.C:
		c.PlainX = c.C%loopir.TexelLanes != 0
	case a.Group == c.C && a.Group == c.M && w.Shape[1] == 1:
		c.Depthwise = true
	default:
		return refuse("group %d with weight %v over %d channels", a.Group, w.Shape, c.C)
	}
	if len(a.Strides) == 2 {
		c.Strides = [2]int64{a.Strides[0], a.Strides[1]}
	}
	if len(a.Dilations) == 2 {
		c.Dilations = [2]int64{a.Dilations[0], a.Dilations[1]}
	}
	if len(a.Pads) == 4 {
		copy(c.Pads[:], a.Pads)
	} else if len(a.Pads) != 0 {
		return refuse("%d pads", len(a.Pads))
	}
	if _, err := c.Func(); err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	return c, nil
}
