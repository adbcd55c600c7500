package ref

import "github.com/kilnrt/kiln/graph"

func nnKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
