package intrin_test

import (
	"testing"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/target"
)

// TestGemmForWidth: narrow rows get shorter tiles when that pads them to over 10% fewer
// slots; every choice is a declared kernel (traces replay by name).
func TestGemmForWidth(t *testing.T) {
	declared := map[string]bool{}
	for _, in := range intrin.Table() {
		declared[in.Name] = true
	}
	for _, c := range []struct {
		features []target.Feature
		width    int64
		mr       int64
	}{
		{[]target.Feature{"avx2", "fma"}, 7, 4},   // 8 slots, not 12
		{[]target.Feature{"avx2", "fma"}, 14, 5},  // 15, not 18
		{[]target.Feature{"avx2", "fma"}, 28, 6},  // 30 against 28: not worth it
		{[]target.Feature{"avx2", "fma"}, 56, 6},  //
		{[]target.Feature{"avx2", "fma"}, 112, 6}, //
		{[]target.Feature{"avx512f"}, 7, 4},
		{[]target.Feature{"avx2", "fma"}, 0, 6}, // unknown width: the default
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
