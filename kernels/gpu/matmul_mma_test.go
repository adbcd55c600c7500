package gpu_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// standInMMA is a warp intrinsic for the tests of the tensor-core rule: the
// description of intrin.MMATF32(4, 8, 16) (one thread's step C[i, j] += A[i, k]·B[k, j],
// loops k < 16, i < 4, j < 8, all Partial) with its per-thread meaning in C as the
// implementation (exact float32), so that a launched kernel runs on the CPU. It checks
// what the schedule passes the call (tile addresses, strides, per-lane and k extents)
// and where it calls it; the warp implementation's fragment layout is intrin's test.
func standInMMA(supported bool) gpu.WarpMMA {
	const name = "test_mma_4x8_k16"
	rm, rn, bk := int64(4), int64(8), int64(16)
	c := &loopir.Buffer{Name: "C", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(rm), loopir.Int(rn)}, Scope: "global"}
	a := &loopir.Buffer{Name: "A", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(rm), loopir.Int(bk)}, Scope: "global"}
	b := &loopir.Buffer{Name: "B", DT: tensor.Float32, Shape: []loopir.Expr{loopir.Int(bk), loopir.Int(rn)}, Scope: "global"}
	i, j, k := loopir.NewVar("i"), loopir.NewVar("j"), loopir.NewVar("k")
	vi, vj, vk := loopir.NewVar("vi"), loopir.NewVar("vj"), loopir.NewVar("vk")
	cij := []loopir.Expr{vi, vj}
	one := loopir.Int(1)
	blk := &loopir.Block{
		Name:     "update",
		Iters:    []loopir.IterVar{{Var: vk, Extent: loopir.Int(bk), Kind: loopir.Reduction}, {Var: vi, Extent: loopir.Int(rm), Kind: loopir.Spatial}, {Var: vj, Extent: loopir.Int(rn), Kind: loopir.Spatial}},
		Bindings: []loopir.Expr{k, i, j},
		Reads: []loopir.Region{{Buf: c, Ranges: [][2]loopir.Expr{{vi, one}, {vj, one}}}, {Buf: a, Ranges: [][2]loopir.Expr{{vi, one}, {vk, one}}},
			{Buf: b, Ranges: [][2]loopir.Expr{{vk, one}, {vj, one}}}},
		Writes: []loopir.Region{{Buf: c, Ranges: [][2]loopir.Expr{{vi, one}, {vj, one}}}},
		Body: &loopir.Store{Buf: c, Index: cij, Value: loopir.Bin(loopir.Add, &loopir.Load{Buf: c, Index: cij},
			loopir.Bin(loopir.Mul, &loopir.Load{Buf: a, Index: []loopir.Expr{vi, vk}}, &loopir.Load{Buf: b, Index: []loopir.Expr{vk, vj}}))},
	}
	body := &loopir.For{Var: k, Min: loopir.Int(0), Extent: loopir.Int(bk), Body: &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Int(rm),
		Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: loopir.Int(rn), Body: blk}}}
	impl := `static inline void test_mma_4x8_k16(float *c, i64 c_sk, i64 c_si, i64 c_sj,
    const float *a, i64 a_sk, i64 a_si, i64 a_sj, const float *b, i64 b_sk, i64 b_si, i64 b_sj, i64 kk, i64 m, i64 n) {
  (void)c_sk; (void)a_sj; (void)b_si;
  for (i64 k = 0; k < kk; ++k) for (i64 i = 0; i < m; ++i) for (i64 j = 0; j < n; ++j)
    c[i * c_si + j * c_sj] += a[i * a_si + k * a_sk] * b[k * b_sk + j * b_sj];
}
`
	in := &loopir.TensorIntrin{Name: name, Partial: []bool{true, true, true}, Impl: map[string]string{"c": impl},
		Desc: &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{c, a, b}, Body: body}}
	return gpu.WarpMMA{Intrin: in, RM: rm, RN: rn, BK: bk, RowGroups: 8, ColGroups: 4, Needs: "a test target",
		Supports: func(t target.Target) bool { return supported && t.Kind == target.CUDA }}
}

// mmaCases are matmulCases lowered with the tensor-core rule first (standInMMA).
func mmaCases(t testing.TB, supported bool) []gcase {
	cs := matmulCases(t)
	for i := range cs {
		cs[i].first = func(reg *kernels.Registry) []kernels.Strategy {
			return []kernels.Strategy{gpu.MatMulMMAStrategy(reg, standInMMA(supported))}
		}
	}
	return cs
}

// TestMatMulMMAKernelsMatchRefInLockStep: every tiled case (tails on every axis,
// symbolic rows and batches, broadcast batches, Gemm with transposes, alpha and beta·C,
// an epilogue) takes gpu-matmul-mma, lays its threads out as warps (blockDim.x 4 column
// groups, .y 8 row groups, .z warps), calls the intrinsic once per k step between the
// two barriers, and its launched kernel, run on the CPU with each block's threads in
// lock-step phases, matches the reference evaluator.
func TestMatMulMMAKernelsMatchRefInLockStep(t *testing.T) {
	cs := mmaCases(t, true)
	for _, c := range cs {
		l := lower(t, c, testGPU(t))
		if !strings.HasPrefix(l.impl.Strategy, "gpu-matmul-mma") {
			t.Fatalf("%s: strategy %s, want gpu-matmul-mma", c.name, l.impl.Strategy)
		}
		text := loopir.Print(l.f)
		if n := strings.Count(text, "test_mma_4x8_k16("); n != 1 {
			t.Errorf("%s: %d calls of the intrinsic, want 1:\n%s", c.name, n, text)
		}
		if n := strings.Count(text, "barrier"); n != 2 {
			t.Errorf("%s: %d barriers, want 2", c.name, n)
		}
		if !strings.Contains(l.launch.String(), "block(4, 8, ") {
			t.Errorf("%s: launch %s, want blocks of 4 × 8 × warps threads", c.name, l.launch)
		}
	}
	emulateCases(t, cs)
}

// TestMatMulMMAIsRefusedWhereTheIntrinsicIsNot: on a target the intrinsic does not
// support, and on the CPU, the tensor-core rule is not applicable and the tiled rule
// (or none) builds the product.
func TestMatMulMMAIsRefusedWhereTheIntrinsicIsNot(t *testing.T) {
	for _, c := range mmaCases(t, false)[:3] {
		l := lower(t, c, testGPU(t))
		if !strings.HasPrefix(l.impl.Strategy, "gpu-matmul-tiled") {
			t.Errorf("%s: strategy %s, want gpu-matmul-tiled", c.name, l.impl.Strategy)
		}
	}
}
