package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
)

// LayoutPolicy is alter-layout's policy for the CPU, consistent with Strategies: a
// convolution of static shapes the tensorized strategy takes stores its output in
// blocks of the micro-kernel's width that convolution's strategy chooses (convGemm:
// when the output channels are a multiple of it; else, when they are a multiple of one
// vector, in blocks of one vector, repacked from the tiles: ConvBlockedAttrs.OutBlock)
// and reads its input as it is stored (a QLinearConv the blocked integer convolution
// takes likewise, in blocks of its integer micro-kernel: integerAnchor); depthwise and grouped convolutions store their output in the block their strategy computes in
// (depthwiseBlock, groupedBlock: none, no anchor) and read their input as it is stored;
// elementwise ops whose inputs of the output's shape share one block (their other inputs
// broadcasting onto it: scalars, per-channel scales), 2-D and global pooling (a global
// pool's output blocked where a reader takes it so), Resize of H and W, and concats
// along the channel axis accept blocked inputs.
func LayoutPolicy(t target.Target, reg *kernels.Registry) *passes.LayoutPolicy {
	return &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			if out, ok := integerAnchor(t, n); ok {
				return anyBlock(n), out, true
			}
			if n.Op != graph.OpConv || !staticConv(n) {
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
			switch m, lanes := int64(n.Inputs[1].Const.Shape[0]), channelMultiple(t); {
			case m%g.NR == 0:
				out = g.NR
			case lanes != 0 && m%lanes == 0 && g.NR%lanes == 0:
				out = lanes
			}
			return anyBlock(n), out, true
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			return accepts(reg, n, in)
		},
		PlainOutput: func(n *graph.Node, in []int64) bool {
			return (n.Op == graph.OpGlobalAveragePool || n.Op == graph.OpGlobalMaxPool) && len(in) > 0 && in[0] != 0
		},
		ChannelMultiple: channelMultiple(t),
	}
}

// staticConv reports whether a convolution's data and result have static shapes: the
// blocked strategies need them, and the plain definition takes a symbolic batch (Mask
// R-CNN's heads convolve one map per region of interest).
func staticConv(n *graph.Node) bool {
	return len(n.Inputs) > 0 && n.Inputs[0] != nil && n.Inputs[0].Type.IsStatic() && n.Outputs[0].Type.IsStatic()
}

// channelMultiple is the channel count pad-channels rounds regions up to on t: one
// vector of at least 8 lanes (AVX-512's 16, AVX2's 8), else none.
func channelMultiple(t target.Target) int64 {
	if lanes := int64(t.VectorBits / 32); lanes >= 8 {
		return lanes
	}
	return 0
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
		// blocked [N, C/b, 1, 1, b], or plain where no reader takes it blocked (PlainOutput)
		return in[0], in[0] != 0
	case n.Op == graph.OpResize:
		for _, b := range in[1:] {
			if b != 0 {
				return 0, false
			}
		}
		return in[0], in[0] != 0 && kernels.BlockedResizeSupported(n)
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
		return elementwiseBlock(n, in)
	}
	return 0, false
}

// elementwiseBlock is the block of an elementwise op's output: that of its inputs of the
// output's extents, which must all be stored in it (a plain one is brought into the
// block by alter-layout). Other inputs hold one element, or, for the ops whose
// definitions broadcast (kernels.BroadcastsOnBlocked), broadcast onto the output (a
// per-channel scale of squeeze-and-excitation), plain or in the same block: the kernel
// reads them through the blocked index.
func elementwiseBlock(n *graph.Node, in []int64) (int64, bool) {
	out := n.Outputs[0].Type
	b := int64(0)
	for i, v := range n.Inputs {
		if v != nil && in[i] != 0 && sameExtents(v.Type, out) {
			if b != 0 && b != in[i] {
				return 0, false
			}
			b = in[i]
		}
	}
	if b == 0 {
		return 0, false
	}
	for i, v := range n.Inputs {
		switch {
		case v == nil || in[i] == b && sameExtents(v.Type, out):
		case in[i] == 0 && allOnes(v.Type):
		case (in[i] == 0 || in[i] == b) && !sameExtents(v.Type, out) && kernels.BroadcastsOnBlocked(n.Op) && broadcastsOnto(v.Type, out, in[i]):
		default:
			return 0, false
		}
	}
	return b, true
}

// broadcastsOnto reports whether a static operand of type t, stored in block b, numpy-
// broadcasts onto the 4-D out: extents 1 or out's, aligned on the right; a blocked one
// has out's channels.
func broadcastsOnto(t, out graph.Type, b int64) bool {
	s, ok1 := t.ConstShape()
	os, ok2 := out.ConstShape()
	if !ok1 || !ok2 || len(os) != 4 || len(s) > 4 || b != 0 && len(s) != 4 {
		return false
	}
	for j := range s {
		d, o := s[j], os[4-len(s)+j]
		if d != 1 && d != o {
			return false
		}
	}
	return b == 0 || s[1] == os[1]
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
