package intrin

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
)

// tile is one declared micro-kernel shape of a family: nv vectors per row of the tile,
// the last one half a vector with half (GemmF32Half), mr rows; narrowMR, when set, is a
// row count that serves output rows of at most 16 columns when it pads them to fewer
// slots than mr does.
type tile struct {
	nv, mr, narrowMR int
	half             bool
}

// family is the micro-kernels of one instruction set: vectors of lanes floats, the
// default tile first, then the others widest first. Each tile's rows are sized to the
// register file: mr·nv accumulators, nv vectors of B and one broadcast of A.
type family struct {
	isa   string
	lanes int
	tiles []tile
}

// The families. AVX-512 (32 zmm): 6×64 is the default (24 accumulators; it measured ~8%
// faster than 14×32 on Zen 5); 8×48 (24 accumulators + 3 B), 14×32 (28 + 2) and 14×16
// (14 accumulators: enough independent chains to cover the FMA latency) serve channel
// counts that 64 does not divide. 6×64, 8×48 and 14×32 take 7 rows for narrow output
// rows (gcc keeps 7×64's 28 accumulators in registers but one, spilled once per k step): on an
// Emerald Rapids Xeon resnet50's 7- and 14-wide layers ran 7-25% faster per kernel (a
// 3×3 512→512 conv at 7×7 1.60 against 1.78 ms, 1×1 256→1024 at 14×14 0.82-0.89 against
// 0.94-1.02, best of 100 runs, four rounds alternating); 7×32 gives 160-channel layers
// at 7×7 a tile that divides them (mobilenet_v2's 960→160 + residual and 576→160 ran
// 0.68× and 0.71× the time of 7×64 over 192 padded channels, per kernel, alternating
// binaries; the whole model's kernels 6.81 → 6.29 ms); 14×24 (a zmm and a ymm per row,
// GemmF32Half; with AVX512VL only: familyAVX512NoVL lacks it) gives 24-channel layers a
// tile of no zero columns. AVX2 (16 ymm): 6×16 is the
// default (12 of 16), with 7 rows for narrow output rows (14 accumulators; B is read as
// a memory operand, so no register spills: resnet18's 7- and 14-wide layer-4 convs
// measured 12-14% faster on Zen 3, wider rows within noise, so they keep 6); 4×24 (12
// accumulators + 3 B: the same loads per FMA as 6×16) and 8×8 serve multiples of 8 that
// 16 does not divide. Otherwise 4×8 and 8×4 on 128-bit vectors.
var (
	familyAVX512     = family{"avx512", 16, []tile{{nv: 4, mr: 6, narrowMR: 7}, {nv: 3, mr: 8, narrowMR: 7}, {nv: 2, mr: 14, narrowMR: 7}, {nv: 2, mr: 14, narrowMR: 7, half: true}, {nv: 1, mr: 14}}}
	familyAVX512NoVL = family{"avx512", 16, []tile{{nv: 4, mr: 6, narrowMR: 7}, {nv: 3, mr: 8, narrowMR: 7}, {nv: 2, mr: 14, narrowMR: 7}, {nv: 1, mr: 14}}}
	familyAVX2       = family{"avx2", 8, []tile{{nv: 2, mr: 6, narrowMR: 7}, {nv: 3, mr: 4}, {nv: 1, mr: 8}}}
	familyGeneric    = family{"generic", 4, []tile{{nv: 2, mr: 4}, {nv: 1, mr: 8}}}
)

// familyFor is the micro-kernel family a CPU target runs.
func familyFor(t target.Target) family {
	switch {
	case t.Has("avx512f") && t.Has("avx512vl"):
		return familyAVX512
	case t.Has("avx512f"):
		return familyAVX512NoVL
	case t.Has("avx2") && t.Has("fma"):
		return familyAVX2
	}
	return familyGeneric
}

func (f family) kernel(mr int, tl tile) Gemm {
	if tl.half {
		return GemmF32Half(f.isa, f.lanes, mr, tl.nv)
	}
	return GemmF32(f.isa, f.lanes, mr, tl.nv)
}

// Gemms lists every declared GEMM micro-kernel.
func Gemms() []Gemm {
	var out []Gemm
	for _, f := range []family{familyAVX512, familyAVX2, familyGeneric} {
		for _, tl := range f.tiles {
			out = append(out, f.kernel(tl.mr, tl))
			if tl.narrowMR != 0 {
				out = append(out, f.kernel(tl.narrowMR, tl))
			}
		}
	}
	return out
}

