package ref

import "github.com/kilnrt/kiln/graph"

func shapeKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
