package kernels

import "github.com/kilnrt/kiln/graph"

// reduceComputes: reductions, normalizations and pooling.
func reduceComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{}
}
