package intrin

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// GemmU8S8 declares the 8-bit integer micro-kernel of AVX-512 VNNI (the Blocks form of
// GemmInt over quads): C[i, j] = Σ_kb Σ_ky Σ_k Σ_e A[i, kb, ky, k, e]·B[kb, ky, k, j, e]
// from zero with e < 4, A uint8 (a quad broadcast as one int32 per row), B int8 (the
// quads of the NR columns side by side: stride 4 along j), one vpdpbusd per vector of B
// adding four products per lane: twice the int16 pairs' rate. Only operands that fit
// take it: data as stored (uint8, its zero point handled by the caller) and weights
// minus their zero point within int8.
func GemmU8S8(lanes, mr, nv int) GemmInt {
	if lanes != 16 || mr <= 0 || nv <= 0 {
		panic(fmt.Sprintf("BUG: GemmU8S8(%d, %d, %d)", lanes, mr, nv))
	}
	nr := nv * lanes
	name := fmt.Sprintf("kiln_gemm_u8s8_avx512_%dx%d_blocks", mr, nr)
	return GemmInt{MR: int64(mr), NR: int64(nr), Blocks: &loopir.TensorIntrin{
		Name:    name,
		Desc:    gemmGroupDesc(name, int64(mr), int64(nr), 4, tensor.Uint8, tensor.Int8),
		Unit:    [][2]int{{0, 1}, {1, 5}, {2, 5}},
		Strides: [][3]int{{2, 1, 4}}, // B's columns are quads apart
		Partial: []bool{true, false, false, false, false, false},
		Impl:    map[string]string{"c": gemmU8S8C(name, lanes, mr, nv)},
	}}
}

// GemmU8S8Tile is the 8-bit micro-kernel of a target for cols output columns (tiles as
// GemmIntTile's on AVX-512), and false where the target has no AVX-512 VNNI.
func GemmU8S8Tile(t target.Target, cols int64) (GemmInt, bool) {
	if !t.Has("avx512f") || !t.Has("avx512bw") || !t.Has("avx512vnni") {
		return GemmInt{}, false
	}
	f := intAVX512
	pick := f.tiles[len(f.tiles)-1]
	for _, tl := range f.tiles {
		if cols > 0 && cols%int64(tl.nv*f.lanes) == 0 {
			pick = tl
			break
		}
	}
	return GemmU8S8(f.lanes, pick.mr, pick.nv), true
}

// gemmU8S8C prints the implementation: gemmIntC's tile with quads and vpdpbusd (the
// unsigned quad of A broadcast, the signed quads of B).
func gemmU8S8C(name string, lanes, mr, nv int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    i32 *restrict c, i64 c_si, i64 c_sj, i64 c_skb, i64 c_sky, i64 c_sk, i64 c_se,\n")
	w("    const u8 *restrict a, i64 a_si, i64 a_sj, i64 a_skb, i64 a_sky, i64 a_sk, i64 a_se,\n")
	w("    const i8 *restrict b, i64 b_si, i64 b_sj, i64 b_skb, i64 b_sky, i64 b_sk, i64 b_se,\n")
	w("    i64 m, i64 n, i64 nkb, i64 nky, i64 kk, i64 ne) {\n")
	w("  (void)c_skb; (void)c_sky; (void)c_sj; (void)c_sk; (void)c_se; (void)a_sj; (void)a_se;\n")
	w("  (void)b_si; (void)b_sj; (void)b_se; (void)n; (void)ne;\n")
	w("  if (m <= 0) return;\n")
	w("  if (m > %d) m = %d;\n", mr, mr)
	vt := fmt.Sprintf("kiln_i32x%d", lanes)
	w("  typedef int %s __attribute__((vector_size(%d)));\n", vt, 4*lanes)
	w("  typedef int %su __attribute__((vector_size(%d), aligned(1)));\n", vt, 4*lanes)
	w("  typedef int kiln_i32a1 __attribute__((aligned(1), may_alias));\n")
	w("  switch (m) {\n")
	for rows := mr; rows >= 1; rows-- {
		w("  case %d: {\n", rows)
		for i := 0; i < rows; i++ {
			for v := 0; v < nv; v++ {
				w("    %s c%d_%d = (%s){0};\n", vt, i, v, vt)
			}
		}
		w("    for (i64 ib = 0; ib < nkb; ++ib) for (i64 iy = 0; iy < nky; ++iy) {\n")
		w("      const u8 *restrict aa = a + ib * a_skb + iy * a_sky;\n")
		w("      const i8 *restrict bb = b + ib * b_skb + iy * b_sky;\n")
		w("      for (i64 k = 0; k < kk; ++k) {\n")
		for v := 0; v < nv; v++ {
			w("        const %s b%d = *(const %su *)(bb + k * b_sk + %d);\n", vt, v, vt, 4*v*lanes)
		}
		for i := 0; i < rows; i++ {
			w("        { const %s x = (%s){0} + *(const kiln_i32a1 *)(aa + %d * a_si + k * a_sk);", vt, vt, i)
			for v := 0; v < nv; v++ {
				w(" c%d_%d = __builtin_ia32_vpdpbusd_v16si(c%d_%d, x, b%d);", i, v, i, v, v)
			}
			w(" }\n")
		}
		w("      }\n    }\n")
		for i := 0; i < rows; i++ {
			for v := 0; v < nv; v++ {
				w("    *(%su *)(c + %d * c_si + %d) = c%d_%d;\n", vt, i, v*lanes, i, v)
			}
		}
		w("  } break;\n")
	}
	w("  }\n}\n")
	return b.String()
}
