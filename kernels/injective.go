package kernels

import "github.com/kilnrt/kiln/graph"

// injectiveComputes: data movement ops (transpose, gather, slice, concat, split, ...).
func injectiveComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{}
}
