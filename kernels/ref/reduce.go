package ref

import "github.com/kilnrt/kiln/graph"

func reduceKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
