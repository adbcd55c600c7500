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

// gemmU8S8C prints the implementation: the tile of gemmIntC (writeGroupTiles) over quads
// with vpdpbusd (the unsigned quad of A broadcast, the signed quads of B).
func gemmU8S8C(name string, lanes, mr, nv int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	writeGroupHeader(w, name, "u8", "i8", mr)
	vt := fmt.Sprintf("kiln_i32x%d", lanes)
	w("  typedef int %s __attribute__((vector_size(%d)));\n", vt, 4*lanes)
	w("  typedef int %su __attribute__((vector_size(%d), aligned(1)));\n", vt, 4*lanes)
	w("  typedef int kiln_i32a1 __attribute__((aligned(1), may_alias));\n")
	madd := func(acc, x, y string) string {
		return fmt.Sprintf("        %[1]s = __builtin_ia32_vpdpbusd_v16si(%[1]s, %[2]s, %[3]s);\n", acc, x, y)
	}
	writeGroupTiles(w, groupTile{vt: vt, at: "u8", bt: "i8", aLoad: "kiln_i32a1", g: 4, lanes: lanes, mr: mr, nv: nv, madd: madd})
	return b.String()
}