// Table lists every declared intrinsic (for trace replay by name).
func Table() []*loopir.TensorIntrin {
	var out []*loopir.TensorIntrin
	for _, g := range Gemms() {
		out = append(out, g.Update, g.Init, g.Blocks)
	}
	for _, g := range GemmInts() {
		out = append(out, g.Blocks)
	}
	out = append(out, Depthwises()...)
	for _, m := range MMAs() {
		out = append(out, m.Intrin)
	}
	return out
}

// GemmFor is the default float32 GEMM micro-kernel of a CPU target: 6×64 on AVX-512,
// 6×16 on AVX2, 4×8 on 128-bit vectors. GemmTile chooses per product.
func GemmFor(t target.Target) Gemm {
	f := familyFor(t)
	return f.kernel(f.tiles[0].mr, f.tiles[0])
}

// GemmTile chooses the float32 micro-kernel of a CPU target for a product with cols
// output columns (the tiles' j axis: a convolution's output channels, a matmul's
// columns) and rows rows along which the row tiles run (a convolution's output row, a
// matmul's rows); 0 is an unknown extent:
//
//   - where the default tile's width divides cols (or cols is unknown), the default;
//   - else the declared tile that computes the fewest padded slots, whole column tiles
//     times whole row tiles (columns alone when rows is unknown): so the widest tile
//     that divides cols unless its row tiles pad rows more, and where none divides, the
//     least padding (the strategies take a partial last tile: zero-padded weights, or
//     the micro-kernel's partial paths). A tie goes to the tile that pads the columns
//     less (a blocked output's layout carries that padding to its consumers), then to
//     the wider tile;
//   - the rows MR: the tile's, or its narrow-row count when rows is at most 16 and that
//     pads rows to fewer slots (a partial row tile loads B's rows as a full one does).
//
// The choice depends on the target and the two extents only, so that a layout decided
// before the strategy runs (the blocked convolution's output block) matches it.
func GemmTile(t target.Target, cols, rows int64) Gemm {
	return chooseGemmTile(t, cols, rows, narrowRows)
}

// GemmTileMatMul is GemmTile for a packed matmul of rows rows (its flattened leading
// extents, the row tiles' axis): the narrow row count serves up to matMulNarrowRows
// rows. Where a convolution's output rows past 16 measured within noise of 6 (AVX2),
// a matmul's few rows are its whole M: ConvNeXt-tiny's 49-row products pad to 54 rows
// in 6-row tiles, to none in 7-row ones, and 49x3072->768 measured 1.53-1.55 ms against
// 1.61 (its generated unit in a C harness, thread CPU time, min of 200, three rounds
// alternating, Emerald Rapids). The output is plain, so no layout depends on the rows.
func GemmTileMatMul(t target.Target, cols, rows int64) Gemm {
	return chooseGemmTile(t, cols, rows, matMulNarrowRows)
}

// narrowRows and matMulNarrowRows: the most rows a tile's narrow row count serves, in
// GemmTile and GemmTileMatMul.
const (
	narrowRows       = 16
	matMulNarrowRows = 64
)

func chooseGemmTile(t target.Target, cols, rows, narrowUpTo int64) Gemm {
	f := familyFor(t)
	tl := f.tiles[0]
	if cols > 0 && cols%f.nr(tl) != 0 {
		best := int64(-1)
		for _, c := range f.tiles {
			cost := slots(cols, f.nr(c))
			if rows > 0 {
				cost *= slots(rows, c.rowsFor(rows, narrowUpTo))
			}
			if best < 0 || cost < best || (cost == best && slots(cols, f.nr(c)) < slots(cols, f.nr(tl))) ||
				(cost == best && slots(cols, f.nr(c)) == slots(cols, f.nr(tl)) && f.nr(c) > f.nr(tl)) {
				tl, best = c, cost
			}
		}
	}
	return f.kernel(int(tl.rowsFor(rows, narrowUpTo)), tl)
}

func (f family) nr(tl tile) int64 {
	return int64((tileShape{lanes: f.lanes, nv: tl.nv, half: tl.half}).nr())
}

// rowsFor is the tile's row count for row tiles along rows rows (0: unknown), the
// narrow count serving up to narrowUpTo rows.
func (tl tile) rowsFor(rows, narrowUpTo int64) int64 {
	mr := int64(tl.mr)
	if n := int64(tl.narrowMR); n != 0 && rows > 0 && rows <= narrowUpTo && slots(rows, n) < slots(rows, mr) {
		return n
	}
	return mr
}

// slots is n rounded up to whole tiles of t.
func slots(n, t int64) int64 { return (n + t - 1) / t * t }
