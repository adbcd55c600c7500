package intrin

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Gemm is one float32 outer-product micro-kernel in its two forms, on an MR × NR tile of
// C for any K: per k it loads NR/lanes vectors of B's row k and broadcasts one element of
// A per row of the tile. Update computes C[i, j] += Σ_k A[i, k]·B[k, j]; Init computes
// C[i, j] = Σ_k A[i, k]·B[k, j] (the reduction's init included: its accumulators start
// at zero and C is never read). B's and C's rows must be contiguous (stride 1 along j); A
// may have any strides. Every extent may be partial at run time: a partial m runs a tile
// of m rows where n is whole (with a partial n, rows beyond m are computed on a repeated
// row and never stored), a partial n runs a tile of fewer vectors
// (the last one masked on AVX-512 and AVX2, scalar columns after the whole vectors in
// the generic family: gemmNarrow), K is a run-time count. Blocks is Init over a reduction in three loops, each with its own
// strides in A and B: C[i, j] = Σ_kb Σ_ky Σ_k A[i, kb, ky, k]·B[kb, ky, k, j], so a
// convolution's whole reduction over input channel blocks, kernel rows and the merged
// kernel column·channel axis runs in one call, the accumulators in registers from their
// zero to their one store.
type Gemm struct {
	Update, Init, Blocks *loopir.TensorIntrin
	MR, NR               int64
}

// GemmF32 declares the micro-kernel for vectors of lanes floats, mr rows and nv vectors
// per row.
func GemmF32(isa string, lanes, mr, nv int) Gemm { return gemmF32(isa, lanes, mr, nv, false) }

// GemmF32Half declares the micro-kernel of mr rows of nv vectors whose last one is half
// a vector (nv·lanes − lanes/2 columns): AVX-512's 14×24 computes each row's 24
// columns in a zmm and a ymm register. Where the columns are 24 (MobileNetV2's and
// EfficientNet-B0's 24-channel projections), a tile of two whole vectors computes 8
// zero columns in its second zmm; a ymm multiply-add takes half the FMA units' time
// of a zmm one on Zen 4 (its 512-bit operations run on two 256-bit pipes: measured,
// EfficientNet-B0's 24-channel projections take 0.67–0.69× the time on 14×32), and by
// the vendors' instruction tables (not measured here) half on cores with one 512-bit
// FMA unit and the same issue slot on those with two (isa "avx512" only: the half
// vector's masked accesses need AVX512VL).
func GemmF32Half(isa string, lanes, mr, nv int) Gemm {
	if isa != "avx512" {
		panic(fmt.Sprintf("BUG: GemmF32Half(%q): half vectors are AVX-512's", isa))
	}
	return gemmF32(isa, lanes, mr, nv, true)
}

func gemmF32(isa string, lanes, mr, nv int, half bool) Gemm {
	if lanes <= 0 || mr <= 0 || nv <= 0 || half && lanes%2 != 0 {
		panic(fmt.Sprintf("BUG: GemmF32(%d, %d, %d, half %v)", lanes, mr, nv, half))
	}
	full := tileShape{lanes: lanes, mr: mr, nv: nv, half: half}
	nr := full.nr()
	g := Gemm{MR: int64(mr), NR: int64(nr)}
	for _, zero := range []bool{false, true} {
		name := fmt.Sprintf("kiln_gemm_f32_%s_%dx%d", isa, mr, nr)
		if zero {
			name += "_init"
		}
		in := &loopir.TensorIntrin{
			Name:    name,
			Desc:    gemmDesc(name, int64(mr), int64(nr), zero),
			Unit:    [][2]int{{0, 1}, {2, 1}}, // C and B contiguous along j
			Partial: []bool{true, true, true},
			Impl:    map[string]string{"c": gemmC(name, isa, full, zero)},
		}
		if zero {
			g.Init = in
		} else {
			g.Update = in
		}
	}
	name := fmt.Sprintf("kiln_gemm_f32_%s_%dx%d_blocks", isa, mr, nr)
	g.Blocks = &loopir.TensorIntrin{
		Name:    name,
		Desc:    gemmBlocksDesc(name, int64(mr), int64(nr)),
		Unit:    [][2]int{{0, 1}, {2, 1}}, // C and B contiguous along j
		Partial: []bool{true, true, false, false, true},
		Impl:    map[string]string{"c": gemmBlocksC(name, isa, full)},
	}
	return g
}

