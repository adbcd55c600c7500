package cpu

import (
	"strings"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/target"
)

// runnable keeps the intrinsics whose instruction set the host has (the C compiler
// targets -march=native, so a wider kernel would not run here).
func runnable(all []intrin.Gemm) []intrin.Gemm {
	h := target.Host()
	var out []intrin.Gemm
	for _, g := range all {
		switch {
		case strings.Contains(g.Update.Name, "_avx512_") && !h.Has("avx512f"):
		case strings.Contains(g.Update.Name, "_avx512_") && g.NR%16 != 0 && !h.Has("avx512vl"): // a half vector
		case strings.Contains(g.Update.Name, "_avx2_") && !h.Has("avx2"):
		default:
			out = append(out, g)
		}
	}
	return out
}
