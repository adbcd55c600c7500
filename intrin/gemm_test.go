package intrin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
)

var (
	avx512   = []target.Feature{"avx512f", "avx2", "fma"}
	avx512vl = []target.Feature{"avx512f", "avx512vl", "avx2", "fma"}
	avx2     = []target.Feature{"avx2", "fma"}
)

// TestGemmTileFitsTheOutputChannels: the tile width is the default's where it divides
// the columns (resnet's 64 to 512 channels keep 6×64 and 6×16), else the widest declared
// tile that divides them (MobileNet's 16, 24, 96, 160 on AVX-512; 24, 40, 1000 on AVX2),
// else the least padding; every choice is a declared kernel (traces replay by name).
func TestGemmTileFitsTheOutputChannels(t *testing.T) {
	declared := map[string]bool{}
	for _, in := range intrin.Table() {
		declared[in.Name] = true
	}
	for _, c := range []struct {
		features []target.Feature
		cols     int64
		mr, nr   int64
	}{
		{avx512, 0, 6, 64}, {avx512, 64, 6, 64}, {avx512, 128, 6, 64}, {avx512, 512, 6, 64}, {avx512, 192, 6, 64},
		{avx512, 96, 8, 48}, {avx512, 144, 8, 48},
		{avx512, 160, 14, 32}, {avx512, 32, 14, 32},
		{avx512, 16, 14, 16}, {avx512, 80, 14, 16}, {avx512, 112, 14, 16},
		{avx512, 24, 14, 32},                           // none divides: 32 columns with 32 or 16, the wider
		{avx512vl, 24, 14, 24}, {avx512vl, 72, 14, 24}, // a zmm and a ymm per row
		{avx512vl, 64, 6, 64}, {avx512vl, 96, 8, 48}, {avx512vl, 160, 14, 32}, {avx512vl, 16, 14, 16},
		{avx512vl, 8, 14, 16}, // 16 columns against 24
		{avx512vl, 48, 8, 48}, // 48 slots with 48, 24 or 16: the widest
		{avx512, 40, 8, 48},   // 48 with 48 or 16
		{avx512, 1000, 8, 48}, // 1008 columns against 1024
		{avx2, 0, 6, 16}, {avx2, 64, 6, 16}, {avx2, 48, 6, 16}, {avx2, 16, 6, 16}, {avx2, 1280, 6, 16},
		{avx2, 24, 4, 24}, {avx2, 72, 4, 24}, {avx2, 120, 4, 24},
		{avx2, 40, 8, 8}, {avx2, 56, 8, 8}, {avx2, 1000, 8, 8},
		{avx2, 12, 6, 16}, // 16 columns with 16 or 8
		{avx2, 3, 8, 8},   // 8 with 8 (a partial tile)
		{nil, 0, 4, 8}, {nil, 24, 4, 8}, {nil, 12, 8, 4}, {nil, 3, 8, 4},
	} {
		tg := target.Target{Kind: target.CPU, Features: c.features}
		g := intrin.GemmTile(tg, c.cols, 0)
		if g.MR != c.mr || g.NR != c.nr {
			t.Errorf("%v, %d columns: %dx%d, want %dx%d", c.features, c.cols, g.MR, g.NR, c.mr, c.nr)
		}
		if !declared[g.Update.Name] || !declared[g.Init.Name] {
			t.Errorf("%s is not in intrin.Table", g.Update.Name)
		}
	}
}

// TestGemmTileCountsPaddedRows: where the default tile does not divide the columns,
// the choice weighs the row tiles' padding too: a 7-wide output row costs 14×16 7
// padded rows on AVX-512 (224 slots against 7×48's 336; 7×32 computes 224 too but
// pads the columns to 32), 160 columns take 7×32 (1120 slots against 1344 for 7×64
// and 7×48), one matmul row costs 4×24
// three (the classifier's 1000 columns: 4032 slots against 6048 for 6×16 and 8000 for
// 8×8); where the default divides, the rows change only its row count (7 on narrow rows).
func TestGemmTileCountsPaddedRows(t *testing.T) {
	declared := map[string]bool{}
	for _, in := range intrin.Table() {
		declared[in.Name] = true
	}
	for _, c := range []struct {
		features   []target.Feature
		cols, rows int64
		mr, nr     int64
	}{
		{avx512vl, 24, 56, 14, 24}, {avx512vl, 24, 7, 7, 24},
		{avx512, 16, 7, 14, 16}, {avx512, 160, 7, 7, 32}, {avx512, 160, 14, 14, 32}, {avx512, 96, 7, 7, 48}, {avx512, 96, 28, 14, 32}, {avx512, 64, 7, 7, 64}, {avx512, 64, 56, 6, 64}, {avx512, 24, 56, 14, 32},
		{avx2, 1000, 1, 4, 24}, {avx2, 40, 56, 8, 8}, {avx2, 24, 7, 4, 24}, {avx2, 16, 7, 7, 16}, {avx2, 1280, 1, 6, 16},
	} {
		tg := target.Target{Kind: target.CPU, Features: c.features}
		g := intrin.GemmTile(tg, c.cols, c.rows)
		if g.MR != c.mr || g.NR != c.nr {
			t.Errorf("%v, %d columns, %d rows: %dx%d, want %dx%d", c.features, c.cols, c.rows, g.MR, g.NR, c.mr, c.nr)
		}
		if !declared[g.Update.Name] || !declared[g.Init.Name] {
			t.Errorf("%s is not in intrin.Table", g.Update.Name)
		}
	}
}