// gemmBlocksDesc: C [mr, nr], A [mr, KB, KY, K], B [KB, KY, K, nr] with loops i < mr,
// j < nr, kb < KB, ky < KY, k < K; C is initialized to 0 before the first product.
func gemmBlocksDesc(name string, mr, nr int64) *loopir.PrimFunc {
	KB, KY, K := loopir.NewVar("KB"), loopir.NewVar("KY"), loopir.NewVar("K")
	c := &loopir.Buffer{Name: "C", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(mr), loopir.Int(nr)}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(mr), KB, KY, K}, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: tensor.Float32, Shape: []loopir.Expr{KB, KY, K, loopir.Int(nr)}, Scope: "global"}
	i, j, kb, ky, k := loopir.NewVar("i"), loopir.NewVar("j"), loopir.NewVar("kb"), loopir.NewVar("ky"), loopir.NewVar("k")
	vi, vj, vkb, vky, vk := loopir.NewVar("vi"), loopir.NewVar("vj"), loopir.NewVar("vkb"), loopir.NewVar("vky"), loopir.NewVar("vk")
	cij := []loopir.Expr{vi, vj}
	aIdx := []loopir.Expr{vi, vkb, vky, vk}
	bIdx := []loopir.Expr{vkb, vky, vk, vj}
	one := loopir.Int(1)
	blk := &loopir.Block{
		Name: "update",
		Iters: []loopir.IterVar{
			{Var: vi, Extent: loopir.Int(mr), Kind: loopir.Spatial},
			{Var: vj, Extent: loopir.Int(nr), Kind: loopir.Spatial},
			{Var: vkb, Extent: KB, Kind: loopir.Reduction},
			{Var: vky, Extent: KY, Kind: loopir.Reduction},
			{Var: vk, Extent: K, Kind: loopir.Reduction},
		},
		Bindings: []loopir.Expr{i, j, kb, ky, k},
		Reads: []loopir.Region{
			{Buf: a, Ranges: [][2]loopir.Expr{{vi, one}, {vkb, one}, {vky, one}, {vk, one}}},
			{Buf: b, Ranges: [][2]loopir.Expr{{vkb, one}, {vky, one}, {vk, one}, {vj, one}}},
		},
		Writes: []loopir.Region{{Buf: c, Ranges: [][2]loopir.Expr{{vi, one}, {vj, one}}}},
		Body: &loopir.Store{Buf: c, Index: cij, Value: loopir.Bin(loopir.Add,
			&loopir.Load{Buf: c, Index: cij},
			loopir.Bin(loopir.Mul, &loopir.Load{Buf: a, Index: aIdx}, &loopir.Load{Buf: b, Index: bIdx}))},
		Init: &loopir.Store{Buf: c, Index: cij, Value: loopir.Float(0, tensor.Float32)},
	}
	body := &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Int(mr), Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(nr),
		Body: &loopir.For{Var: kb, Min: loopir.Int(0), Extent: KB, Body: &loopir.For{Var: ky, Min: loopir.Int(0), Extent: KY,
			Body: &loopir.For{Var: k, Min: loopir.Int(0), Extent: K, Body: blk}}}}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Dims: []*loopir.Var{KB, KY, K}, Body: body}
}

