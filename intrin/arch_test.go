package intrin_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/target"
)

// TestArm64TakesTheGenericMicroKernels: an arm64 CPU, whatever extensions it lists,
// runs the generic micro-kernels (128-bit vector extensions, no x86 intrinsic; the
// integer one in scalar C), as does
// x86 under the generic cap.
func TestArm64TakesTheGenericMicroKernels(t *testing.T) {
	for _, features := range [][]target.Feature{{"neon"}, {"asimddp", "asimdhp", "neon", "sve"}} {
		tg := target.Target{Kind: target.CPU, Arch: "arm64", Features: features}
		for _, cols := range []int64{0, 8, 24, 64, 1000} {
			g := intrin.GemmTile(tg, cols, 0)
			if !strings.Contains(g.Update.Name, "_generic_") {
				t.Errorf("arm64 %v, %d columns: %s, want a generic micro-kernel", features, cols, g.Update.Name)
			}
			if c := g.Update.Impl["c"]; strings.Contains(c, "_mm") || strings.Contains(c, "immintrin") || strings.Contains(c, "__builtin_ia32") {
				t.Errorf("%s: x86 intrinsics in its C", g.Update.Name)
			}
			gi := intrin.GemmIntTile(tg, cols)
			if c := gi.Blocks.Impl["c"]; !strings.Contains(gi.Blocks.Name, "_generic_") || strings.Contains(c, "__builtin_ia32") {
				t.Errorf("arm64 %v, %d columns: integer %s, want the generic one, without x86 builtins", features, cols, gi.Blocks.Name)
			}
		}
	}
}
