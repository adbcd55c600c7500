package ref

import "github.com/kilnrt/kiln/graph"

func rnnKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
