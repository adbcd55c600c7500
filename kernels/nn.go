package kernels

import "github.com/kilnrt/kiln/graph"

// nnComputes: convolution, matrix products.
func nnComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{}
}
