package ref

import "github.com/kilnrt/kiln/graph"

func controlKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
