package intrin

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// GemmInt is one integer micro-kernel of the quantized convolutions, in the Blocks form
// (intrin.Gemm's): on an MR × NR tile of int32 C, C[i, j] = Σ_kb Σ_ky Σ_k Σ_e A[i, kb, ky, k, e]·
// B[kb, ky, k, j, e] from zero, A and B int16 and the products summed in int32 (exact:
// a quantized operand shifted by its zero point is within ±255, a product within
// ±65025). The reduction's innermost axis e pairs two consecutive elements: A's pair is
// contiguous (stride 1 along e), and B stores the pairs of its NR columns side by side
// (stride 2 along j, 1 along e), the layout of the pairwise multiply-add instructions
// (vpmaddwd, and AVX-512 VNNI's vpdpwssd, which also accumulates): per k one 32-bit
// broadcast of A's pair per row of the tile, NR/lanes vectors of B. Rows (i) may be
// partial at run time; the columns are whole (a strategy pads the weights' output
// channels to NR with zeros). There is no Update form: a call per input channel block
// and kernel row (the float convolution's SplitK) measured the same as one call per
// tile on ISNet's quantized layers (machine G, one thread: 3.82 against 3.85 s).
type GemmInt struct {
	Blocks *loopir.TensorIntrin
	MR, NR int64
}

// GemmI16 declares the integer micro-kernel of an instruction set: vectors of lanes
// int32 accumulators, mr rows, nv vectors per row. The generic family is portable C.
func GemmI16(isa string, lanes, mr, nv int) GemmInt {
	if lanes <= 0 || mr <= 0 || nv <= 0 {
		panic(fmt.Sprintf("BUG: GemmI16(%d, %d, %d)", lanes, mr, nv))
	}
	nr := nv * lanes
	name := fmt.Sprintf("kiln_gemm_i16_%s_%dx%d_blocks", isa, mr, nr)
	return GemmInt{MR: int64(mr), NR: int64(nr), Blocks: &loopir.TensorIntrin{
		Name: name,
		Desc: gemmGroupDesc(name, int64(mr), int64(nr), 2, tensor.Int16, tensor.Int16),
		// C contiguous along j, A's and B's pairs along e
		Unit:    [][2]int{{0, 1}, {1, 5}, {2, 5}},
		Strides: [][3]int{{2, 1, 2}}, // B's columns are pairs apart
		Partial: []bool{true, false, false, false, false, false},
		Impl:    map[string]string{"c": gemmIntC(name, isa, lanes, mr, nv)},
	}}
}

// writeGroupHeader prints the signature of a Blocks-form integer micro-kernel over
// groups of A's element type at and B's bt, and its clamp of the tile's rows to mr.
func writeGroupHeader(w func(string, ...any), name, at, bt string, mr int) {
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    i32 *restrict c, i64 c_si, i64 c_sj, i64 c_skb, i64 c_sky, i64 c_sk, i64 c_se,\n")
	w("    const %s *restrict a, i64 a_si, i64 a_sj, i64 a_skb, i64 a_sky, i64 a_sk, i64 a_se,\n", at)
	w("    const %s *restrict b, i64 b_si, i64 b_sj, i64 b_skb, i64 b_sky, i64 b_sk, i64 b_se,\n", bt)
	w("    i64 m, i64 n, i64 nkb, i64 nky, i64 kk, i64 ne) {\n")
	w("  (void)c_skb; (void)c_sky;\n")
	w("  (void)c_sj; (void)c_sk; (void)c_se; (void)a_sj; (void)a_se;\n")
	w("  (void)b_si; (void)b_sj; (void)b_se; (void)n; (void)ne;\n")
	w("  if (m <= 0) return;\n")
	w("  if (m > %d) m = %d;\n", mr, mr)
}

