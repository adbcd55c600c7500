package kernels

import "github.com/kilnrt/kiln/graph"

// nnMiscComputes: the losses (loss.go), Dropout, LRN, Einsum and MaxUnpool.
func nnMiscComputes() map[graph.Op]ComputeFunc {
	out := map[graph.Op]ComputeFunc{}
	for _, fam := range []map[graph.Op]ComputeFunc{lossComputes(), {graph.OpDropout: computeDropout, graph.OpLRN: computeLRN, graph.OpEinsum: computeEinsum, graph.OpMaxUnpool: computeMaxUnpool}} {
		for op, f := range fam {
			out[op] = f
		}
	}
	return out
}
