package cpu

import (
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
)

// runnable keeps the intrinsics whose instruction set the host has (the C compiler
// targets -march=native, so a wider kernel would not run here).
func runnable(all []*loopir.TensorIntrin) []*loopir.TensorIntrin {
	h := target.Host()
	var out []*loopir.TensorIntrin
	for _, in := range all {
		switch {
		case strings.Contains(in.Name, "_avx512_") && !h.Has("avx512f"):
		case strings.Contains(in.Name, "_avx2_") && !h.Has("avx2"):
		default:
			out = append(out, in)
		}
	}
	return out
}
