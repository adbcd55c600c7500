package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
)

// LayoutPolicy is alter-layout's policy for the CPU, consistent with Strategies: a
// convolution the tensorized strategy takes stores its output in blocks of the
// micro-kernel's width that convolution's strategy chooses (convGemm: when the output
// channels are a multiple of it) and reads its input as it is stored; depthwise and
// grouped convolutions store their output in the block their strategy computes in
// (depthwiseBlock, groupedBlock: none, no anchor) and read their input as it is stored;
// elementwise ops whose non-scalar inputs share one block and the output's shape, 2-D
// and global pooling, and concats along the channel axis accept blocked inputs.
func LayoutPolicy(t target.Target, reg *kernels.Registry) *passes.LayoutPolicy {
	return &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			if n.Op != graph.OpConv {
				return nil, 0, false
			}
			for _, grouped := range []bool{false, true} {
				if _, b, err := groupsBlock(t, n, grouped); err == nil {
					return anyBlock(n), b, b != 0
				}
			}
			g := convGemm(t, n)
			if _, err := convBlocked(n, g); err != nil {
				return nil, 0, false
			}
			out := int64(0)
			if m := n.Inputs[1].Const.Shape[0]; int64(m)%g.NR == 0 {
				out = g.NR
			}
			return anyBlock(n), out, true
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			return accepts(reg, n, in)
		},
	}
}

// anyBlock asks for every input of n as it is stored.
func anyBlock(n *graph.Node) []int64 {
	any := make([]int64, len(n.Inputs))
	for i := range any {
		any[i] = -1
	}
	return any
}

func accepts(reg *kernels.Registry, n *graph.Node, in []int64) (int64, bool) {
	if len(n.Outputs) != 1 || len(in) == 0 {
		return 0, false
	}
	if _, ok := reg.Compute(n.Op); !ok {
		return 0, false
	}
	info := n.Op.Info()
	switch {
	case n.Op == graph.OpMaxPool || n.Op == graph.OpAveragePool:
		return in[0], in[0] != 0 && kernels.BlockedPoolSupported(n)
	case n.Op == graph.OpGlobalAveragePool || n.Op == graph.OpGlobalMaxPool:
		return 0, in[0] != 0
	case n.Op == graph.OpConcat:
		a, _ := n.Attrs.(*graph.AxisAttrs)
		if a == nil || a.Axis != 1 {
			return 0, false
		}
		for _, b := range in {
			if b != in[0] || b == 0 {
				return 0, false
			}
		}
		return in[0], true
	case info != nil && (info.Pattern == graph.ElemWise || info.Pattern == graph.Broadcast):
		out := n.Outputs[0].Type
		b := int64(0)
		for i, v := range n.Inputs {
			if v == nil {
				continue
			}
			switch {
			case in[i] != 0 && (b == 0 || b == in[i]) && sameExtents(v.Type, out):
				b = in[i]
			case in[i] == 0 && allOnes(v.Type):
			default:
				return 0, false
			}
		}
		return b, b != 0
	}
	return 0, false
}

func sameExtents(a, b graph.Type) bool {
	sa, ok1 := a.ConstShape()
	sb, ok2 := b.ConstShape()
	return ok1 && ok2 && sa.Equal(sb)
}

// allOnes: a scalar or a tensor of extents 1, which broadcasts against any storage.
func allOnes(t graph.Type) bool {
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
