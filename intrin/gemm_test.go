package intrin_test

import (
	"testing"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/target"
)

// TestGemmForWidth: on AVX2 a 7-row tile takes the narrow widths it pads to fewer slots
// than six rows do; every choice is a declared kernel (traces replay by name).
func TestGemmForWidth(t *testing.T) {
	declared := map[string]bool{}
	for _, in := range intrin.Table() {
		declared[in.Name] = true
	}
	avx2 := []target.Feature{"avx2", "fma"}
	for _, c := range []struct {
		features []target.Feature
		width    int64
		mr       int64
	}{
		{avx2, 7, 7}, {avx2, 14, 7}, {avx2, 28, 6}, {avx2, 56, 6}, {avx2, 112, 6},
		{avx2, 64, 6}, // 66 slots against 70
		{avx2, 12, 6}, // 12 against 14
		{avx2, 0, 6},  // unknown width: the default
		{[]target.Feature{"avx512f", "avx2", "fma"}, 7, 6},
	} {
		tg := target.Target{Kind: target.CPU, Features: c.features}
		g := intrin.GemmForWidth(tg, c.width)
		if g.MR != c.mr || g.NR != intrin.GemmFor(tg).NR {
			t.Errorf("%v width %d: %dx%d, want %d rows of %d", c.features, c.width, g.MR, g.NR, c.mr, intrin.GemmFor(tg).NR)
		}
		if !declared[g.Update.Name] || !declared[g.Init.Name] {
			t.Errorf("%s is not in intrin.Table", g.Update.Name)
		}
	}
}
