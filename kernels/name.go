package kernels

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/graph"
)

// KernelName is a C-safe function name for a node's kernel, on every target (the
// compiler renames kernels once they are deduplicated; this name shows in traces and
// errors): the op in lower case and the node's name with every other character an
// underscore, cut to 48 bytes.
func KernelName(n *graph.Node) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(n.Op.String()))
	if n.Name != "" {
		b.WriteByte('_')
		for _, r := range n.Name {
			if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	}
	s := b.String()
	if len(s) > 48 {
		s = fmt.Sprintf("%s_%x", s[:40], len(n.Name))
	}
	return s
}
