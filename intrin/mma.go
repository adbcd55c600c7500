package intrin

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// MMA is a warp-cooperative matrix-multiply-accumulate on tensor cores, declared as a
// tensor intrinsic whose description is one thread's work: C[i, j] += Σ_k A[i, k]·B[k, j]
// over the thread's RM × RN register tile (loops k < BK, i < RM, j < RN, every extent
// Partial). The implementation is correct only when the calling schedule lays its threads
// out as the fragments of the instruction need (gpu.ScheduleMatMulMMA does):
//
//   - lane = g·4 + t within the warp, g < 8 the lane's row group and t < 4 its column
//     group (threadIdx.y and threadIdx.x of a block of 4 × 8 × warps threads);
//   - lane (g, t) owns rows g·RM … g·RM + RM − 1 and columns t·RN … t·RN + RN − 1 of the
//     warp's 8·RM × 4·RN tile, contiguous in the A and B tiles (A's rows and B's columns
//     affine in the tile position, as a shared-memory copy of the block's tiles is);
//   - every lane of the warp reaches the call together with the same k extent (k is not
//     per lane); row and column extents may differ per lane (tails).
//
// Each m16n8k8 instruction takes rows {2·mt, 2·mt + 1} of every row group (16 rows) and
// columns {2·nt, 2·nt + 1} of every column group (8 columns): the A fragment of lane
// (g, t) is the lane's own rows, its C fragment its own accumulators, and its B fragment
// (column g of the instruction's eight) lies in the columns of lane (·, g/2), so the
// implementation addresses B from the warp's tile origin. Operands are rounded to TF32
// (cvt.rna.tf32.f32: 10-bit mantissa, to nearest, ties away from zero) and accumulate in
// float32. K past the run-time extent is read as zero (the tile past K may hold anything);
// rows and columns past theirs are computed on whatever the tiles hold there (each
// result element reads only its own row of A and column of B) and never stored.
type MMA struct {
	Intrin     *loopir.TensorIntrin
	RM, RN, BK int64
	// MinMajor is the least compute capability major version with the instruction.
	MinMajor int
}

// MMAGroups are the fragment layout's lane groups: rows (g) and columns (t) of a warp.
const (
	MMARowGroups = 8
	MMAColGroups = 4
)

// MMATF32 declares the TF32 m16n8k8 intrinsic for a thread tile of rm × rn (both even)
// and bk (a multiple of 8) per call.
func MMATF32(rm, rn, bk int64) MMA {
	if rm <= 0 || rn <= 0 || rm%2 != 0 || rn%2 != 0 || bk <= 0 || bk%8 != 0 {
		panic(fmt.Sprintf("BUG: MMATF32(%d, %d, %d)", rm, rn, bk))
	}
	name := fmt.Sprintf("kiln_mma_tf32_%dx%d_k%d", rm, rn, bk)
	return MMA{RM: rm, RN: rn, BK: bk, MinMajor: 8, Intrin: &loopir.TensorIntrin{
		Name:    name,
		Desc:    mmaDesc(name, rm, rn, bk),
		Partial: []bool{true, true, true},
		Impl:    map[string]string{"cuda": mmaCUDA(name, rm, rn, bk)},
	}}
}

// Supports reports whether t is a CUDA target whose architecture ("sm_80", "sm_90a")
// has the instruction.
func (m MMA) Supports(t target.Target) bool {
	if t.Kind != target.CUDA || !strings.HasPrefix(t.Arch, "sm_") {
		return false
	}
	digits := strings.TrimRight(strings.TrimPrefix(t.Arch, "sm_"), "abcdefghijklmnopqrstuvwxyz")
	n, err := strconv.Atoi(digits)
	return err == nil && n/10 >= m.MinMajor
}

// MMAs lists every declared warp MMA intrinsic.
func MMAs() []MMA { return []MMA{MMATF32(4, 8, 16)} }

// mmaDesc: C (rm × rn), A (rm × bk), B (bk × rn) with loops k < bk, i < rm, j < rn
// (k outermost, as the tiled rule orders a thread's step).
func mmaDesc(name string, rm, rn, bk int64) *loopir.PrimFunc {
	c := &loopir.Buffer{Name: "C", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(rm), loopir.Int(rn)}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(rm), loopir.Int(bk)}, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(bk), loopir.Int(rn)}, Scope: "global"}
	i, j, k := loopir.NewVar("i"), loopir.NewVar("j"), loopir.NewVar("k")
	vi, vj, vk := loopir.NewVar("vi"), loopir.NewVar("vj"), loopir.NewVar("vk")
	cij := []loopir.Expr{vi, vj}
	blk := &loopir.Block{
		Name: "update",
		Iters: []loopir.IterVar{
			{Var: vk, Extent: loopir.Int(bk), Kind: loopir.Reduction},
			{Var: vi, Extent: loopir.Int(rm), Kind: loopir.Spatial},
			{Var: vj, Extent: loopir.Int(rn), Kind: loopir.Spatial},
		},
		Bindings: []loopir.Expr{k, i, j},
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
	body := &loopir.For{Var: k, Min: loopir.Int(0), Extent: loopir.Int(bk), Body: &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Int(rm),
		Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(rn), Body: blk}}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Body: body}
}

