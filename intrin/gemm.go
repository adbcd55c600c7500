package intrin

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// GemmF32 declares the float32 outer-product update C[i, j] += Σ_k A[i, k]·B[k, j] on an
// mr × (nv·lanes) tile of C for any K: per k it loads nv vectors of B's row k and
// broadcasts one element of A per row of the tile. B's and C's rows must be contiguous
// (stride 1 along j); A may have any strides. Rows beyond a partial m are computed on a
// repeated row and never stored; a partial n takes a scalar path.
func GemmF32(isa string, lanes, mr, nv int) *loopir.TensorIntrin {
	if lanes <= 0 || mr <= 0 || nv <= 0 {
		panic(fmt.Sprintf("BUG: GemmF32(%d, %d, %d)", lanes, mr, nv))
	}
	nr := nv * lanes
	name := fmt.Sprintf("kiln_gemm_f32_%s_%dx%d", isa, mr, nr)
	return &loopir.TensorIntrin{
		Name:    name,
		Desc:    gemmDesc(name, int64(mr), int64(nr)),
		Unit:    [][2]int{{0, 1}, {2, 1}}, // C and B contiguous along j
		Partial: []bool{true, true, true},
		Impl:    map[string]string{"c": gemmC(name, lanes, mr, nv)},
	}
}

// gemmDesc: C, A, B with loops i < mr, j < nr, k < K.
func gemmDesc(name string, mr, nr int64) *loopir.PrimFunc {
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
	body := &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Int(mr), Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(nr),
		Body: &loopir.For{Var: k, Min: loopir.Int(0), Extent: K, Body: blk}}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Dims: []*loopir.Var{K}, Body: body}
}

// gemmC prints the implementation: straight-line C (no pragmas, so GCC and Clang both
// keep the mr·nv accumulators in registers), inlined into its caller so that constant
// strides fold into addressing.
func gemmC(name string, lanes, mr, nv int) string {
	nr := lanes * nv
	vt := fmt.Sprintf("kiln_f32x%d", lanes)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("typedef float %s __attribute__((vector_size(%d)));\n", vt, 4*lanes)
	w("typedef float %su __attribute__((vector_size(%d), aligned(4)));\n", vt, 4*lanes)
	w("static inline __attribute__((always_inline)) void %s(\n", name)
	w("    float *restrict c, i64 c_si, i64 c_sj, i64 c_sk,\n")
	w("    const float *restrict a, i64 a_si, i64 a_sj, i64 a_sk,\n")
	w("    const float *restrict b, i64 b_si, i64 b_sj, i64 b_sk,\n")
	w("    i64 m, i64 n, i64 kk) {\n")
	w("  (void)c_sj; (void)c_sk; (void)a_sj; (void)b_si; (void)b_sj;\n")
	w("  if (m <= 0 || n <= 0 || kk <= 0) return;\n")
	w("  if (m > %d) m = %d;\n  if (n > %d) n = %d;\n", mr, mr, nr, nr)
	// partial n: the plain loop nest of the description
	w("  if (n < %d) {\n", nr)
	w("    for (i64 i = 0; i < m; ++i) for (i64 j = 0; j < n; ++j) {\n")
	w("      float s = c[i * c_si + j];\n")
	w("      for (i64 k = 0; k < kk; ++k) s += a[i * a_si + k * a_sk] * b[k * b_sk + j];\n")
	w("      c[i * c_si + j] = s;\n    }\n    return;\n  }\n")
	for i := 0; i < mr; i++ {
		w("  const float *a%d = a + (m > %d ? %d : m - 1) * a_si;\n", i, i, i)
	}
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			w("  %s c%d_%d = m > %d ? *(const %su *)(c + %d * c_si + %d) : (%s){0};\n", vt, i, v, i, vt, i, v*lanes, vt)
		}
	}
	w("  for (i64 k = 0; k < kk; ++k) {\n")
	for v := 0; v < nv; v++ {
		w("    const %s b%d = *(const %su *)(b + k * b_sk + %d);\n", vt, v, vt, v*lanes)
	}
	for i := 0; i < mr; i++ {
		w("    { const float x = a%d[k * a_sk];", i)
		for v := 0; v < nv; v++ {
			w(" c%d_%d += x * b%d;", i, v, v)
		}
		w(" }\n")
	}
	w("  }\n")
	for i := 0; i < mr; i++ {
		w("  if (m > %d) {", i)
		for v := 0; v < nv; v++ {
			w(" *(%su *)(c + %d * c_si + %d) = c%d_%d;", vt, i, v*lanes, i, v)
		}
		w(" }\n")
	}
	w("}\n")
	return b.String()
}

// Table lists every declared intrinsic (for trace replay by name).
func Table() []*loopir.TensorIntrin {
	return []*loopir.TensorIntrin{
		GemmF32("avx512", 16, 14, 2),
		GemmF32("avx512", 16, 6, 4),
		GemmF32("avx2", 8, 6, 2),
		GemmF32("generic", 4, 4, 2),
	}
}

// GemmFor picks the float32 GEMM micro-kernel for a CPU target: 14×32 on AVX-512
// (28 of 32 vector registers accumulate), 6×16 on AVX2 (12 of 16), and a 4×8 kernel on
// 128-bit vectors otherwise.
func GemmFor(t target.Target) *loopir.TensorIntrin {
	switch {
	case t.Has("avx512f"):
		return GemmF32("avx512", 16, 14, 2)
	case t.Has("avx2") && t.Has("fma"):
		return GemmF32("avx2", 8, 6, 2)
	}
	return GemmF32("generic", 4, 4, 2)
}