// gemmBlocksC prints the Blocks form: gemmC's zero-initializing tile with the k loop
// inside the two block loops, A's and B's tile origins stepped by their block strides.
func gemmBlocksC(name, isa string, full tileShape) string {
	nr, mr := full.nr(), full.mr
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	full.vectorTypes(w)
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    float *restrict c, i64 c_si, i64 c_sj, i64 c_skb, i64 c_sky, i64 c_sk,\n")
	w("    const float *restrict a, i64 a_si, i64 a_sj, i64 a_skb, i64 a_sky, i64 a_sk,\n")
	w("    const float *restrict b, i64 b_si, i64 b_sj, i64 b_skb, i64 b_sky, i64 b_sk,\n")
	w("    i64 m, i64 n, i64 nkb, i64 nky, i64 kk) {\n")
	w("  (void)c_sj; (void)c_skb; (void)c_sky; (void)c_sk; (void)a_sj; (void)b_si; (void)b_sj;\n")
	w("  if (m <= 0 || n <= 0) return; /* an empty reduction still stores zeros */\n")
	w("  if (m > %d) m = %d;\n  if (n > %d) n = %d;\n", mr, mr, nr, nr)
	w("  if (n < %d) {\n", nr)
	gemmNarrow(w, isa, full, func(ts tileShape) {
		gemmBlocksTile(w, ts, func(i int) string { return fmt.Sprintf("(a%d + o)", i) }, true)
	}, func() {
		w("      float s = 0.0f;\n")
		w("      for (i64 ib = 0; ib < nkb; ++ib) for (i64 iy = 0; iy < nky; ++iy) for (i64 k = 0; k < kk; ++k)\n")
		w("        s += a[i * a_si + ib * a_skb + iy * a_sky + k * a_sk] * b[ib * b_skb + iy * b_sky + k * b_sk + j];\n")
		w("      c[i * c_si + j] = s;\n")
	})
	w("    return;\n  }\n")
	gemmRowCases(w, full, func(ts tileShape) {
		gemmBlocksTile(w, ts, func(i int) string { return fmt.Sprintf("(a + %d * a_si + o)", i) }, false)
	})
	w("}\n")
	return b.String()
}

// gemmBlocksTile prints the register tile of the Blocks form: zero accumulators, per
// block (ib, iy) the offsets o into A and ob into B, the k loop, then one store.
func gemmBlocksTile(w func(string, ...any), ts tileShape, row func(int) string, partial bool) {
	for i := 0; i < ts.mr; i++ {
		for v := 0; v < ts.nv; v++ {
			w("    %s c%d_%d = (%s){0};\n", ts.typ(v), i, v, ts.typ(v))
		}
	}
	w("    for (i64 ib = 0; ib < nkb; ++ib) for (i64 iy = 0; iy < nky; ++iy) {\n")
	w("    const i64 o = ib * a_skb + iy * a_sky;\n")
	w("    const float *restrict bb = b + ib * b_skb + iy * b_sky;\n")
	gemmKLoop(w, ts, row, "bb", false)
	w("    }\n")
	gemmStore(w, ts, partial)
}