// groupTile describes the register tile of a vector integer micro-kernel: int32
// vectors vt of lanes lanes, mr rows by nv vectors of sums; A's group of g elements of
// type at broadcast to every lane through the unaligned int typedef aLoad, B's groups of
// type bt side by side; madd prints the statement that adds x·y into acc.
type groupTile struct {
	vt, at, bt, aLoad string
	g, lanes, mr, nv  int
	madd              func(acc, x, y string) string
}

// writeGroupTiles prints the micro-kernel's body: one case per row count up to mr, its
// sums in registers across the input blocks, kernel rows and groups, then stored.
func writeGroupTiles(w func(string, ...any), t groupTile) {
	w("  switch (m) {\n")
	for rows := t.mr; rows >= 1; rows-- {
		w("  case %d: {\n", rows)
		for i := 0; i < rows; i++ {
			for v := 0; v < t.nv; v++ {
				w("    %s c%d_%d = (%s){0};\n", t.vt, i, v, t.vt)
			}
		}
		w("    for (i64 ib = 0; ib < nkb; ++ib) for (i64 iy = 0; iy < nky; ++iy) {\n")
		w("      const %s *restrict aa = a + ib * a_skb + iy * a_sky;\n", t.at)
		w("      const %s *restrict bb = b + ib * b_skb + iy * b_sky;\n", t.bt)
		w("      for (i64 k = 0; k < kk; ++k) {\n")
		for v := 0; v < t.nv; v++ {
			w("        const %s b%d = *(const %su *)(bb + k * b_sk + %d);\n", t.vt, v, t.vt, t.g*v*t.lanes)
		}
		for i := 0; i < rows; i++ {
			w("        { const %s x = (%s){0} + *(const %s *)(aa + %d * a_si + k * a_sk);\n", t.vt, t.vt, t.aLoad, i)
			for v := 0; v < t.nv; v++ {
				w("%s", t.madd(fmt.Sprintf("c%d_%d", i, v), "x", fmt.Sprintf("b%d", v)))
			}
			w("        }\n")
		}
		w("      }\n    }\n")
		for i := 0; i < rows; i++ {
			for v := 0; v < t.nv; v++ {
				w("    *(%su *)(c + %d * c_si + %d) = c%d_%d;\n", t.vt, i, v*t.lanes, i, v)
			}
		}
		w("  } break;\n")
	}
	w("  }\n}\n")
}