// TestGemmTileFitsNarrowRows: on AVX2 and AVX-512 a 7-row tile takes the narrow widths
// it pads to fewer slots than six rows do; the default serves unknown columns.
func TestGemmTileFitsNarrowRows(t *testing.T) {
	for _, c := range []struct {
		features []target.Feature
		width    int64
		mr       int64
	}{
		{avx2, 7, 7}, {avx2, 14, 7}, {avx2, 28, 6}, {avx2, 56, 6}, {avx2, 112, 6},
		{avx2, 64, 6}, // 66 slots against 70
		{avx2, 12, 6}, // 12 against 14
		{avx2, 0, 6},  // unknown width: the default
		{avx512, 7, 7}, {avx512, 14, 7}, {avx512, 28, 6}, {avx512, 15, 6},
	} {
		tg := target.Target{Kind: target.CPU, Features: c.features}
		g := intrin.GemmTile(tg, 0, c.width)
		if g.MR != c.mr || g.NR != intrin.GemmFor(tg).NR {
			t.Errorf("%v width %d: %dx%d, want %d rows of %d", c.features, c.width, g.MR, g.NR, c.mr, intrin.GemmFor(tg).NR)
		}
	}
}

// TestGemmTileMatMulTakesNarrowRowsUpTo64: a packed matmul's rows up to 64 take the
// narrow row count where it pads less (ConvNeXt's 49 rows: 7×7 against 9×6), a
// convolution's output rows past 16 keep the default's; more rows than 64, and rows the
// default pads no more, keep the default too.
func TestGemmTileMatMulTakesNarrowRowsUpTo64(t *testing.T) {
	declared := map[string]bool{}
	for _, in := range intrin.Table() {
		declared[in.Name] = true
	}
	for _, c := range []struct {
		features     []target.Feature
		cols, rows   int64
		matmul, conv int64 // MR of GemmTileMatMul and of GemmTile
	}{
		{avx512, 768, 49, 7, 6}, {avx512, 3072, 49, 7, 6}, {avx512, 64, 14, 7, 7}, {avx512, 64, 56, 7, 6},
		{avx512, 64, 48, 6, 6}, {avx512, 64, 70, 6, 6}, {avx512, 64, 196, 6, 6}, {avx512, 64, 0, 6, 6},
		{avx2, 64, 49, 7, 6}, {avx2, 64, 36, 6, 6},
	} {
		tg := target.Target{Kind: target.CPU, Features: c.features}
		m, g := intrin.GemmTileMatMul(tg, c.cols, c.rows), intrin.GemmTile(tg, c.cols, c.rows)
		if m.MR != c.matmul || g.MR != c.conv || m.NR != g.NR {
			t.Errorf("%v, %d columns, %d rows: matmul %dx%d, conv %dx%d; want %d and %d rows of one width", c.features, c.cols, c.rows, m.MR, m.NR, g.MR, g.NR, c.matmul, c.conv)
		}
		if !declared[m.Init.Name] || !declared[m.Update.Name] {
			t.Errorf("%s is not in intrin.Table", m.Init.Name)
		}
	}
}

// TestPartialRowTilesComputeTheirRowsOnly: where the columns are whole, a tile of m < MR
// rows is a tile of exactly m rows in every form (Update, Init, Blocks): its case of the
// row-count switch declares m rows of accumulators and no more, so the last tile of a
// 55-pixel row (one pixel) costs one row's multiply-adds, not six.
func TestPartialRowTilesComputeTheirRowsOnly(t *testing.T) {
	g := intrin.GemmF32("avx512", 16, 6, 4)
	for _, in := range []*loopir.TensorIntrin{g.Update, g.Init, g.Blocks} {
		src := in.Impl["c"]
		at := strings.Index(src, "switch (m) {") // the whole-width tiles
		if at < 0 {
			t.Fatalf("%s: no tiles by row count:\n%s", in.Name, src)
		}
		full := src[at:]
		for m := 1; m < 6; m++ {
			start := strings.Index(full, fmt.Sprintf("case %d: {", m))
			if start < 0 {
				t.Fatalf("%s: no tile of %d rows", in.Name, m)
			}
			body := full[start:]
			body = body[:strings.Index(body, "} break;")]
			if !strings.Contains(body, fmt.Sprintf("c%d_3", m-1)) {
				t.Errorf("%s: the %d-row tile does not compute its row %d", in.Name, m, m-1)
			}
			if strings.Contains(body, fmt.Sprintf("c%d_0", m)) {
				t.Errorf("%s: the %d-row tile computes row %d, past its rows", in.Name, m, m)
			}
		}
	}
}