// gemmDesc: C, A, B with loops i < mr, j < nr, k < K; with zero, the block initializes
// C to 0 before the first k.
func gemmDesc(name string, mr, nr int64, zero bool) *loopir.PrimFunc {
	K := loopir.NewVar("K")
	c := &loopir.Buffer{Name: "C", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(mr), loopir.Int(nr)}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(mr), K}, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: tensor.Float32, Shape: []loopir.Expr{K, loopir.Int(nr)}, Scope: "global"}
	i, j, k := loopir.NewVar("i"), loopir.NewVar("j"), loopir.NewVar("k")
	vi, vj, vk := loopir.NewVar("vi"), loopir.NewVar("vj"), loopir.NewVar("vk")
	cij := []loopir.Expr{vi, vj}
	blk := &loopir.Block{
		Name: "update",
		Iters: []loopir.IterVar{
			{Var: vi, Extent: loopir.Int(mr), Kind: loopir.Spatial},
			{Var: vj, Extent: loopir.Int(nr), Kind: loopir.Spatial},
			{Var: vk, Extent: K, Kind: loopir.Reduction},
		},
		Bindings: []loopir.Expr{i, j, k},
		Reads: []loopir.Region{
			{Buf: c, Ranges: [][2]loopir.Expr{{vi, loopir.Int(1)}, {vj, loopir.Int(1)}}},
			{Buf: a, Ranges: [][2]loopir.Expr{{vi, loopir.Int(1)}, {vk, loopir.Int(1)}}},
			{Buf: b, Ranges: [][2]loopir.Expr{{vk, loopir.Int(1)}, {vj, loopir.Int(1)}}},
		},
		Writes: []loopir.Region{{Buf: c, Ranges: [][2]loopir.Expr{{vi, loopir.Int(1)}, {vj, loopir.Int(1)}}}},
		Body: &loopir.Store{Buf: c, Index: cij, Value: loopir.Bin(loopir.Add,
			&loopir.Load{Buf: c, Index: cij},
			loopir.Bin(loopir.Mul, &loopir.Load{Buf: a, Index: []loopir.Expr{vi, vk}}, &loopir.Load{Buf: b, Index: []loopir.Expr{vk, vj}}))},
	}
	if zero {
		blk.Init = &loopir.Store{Buf: c, Index: cij, Value: loopir.Float(0, tensor.Float32)}
		blk.Reads = blk.Reads[1:]
	}
	body := &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Int(mr), Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(nr),
		Body: &loopir.For{Var: k, Min: loopir.Int(0), Extent: K, Body: blk}}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Dims: []*loopir.Var{K}, Body: body}
}

// gemmC prints the implementation: straight-line C (no pragmas, so GCC and Clang both
// keep the mr·nv accumulators in registers), inlined into its caller so that constant
// strides fold into addressing.
func gemmC(name, isa string, full tileShape, zero bool) string {
	nr, mr := full.nr(), full.mr
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	full.vectorTypes(w)
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    float *restrict c, i64 c_si, i64 c_sj, i64 c_sk,\n")
	w("    const float *restrict a, i64 a_si, i64 a_sj, i64 a_sk,\n")
	w("    const float *restrict b, i64 b_si, i64 b_sj, i64 b_sk,\n")
	w("    i64 m, i64 n, i64 kk) {\n")
	w("  (void)c_sj; (void)c_sk; (void)a_sj; (void)b_si; (void)b_sj;\n")
	if zero {
		w("  if (m <= 0 || n <= 0) return; /* kk <= 0 still stores zeros */\n")
	} else {
		w("  if (m <= 0 || n <= 0 || kk <= 0) return;\n")
	}
	w("  if (m > %d) m = %d;\n  if (n > %d) n = %d;\n", mr, mr, nr, nr)
	// partial n: tiles of fewer vectors (gemmNarrow)
	w("  if (n < %d) {\n", nr)
	gemmNarrow(w, isa, full, func(ts tileShape) {
		gemmTile(w, ts, func(i int) string { return fmt.Sprintf("a%d", i) }, true, zero)
	}, func() {
		if zero {
			w("      float s = 0.0f;\n")
		} else {
			w("      float s = c[i * c_si + j];\n")
		}
		w("      for (i64 k = 0; k < kk; ++k) s += a[i * a_si + k * a_sk] * b[k * b_sk + j];\n")
		w("      c[i * c_si + j] = s;\n")
	})
	w("    return;\n  }\n")
	// full tiles address A's rows from one pointer (constant strides fold into the
	// addressing); a partial row count runs a tile of exactly its rows (gemmRowCases)
	gemmRowCases(w, full, func(ts tileShape) {
		gemmTile(w, ts, func(i int) string { return fmt.Sprintf("(a + %d * a_si)", i) }, false, zero)
	})
	w("}\n")
	return b.String()
}