// mmaCUDA prints the implementation: the lane's accumulators loaded from its tile (zero
// past its extents), per 8 of k the A fragments of its rows and the B fragments of the
// warp's columns, rounded to TF32 (zero past kk), one mma.sync per (mt, nt), then the
// accumulators stored within the lane's extents. Loops over the tile are unrolled with
// constant bounds so that the accumulators stay in registers.
func mmaCUDA(name string, rm, rn, bk int64) string {
	mt, nt := rm/2, rn/2
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("static __device__ __forceinline__ unsigned kiln_tf32(float x) {\n")
	w("  unsigned r;\n  asm(\"cvt.rna.tf32.f32 %%0, %%1;\" : \"=r\"(r) : \"f\"(x));\n  return r;\n}\n")
	w("static __device__ __forceinline__ void %s(\n", name)
	w("    float *c, i64 c_sk, i64 c_si, i64 c_sj,\n")
	w("    const float *a, i64 a_sk, i64 a_si, i64 a_sj,\n")
	w("    const float *b, i64 b_sk, i64 b_si, i64 b_sj,\n")
	w("    i64 kk, i64 m, i64 n) {\n")
	w("  (void)c_sk; (void)a_sj; (void)b_si;\n")
	w("  unsigned lane;\n  asm(\"mov.u32 %%0, %%%%laneid;\" : \"=r\"(lane));\n")
	w("  const int g = (int)(lane >> 2), t = (int)(lane & 3);\n")
	w("  /* column g of each instruction's eight: lane (., g/2)'s column 2*nt + g%%2 */\n")
	w("  const float *bw = b + ((i64)((g >> 1) - t) * %d + (g & 1)) * b_sj;\n", rn)
	w("  float acc[%d][%d][4];\n", mt, nt)
	w("#pragma unroll\n  for (int x = 0; x < %d; ++x)\n#pragma unroll\n  for (int y = 0; y < %d; ++y)\n#pragma unroll\n  for (int h = 0; h < 4; ++h) {\n", mt, nt)
	w("    const i64 i = 2 * x + (h >> 1), j = 2 * y + (h & 1);\n")
	w("    acc[x][y][h] = (i < m && j < n) ? c[i * c_si + j * c_sj] : 0.0f;\n  }\n")
	w("#pragma unroll\n  for (int k0 = 0; k0 < %d; k0 += 8) {\n", bk)
	w("    if (k0 >= kk) break; /* kk is the same in every lane */\n")
	w("    const i64 k1 = k0 + t, k2 = k0 + t + 4;\n")
	w("    unsigned fa[%d][4], fb[%d][2];\n", mt, nt)
	w("#pragma unroll\n    for (int x = 0; x < %d; ++x) {\n", mt)
	w("      fa[x][0] = kiln_tf32(k1 < kk ? a[(2 * x) * a_si + k1 * a_sk] : 0.0f);\n")
	w("      fa[x][1] = kiln_tf32(k1 < kk ? a[(2 * x + 1) * a_si + k1 * a_sk] : 0.0f);\n")
	w("      fa[x][2] = kiln_tf32(k2 < kk ? a[(2 * x) * a_si + k2 * a_sk] : 0.0f);\n")
	w("      fa[x][3] = kiln_tf32(k2 < kk ? a[(2 * x + 1) * a_si + k2 * a_sk] : 0.0f);\n    }\n")
	w("#pragma unroll\n    for (int y = 0; y < %d; ++y) {\n", nt)
	w("      fb[y][0] = kiln_tf32(k1 < kk ? bw[k1 * b_sk + (2 * y) * b_sj] : 0.0f);\n")
	w("      fb[y][1] = kiln_tf32(k2 < kk ? bw[k2 * b_sk + (2 * y) * b_sj] : 0.0f);\n    }\n")
	w("#pragma unroll\n    for (int x = 0; x < %d; ++x)\n#pragma unroll\n    for (int y = 0; y < %d; ++y)\n", mt, nt)
	w("      asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%%0, %%1, %%2, %%3}, {%%4, %%5, %%6, %%7}, {%%8, %%9}, {%%0, %%1, %%2, %%3};\"\n")
	w("          : \"+f\"(acc[x][y][0]), \"+f\"(acc[x][y][1]), \"+f\"(acc[x][y][2]), \"+f\"(acc[x][y][3])\n")
	w("          : \"r\"(fa[x][0]), \"r\"(fa[x][1]), \"r\"(fa[x][2]), \"r\"(fa[x][3]), \"r\"(fb[y][0]), \"r\"(fb[y][1]));\n")
	w("  }\n")
	w("#pragma unroll\n  for (int x = 0; x < %d; ++x)\n#pragma unroll\n  for (int y = 0; y < %d; ++y)\n#pragma unroll\n  for (int h = 0; h < 4; ++h) {\n", mt, nt)
	w("    const i64 i = 2 * x + (h >> 1), j = 2 * y + (h & 1);\n")
	w("    if (i < m && j < n) c[i * c_si + j * c_sj] = acc[x][y][h];\n  }\n")
	w("}\n")
	return b.String()
}
