package ref

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
)

// attrs returns n's attribute struct as *A; a mismatch is a bug (the verifier checks it).
func attrs[A any](n *graph.Node) *A {
	a, ok := n.Attrs.(*A)
	if !ok {
		panic(fmt.Sprintf("BUG: node %v has attributes %T", n, n.Attrs))
	}
	return a
}
