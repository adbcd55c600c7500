package kernels

import "github.com/kilnrt/kiln/graph"

// rnnComputes: recurrent layers.
func rnnComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{}
}
