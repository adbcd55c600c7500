package ref

import "github.com/kilnrt/kiln/graph"

func nnxKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{}
}
