package gpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
)

// TextureWrites is annotate-scopes' ScopePolicy.Writes for the texture kernels: output
// 0 as an NCHW4c texture, when it is stored in blocks of 4 (alter-layout under
// TextureLayoutPolicy) and written by a convolution TexConv2DOf takes (alone or fused
// with an epilogue texStepOf reads), or an elementwise node TextureLayoutPolicy keeps
// blocked, or a pooling or channel concatenation of blocked inputs (texTakesBlocked).
// Other packings, other fused groups and every other node write global memory.
func TextureWrites(reg *kernels.Registry) func(n *graph.Node, p graph.Packing) bool {
	return func(n *graph.Node, p graph.Packing) bool {
		if p != graph.PackNCHW4c || len(n.Outputs) != 1 || n.Outputs[0].Type.Block != loopir.TexelLanes {
			return false
		}
		switch n.Op {
		case graph.OpConv:
			_, err := TexConv2DOf(n)
			return err == nil
		case graph.OpFused:
			_, _, err := texFusedConv(n)
			return err == nil
		}
		if texTakesBlocked(n, blocksOf(n)) {
			return true
		}
		_, ok := texAccepts(reg, n, blocksOf(n))
		return ok
	}
}

// TextureReads is annotate-scopes' ScopePolicy.Reads for the texture kernels: a
// convolution TexConv2DOf takes reads its blocked input as NCHW4c and its weight as
// OIHW4o (its bias stays global), and so does a fused one, which also reads its
// residual operands as NCHW4c; an elementwise node TextureLayoutPolicy keeps blocked
// reads each blocked input as NCHW4c, and so do poolings and concatenations.
func TextureReads(reg *kernels.Registry) func(n *graph.Node, input int, p graph.Packing) bool {
	return func(n *graph.Node, input int, p graph.Packing) bool {
		if input < 0 || input >= len(n.Inputs) || n.Inputs[input] == nil {
			return false
		}
		blocked := n.Inputs[input].Type.Block == loopir.TexelLanes
		if n.Op == graph.OpFused {
			return blocked && texFusedReads(n, input, p)
		}
		if texTakesBlocked(n, blocksOf(n)) {
			return p == graph.PackNCHW4c
		}
		if n.Op == graph.OpConv {
			c, err := TexConv2DOf(n)
			if err != nil {
				return false
			}
			return (input == 0 && blocked && !c.PlainX && p == graph.PackNCHW4c) || (input == 1 && !c.Depthwise && p == graph.PackOIHW4o)
		}
		if _, ok := texAccepts(reg, n, blocksOf(n)); !ok {
			return false
		}
		return blocked && p == graph.PackNCHW4c
	}
}

// blocksOf is the block each input of n is stored in.
func blocksOf(n *graph.Node) []int64 {
	in := make([]int64, len(n.Inputs))
	for i, v := range n.Inputs {
		if v != nil {
			in[i] = v.Type.Block
		}
	}
	return in
}