// gemmRowCases prints the full-width tiles by row count: the whole tile where m is its
// mr rows, else a tile of m rows (switch over 1..mr-1), each printed by tile. A partial
// row tile thus computes its own rows only: when each of the tile's mr rows was
// computed (the rows past m on a repeated row, never stored), a convolution's last
// tile of a 55-pixel row (55 = 9·6 + 1) cost as much as six pixels, and squeezenet1_1's
// 3×3 expansions from 16 channels at 55×55 ran at 86% of the FMA peak (ONNX Runtime's
// 96%; machine G).
func gemmRowCases(w func(string, ...any), full tileShape, tile func(tileShape)) {
	w("  switch (m) {\n")
	w("  case %d: {\n", full.mr)
	tile(full)
	w("  } break;\n")
	for r := 1; r < full.mr; r++ {
		ts := full
		ts.mr = r
		w("  case %d: {\n", r)
		tile(ts)
		w("  } break;\n")
	}
	w("  }\n")
}

// vectorType is the C type of a vector of lanes floats, aligned (with suffix "u": for
// loads and stores at any float).
func vectorType(lanes int) string { return fmt.Sprintf("kiln_f32x%d", lanes) }

// vectorTypes prints the typedefs of the tile's vectors, aligned and unaligned (for
// loads and stores at any float): a whole vector's, and a half vector's in a tile that
// has one.
func (ts tileShape) vectorTypes(w func(string, ...any)) {
	for _, lanes := range []int{ts.lanes, ts.lanes / 2} {
		if lanes == ts.lanes/2 && !ts.half {
			break
		}
		vt := vectorType(lanes)
		w("typedef float %s __attribute__((vector_size(%d)));\n", vt, 4*lanes)
		w("typedef float %su __attribute__((vector_size(%d), aligned(4)));\n", vt, 4*lanes)
	}
}

// tileShape is one register tile to print: mr rows of nv vectors of lanes floats, the
// last one half a vector with half (typ); with masked, the last vector of each row is
// loaded and stored under the family's lane mask (maskOps, of the half vector with
// half), set up before the tile.
type tileShape struct {
	lanes, mr, nv int
	half          bool
	masked        *maskOps
}

// nr is the tile's columns.
func (ts tileShape) nr() int {
	if ts.half {
		return ts.nv*ts.lanes - ts.lanes/2
	}
	return ts.nv * ts.lanes
}

// typ is the C vector type of a row's vector v.
func (ts tileShape) typ(v int) string {
	if ts.half && v == ts.nv-1 {
		return vectorType(ts.lanes / 2)
	}
	return vectorType(ts.lanes)
}

// maskOps are an instruction set's masked loads and stores of the first kiln_rr lanes of
// a vector (the rest read as zero and left unwritten): setup declares the mask from
// kiln_rr (1..lanes), load and store print one access at a pointer expression;
// halfLoad and halfStore those of a half vector (AVX-512's ymm under the low 8 bits of
// the mask; kiln_rr ≤ lanes/2 there). The generic family has none.
type maskOps struct {
	setup               string
	load, store         func(ptr, v string) string
	halfLoad, halfStore func(ptr, v string) string
}

