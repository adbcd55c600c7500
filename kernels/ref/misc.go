package ref

import "github.com/kilnrt/kiln/graph"

func miscKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