// gemmGroupDesc: C [mr, nr] int32, A [mr, KB, KY, K, g] of adt and B [KB, KY, K, nr, g]
// of bdt, loops i < mr, j < nr, kb < KB, ky < KY, k < K, e < g; C starts at 0.
func gemmGroupDesc(name string, mr, nr, g int64, adt, bdt tensor.DType) *loopir.PrimFunc {
	KB, KY, K := loopir.NewVar("KB"), loopir.NewVar("KY"), loopir.NewVar("K")
	two, one := loopir.Int(g), loopir.Int(1)
	loops := []*loopir.Var{loopir.NewVar("i"), loopir.NewVar("j"), loopir.NewVar("kb"), loopir.NewVar("ky"), loopir.NewVar("k"), loopir.NewVar("e")}
	vars := []*loopir.Var{loopir.NewVar("vi"), loopir.NewVar("vj"), loopir.NewVar("vkb"), loopir.NewVar("vky"), loopir.NewVar("vk"), loopir.NewVar("ve")}
	extents := []loopir.Expr{loopir.Int(mr), loopir.Int(nr), KB, KY, K, two}
	dims := []*loopir.Var{KB, KY, K}
	vi, vj, vkb, vky, vk, ve := vars[0], vars[1], vars[2], vars[3], vars[4], vars[5]
	aShape, bShape := []loopir.Expr{loopir.Int(mr), KB, KY, K, two}, []loopir.Expr{KB, KY, K, loopir.Int(nr), two}
	aIdx, bIdx := []loopir.Expr{vi, vkb, vky, vk, ve}, []loopir.Expr{vkb, vky, vk, vj, ve}
	c := &loopir.Buffer{Name: "C", DT: tensor.Int32, Shape: []loopir.Expr{loopir.Int(mr), loopir.Int(nr)}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: adt, Shape: aShape, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: bdt, Shape: bShape, Scope: "global"}
	cij := []loopir.Expr{vi, vj}
	ranges := func(idx []loopir.Expr) [][2]loopir.Expr {
		r := make([][2]loopir.Expr, len(idx))
		for i, e := range idx {
			r[i] = [2]loopir.Expr{e, one}
		}
		return r
	}
	iters := make([]loopir.IterVar, len(loops))
	bindings := make([]loopir.Expr, len(loops))
	for t, v := range vars {
		kind := loopir.Reduction
		if t < 2 {
			kind = loopir.Spatial
		}
		iters[t] = loopir.IterVar{Var: v, Extent: extents[t], Kind: kind}
		bindings[t] = loops[t]
	}
	blk := &loopir.Block{
		Name:     "update",
		Iters:    iters,
		Bindings: bindings,
		Reads:    []loopir.Region{{Buf: a, Ranges: ranges(aIdx)}, {Buf: b, Ranges: ranges(bIdx)}},
		Writes:   []loopir.Region{{Buf: c, Ranges: ranges(cij)}},
		Body: &loopir.Store{Buf: c, Index: cij, Value: loopir.Bin(loopir.Add,
			&loopir.Load{Buf: c, Index: cij},
			loopir.Bin(loopir.Mul,
				&loopir.Cast{To: tensor.Int32, X: &loopir.Load{Buf: a, Index: aIdx}},
				&loopir.Cast{To: tensor.Int32, X: &loopir.Load{Buf: b, Index: bIdx}}))},
		Init: &loopir.Store{Buf: c, Index: cij, Value: &loopir.IntImm{V: 0, DT: tensor.Int32}},
	}
	var body loopir.Stmt = blk
	for t := len(loops) - 1; t >= 0; t-- {
		body = &loopir.For{Var: loops[t], Min: loopir.Int(0), Extent: extents[t], Body: body}
	}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Dims: dims, Body: body}
}

// gemmIntC prints the implementation. The x86 families broadcast A's pair as one int32 and multiply-add pairs: vpdpwssd
// where the compiler targets AVX-512 VNNI (on 512- or, with AVX-512VL, 256-bit
// vectors), else vpmaddwd and an add. The generic family runs the same sum in scalar C
// (the compiler vectorizes what it can).
func gemmIntC(name, isa string, lanes, mr, nv int) string {
	nr := lanes * nv
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	writeGroupHeader(w, name, "i16", "i16", mr)
	if isa == "generic" {
		// per row, the nr sums in an array the compiler keeps in vector registers,
		// the column loop innermost over B's interleaved pairs
		w("  for (i64 i = 0; i < m; ++i) {\n")
		w("    i32 s[%d] = {0};\n", nr)
		w("    for (i64 ib = 0; ib < nkb; ++ib) for (i64 iy = 0; iy < nky; ++iy) for (i64 k = 0; k < kk; ++k) {\n")
		w("      const i16 *p = a + i * a_si + ib * a_skb + iy * a_sky + k * a_sk;\n")
		w("      const i16 *q = b + ib * b_skb + iy * b_sky + k * b_sk;\n")
		w("      const i32 x0 = p[0], x1 = p[1];\n")
		w("      for (int j = 0; j < %d; ++j) s[j] += x0 * (i32)q[2 * j] + x1 * (i32)q[2 * j + 1];\n", nr)
		w("    }\n")
		w("    for (int j = 0; j < %d; ++j) c[i * c_si + j] = s[j];\n", nr)
		w("  }\n}\n")
		return b.String()
	}
	vt, ht := fmt.Sprintf("kiln_i32x%d", lanes), fmt.Sprintf("kiln_i16x%d", 2*lanes)
	w("  typedef int %s __attribute__((vector_size(%d)));\n", vt, 4*lanes)
	w("  typedef int %su __attribute__((vector_size(%d), aligned(4)));\n", vt, 4*lanes)
	w("  typedef short %s __attribute__((vector_size(%d)));\n", ht, 4*lanes)
	w("  typedef int kiln_i32a2 __attribute__((aligned(2), may_alias));\n")
	madd := func(acc, x, y string) string {
		if lanes == 16 {
			return fmt.Sprintf("#if defined(__AVX512VNNI__)\n        %[1]s = __builtin_ia32_vpdpwssd_v16si(%[1]s, %[2]s, %[3]s);\n#else\n        %[1]s += __builtin_ia32_pmaddwd512_mask((%[4]s)%[2]s, (%[4]s)%[3]s, (%[5]s){0}, (unsigned short)0xffff);\n#endif\n", acc, x, y, ht, vt)
		}
		return fmt.Sprintf("#if defined(__AVX512VNNI__) && defined(__AVX512VL__)\n        %[1]s = __builtin_ia32_vpdpwssd_v8si(%[1]s, %[2]s, %[3]s);\n#else\n        %[1]s += __builtin_ia32_pmaddwd256((%[4]s)%[2]s, (%[4]s)%[3]s);\n#endif\n", acc, x, y, ht)
	}
	writeGroupTiles(w, groupTile{vt: vt, at: "i16", bt: "i16", aLoad: "kiln_i32a2", g: 2, lanes: lanes, mr: mr, nv: nv, madd: madd})
	return b.String()
}