// familyMask is the masked access of an instruction set's vectors, nil where it has
// none: AVX-512's zero-masking loads and masked stores under a 16-bit lane mask, AVX2's
// vmaskmovps under a vector of lane masks (GCC's and Clang's builtins, header-free).
func familyMask(isa, vt string, lanes int) *maskOps {
	switch {
	case isa == "avx512" && lanes == 16:
		return &maskOps{
			setup: "    const unsigned short kiln_mk = (unsigned short)((1u << kiln_rr) - 1u);\n",
			load: func(p, _ string) string {
				return fmt.Sprintf("__builtin_ia32_loadups512_mask((const float *)(%s), (%s){0}, kiln_mk)", p, vt)
			},
			store: func(p, v string) string {
				return fmt.Sprintf("__builtin_ia32_storeups512_mask((float *)(%s), %s, kiln_mk);", p, v)
			},
			halfLoad: func(p, _ string) string {
				return fmt.Sprintf("__builtin_ia32_loadups256_mask((const float *)(%s), (%s){0}, (unsigned char)kiln_mk)", p, vectorType(8))
			},
			halfStore: func(p, v string) string {
				return fmt.Sprintf("__builtin_ia32_storeups256_mask((float *)(%s), %s, (unsigned char)kiln_mk);", p, v)
			},
		}
	case isa == "avx2" && lanes == 8:
		return &maskOps{
			setup: "    typedef int kiln_i32x8 __attribute__((vector_size(32)));\n" +
				"    const kiln_i32x8 kiln_mk = (kiln_i32x8){0, 1, 2, 3, 4, 5, 6, 7} < (kiln_i32x8){kiln_rr, kiln_rr, kiln_rr, kiln_rr, kiln_rr, kiln_rr, kiln_rr, kiln_rr};\n",
			load: func(p, _ string) string {
				return fmt.Sprintf("__builtin_ia32_maskloadps256((const %s *)(%s), kiln_mk)", vt, p)
			},
			store: func(p, v string) string {
				return fmt.Sprintf("__builtin_ia32_maskstoreps256((%s *)(%s), kiln_mk, %s);", vt, p, v)
			},
		}
	}
	return nil
}

// gemmRowPointers declares A's row pointers a0..a(mr-1) of a tile with m valid rows:
// rows at or beyond m repeat the last valid one (computed, never stored).
func gemmRowPointers(w func(string, ...any), mr int) {
	for i := 0; i < mr; i++ {
		w("    const float *a%d = a + (m > %d ? %d : m - 1) * a_si;\n", i, i, i)
	}
}

// gemmNarrow prints the path of a partial column count n < nr: n covers nf whole
// vectors and rr more lanes. Where the family masks (AVX-512, AVX2), one tile of
// nf + (rr > 0) vectors, the last under the mask of its first rr lanes (all lanes when
// rr is 0): the same loop as the full tile, narrower. Without masks (the generic family),
// a tile of the nf whole vectors, then the rr columns left by the scalar body (printed by
// scalar inside loops over i < m and j). Partial rows as in every tile (gemmRowPointers).
func gemmNarrow(w func(string, ...any), isa string, full tileShape, tile func(tileShape), scalar func()) {
	mask := familyMask(isa, vectorType(full.lanes), full.lanes)
	if full.half && (mask == nil || mask.halfLoad == nil) {
		panic(fmt.Sprintf("BUG: a %s tile with a half vector and no masked half accesses", isa))
	}
	w("    const i64 nf = n / %d;\n", full.lanes)
	gemmRowPointers(w, full.mr)
	sel, lo, hi := "nf", 1, full.nv-1
	if mask != nil {
		w("    const int kiln_rr = (int)(n - nf * %d) > 0 ? (int)(n - nf * %d) : %d;\n", full.lanes, full.lanes, full.lanes)
		w("%s", mask.setup)
		sel, hi = fmt.Sprintf("nf + (nf * %d < n)", full.lanes), full.nv
	}
	if lo <= hi {
		w("    switch (%s) {\n", sel)
		for nv := lo; nv <= hi; nv++ {
			ts := full
			ts.nv, ts.masked = nv, mask
			ts.half = full.half && nv == full.nv // n < nr: at most lanes/2 − 1 lanes in it
			w("    case %d: {\n", nv)
			tile(ts)
			w("    } break;\n")
		}
		w("    }\n")
	}
	if mask == nil {
		w("    for (i64 i = 0; i < m; ++i) for (i64 j = nf * %d; j < n; ++j) {\n", full.lanes)
		scalar()
		w("    }\n")
	}
}

// vecLoad prints the load of vector v of a row at pointer expression p (of tile ts):
// masked for the last vector of a masked tile.
func (ts tileShape) vecLoad(p string, v int) string {
	if ts.masked != nil && v == ts.nv-1 {
		if ts.half {
			return ts.masked.halfLoad(p, "")
		}
		return ts.masked.load(p, "")
	}
	return fmt.Sprintf("*(const %su *)(%s)", ts.typ(v), p)
}

