package codegen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// sharedMatmul is C = A·B (A n×12, B 12×16) scheduled with shared tiles: 8×8 outputs
// per block of 4×4 threads, a 2×2 register tile per thread, k in steps of 4 with the A
// and B tiles of each step copied into shared buffers by the block's threads; lowered
// through the GPU pipeline (barriers included) and the launch derivation.
func sharedMatmul(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	a := te.Placeholder("A", tensor.Float32, n, loopir.Int(12))
	b := te.Placeholder("B", tensor.Float32, loopir.Int(12), loopir.Int(16))
	r := te.RAxis("k", loopir.Int(12))
	c := te.Compute("C", []loopir.Expr{n, loopir.Int(16)}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], r.Var), b.At(r.Var, i[1])), r)
	})
	f, err := te.Lower("mm_shared", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	s := schedule.New(f)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	blk, err := s.GetBlock("C")
	must(err)
	l, err := s.GetLoops(blk)
	must(err)
	wb, err := s.CacheWrite(blk, 0, loopir.ScopeLocal)
	must(err)
	i, err := s.Split(l[0], []int64{-1, 4, 2})
	must(err)
	j, err := s.Split(l[1], []int64{-1, 4, 2})
	must(err)
	k, err := s.Split(l[2], []int64{-1, 4})
	must(err)
	must(s.Reorder(i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]))
	must(s.Bind(i[0], loopir.BlockIdxY))
	must(s.Bind(j[0], loopir.BlockIdxX))
	must(s.Bind(i[1], loopir.ThreadIdxY))
	must(s.Bind(j[1], loopir.ThreadIdxX))
	_, err = s.DecomposeReduction(blk, k[0])
	must(err)
	must(s.ReverseComputeAt(wb, j[1]))
	for read := range 2 {
		cp, err := s.CacheRead(blk, read, loopir.ScopeShared)
		must(err)
		must(s.ComputeAt(cp, k[0]))
	}
	low, err := passes.GPUPipeline().Run(s.Func())
	must(err)
	g, _, err := passes.DeriveLaunch(low)
	must(err)
	return g
}

// TestGoldenSharedMemoryKernels prints a kernel with shared tiles and barriers in both
// GPU dialects: the shared arrays at kernel scope (__shared__ / __local), the register
// tile as a private array, the barriers (__syncthreads() / barrier(CLK_LOCAL_MEM_FENCE)).
func TestGoldenSharedMemoryKernels(t *testing.T) {
	f := sharedMatmul(t)
	for _, d := range []struct {
		dialect      *codegen.Dialect
		ext          string
		shared, sync string
	}{{codegen.CUDADialect(), ".cu", "  __shared__ float v_A_shared[32];\n  __shared__ float v_B_shared[32];\n", "__syncthreads();"},
		{codegen.OpenCLDialect(), ".cl", "  __local float v_A_shared[32];\n  __local float v_B_shared[32];\n", "barrier(CLK_LOCAL_MEM_FENCE);"}} {
		src, err := codegen.Emit(d.dialect, codegen.COptions{}, f)
		if err != nil {
			t.Fatalf("%s: %v", d.dialect.Name, err)
		}
		checkGolden(t, "gpu_matmul_shared"+d.ext, src.Code)
		if !strings.Contains(src.Code, "(void)kiln_status;\n"+d.shared) {
			t.Errorf("%s: the shared arrays are not declared at kernel scope:\n%s", d.dialect.Name, src.Code)
		}
		if got := strings.Count(src.Code, d.sync); got != 2 {
			t.Errorf("%s: %d barriers, want 2 (after the copy, before the next one)", d.dialect.Name, got)
		}
	}
	if _, err := codegen.EmitC(f); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("C with barriers: err = %v, want ErrUnsupported", err)
	}
}