// intFamily is the integer micro-kernels of one instruction set, widest first, each
// tile sized to the register file as the float32 ones (tiles.go): mr·nv accumulators,
// nv vectors of B, the broadcast and, without VNNI, the product before its add.
type intFamily struct {
	isa   string
	lanes int
	tiles []tile
}

// The integer families: AVX-512 6×64 (24 accumulators), 12×32 and 14×16 for output
// channels that 64 does not divide; AVX2 6×16 and 8×8; the generic 4×8.
var (
	intAVX512  = intFamily{"avx512", 16, []tile{{nv: 4, mr: 6}, {nv: 2, mr: 12}, {nv: 1, mr: 14}}}
	intAVX2    = intFamily{"avx2", 8, []tile{{nv: 2, mr: 6}, {nv: 1, mr: 8}}}
	intGeneric = intFamily{"generic", 4, []tile{{nv: 2, mr: 4}}}
)

// intFamilyFor is the integer family a CPU target runs: AVX-512 needs AVX512BW for
// its 16-bit multiply-add.
func intFamilyFor(t target.Target) intFamily {
	switch {
	case t.Has("avx512f") && t.Has("avx512bw"):
		return intAVX512
	case t.Has("avx2"):
		return intAVX2
	}
	return intGeneric
}

// GemmIntTile chooses the integer micro-kernel of a CPU target for cols output
// columns: the widest tile whose width divides cols, else the narrowest (the least
// padding of the columns).
func GemmIntTile(t target.Target, cols int64) GemmInt {
	f := intFamilyFor(t)
	pick := f.tiles[len(f.tiles)-1]
	for _, tl := range f.tiles {
		if cols > 0 && cols%int64(tl.nv*f.lanes) == 0 {
			pick = tl
			break
		}
	}
	return GemmI16(f.isa, f.lanes, pick.mr, pick.nv)
}

// GemmInts lists every declared integer micro-kernel, the 8-bit ones (GemmU8S8) last.
func GemmInts() []GemmInt {
	var out []GemmInt
	for _, f := range []intFamily{intAVX512, intAVX2, intGeneric} {
		for _, tl := range f.tiles {
			out = append(out, GemmI16(f.isa, f.lanes, tl.mr, tl.nv))
		}
	}
	for _, tl := range intAVX512.tiles {
		out = append(out, GemmU8S8(intAVX512.lanes, tl.mr, tl.nv))
	}
	return out
}