// gemmTile prints the register-tile loop: load the C tile (zero it with zero), then per
// k load nv vectors of B, broadcast one A element per row and accumulate, then store the
// tile. With partial, rows at or beyond m are neither loaded nor stored.
func gemmTile(w func(string, ...any), ts tileShape, row func(int) string, partial, zero bool) {
	for i := 0; i < ts.mr; i++ {
		for v := 0; v < ts.nv; v++ {
			ld := ts.vecLoad(fmt.Sprintf("c + %d * c_si + %d", i, v*ts.lanes), v)
			switch {
			case zero:
				ld = fmt.Sprintf("(%s){0}", ts.typ(v))
			case partial:
				ld = fmt.Sprintf("m > %d ? %s : (%s){0}", i, ld, ts.typ(v))
			}
			w("    %s c%d_%d = %s;\n", ts.typ(v), i, v, ld)
		}
	}
	gemmKLoop(w, ts, row, "b", !zero && ts.lanes >= prefetchLanes)
	gemmStore(w, ts, partial)
}

// prefetchLanes: the Update form of tiles of vectors this wide (AVX-512) prefetches the
// panel of B that follows its own.
const prefetchLanes = 16

// gemmKLoop prints the k loop over one reduction run: per k, nv vectors of B (from the
// pointer named b) and one broadcast A element per row, accumulated into the tile.
// With prefetch, each k also asks for the same row of the next panel of B (kk rows
// on): a blocked convolution's weights are stored panel after panel in the order its
// calls take them, so the next call's panel streams in from memory while this one
// computes (the hardware prefetchers stop at each 4 KiB page). Measured on an AVX-512
// Xeon on resnet50's 3×3 512→512 layer at 7×7 with its weights cold in memory (C
// harness, thread CPU time, medians of 30): 2.2 ms with RowsInner and this prefetch,
// 2.6 ms with neither.
func gemmKLoop(w func(string, ...any), ts tileShape, row func(int) string, b string, prefetch bool) {
	w("    for (i64 k = 0; k < kk; ++k) {\n")
	if prefetch {
		w("      { const float *pf = %s + (kk + k) * b_sk;", b)
		for v := 0; v < ts.nv; v++ {
			w(" __builtin_prefetch(pf + %d, 0, 1);", v*ts.lanes)
		}
		w(" }\n")
	}
	for v := 0; v < ts.nv; v++ {
		w("      const %s b%d = %s;\n", ts.typ(v), v, ts.vecLoad(fmt.Sprintf("%s + k * b_sk + %d", b, v*ts.lanes), v))
	}
	for i := 0; i < ts.mr; i++ {
		w("      { const float x = %s[k * a_sk];", row(i))
		for v := 0; v < ts.nv; v++ {
			w(" c%d_%d += x * b%d;", i, v, v)
		}
		w(" }\n")
	}
	w("    }\n")
}

// gemmStore prints the tile's store; with partial, rows at or beyond m are not stored.
func gemmStore(w func(string, ...any), ts tileShape, partial bool) {
	for i := 0; i < ts.mr; i++ {
		if partial {
			w("    if (m > %d) {", i)
		} else {
			w("    {")
		}
		for v := 0; v < ts.nv; v++ {
			p := fmt.Sprintf("c + %d * c_si + %d", i, v*ts.lanes)
			if ts.masked != nil && v == ts.nv-1 {
				store := ts.masked.store
				if ts.half {
					store = ts.masked.halfStore
				}
				w(" %s", store(p, fmt.Sprintf("c%d_%d", i, v)))
				continue
			}
			w(" *(%su *)(%s) = c%d_%d;", ts.typ(v), p, i, v)
		}
		w(" }\n")
	}
}
