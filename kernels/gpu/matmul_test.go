package gpu_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// matmulCases are matrix products whose rows, columns and K the tiles do not divide
// (tails on every axis), symbolic rows (batch·sequence) and batches, broadcast batch
// axes, Gemm with transposes, alpha and beta·C, a fused epilogue, and whole tiles.
func matmulCases(t testing.TB) []gcase {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	gemm := func(ta, tb int64, alpha, beta float32) *graph.GemmAttrs {
		return &graph.GemmAttrs{TransA: ta, TransB: tb, Alpha: alpha, Beta: beta}
	}
	one := []map[string]int64{{}}
	return []gcase{
		{name: "matmul_tails", op: graph.OpMatMul, args: []graph.Type{f32("70", "45"), f32("45", "100")}, binds: one},
		{name: "matmul_whole_tiles", op: graph.OpMatMul, args: []graph.Type{f32("128", "64"), f32("64", "128")}, binds: one},
		{name: "matmul_small", op: graph.OpMatMul, args: []graph.Type{f32("3", "5"), f32("5", "7")}, binds: one},
		{name: "matmul_symbolic_rows", op: graph.OpMatMul, args: []graph.Type{f32("n", "33"), f32("33", "50")},
			binds: []map[string]int64{{"n": 1}, {"n": 7}, {"n": 130}}},
		{name: "matmul_batched", op: graph.OpMatMul, args: []graph.Type{f32("3", "20", "17"), f32("3", "17", "40")}, binds: one},
		{name: "matmul_broadcast_batch", op: graph.OpMatMul, args: []graph.Type{f32("2", "3", "9", "16"), f32("16", "24")}, binds: one},
		{name: "matmul_symbolic_batch", op: graph.OpMatMul, args: []graph.Type{f32("b", "s", "8"), f32("b", "8", "s")},
			binds: []map[string]int64{{"b": 1, "s": 1}, {"b": 2, "s": 19}, {"b": 3, "s": 70}}},
		{name: "gemm_trans_alpha_beta", op: graph.OpGemm, attrs: gemm(1, 1, 0.5, 2), args: []graph.Type{f32("19", "30"), f32("40", "19"), f32("40")}, binds: one},
		{name: "gemm_bias_rows", op: graph.OpGemm, attrs: gemm(0, 0, 1, 1), args: []graph.Type{f32("n", "24"), f32("24", "36"), f32("n", "1")},
			binds: []map[string]int64{{"n": 5}, {"n": 66}}},
		{name: "matmul_add_relu", op: graph.OpMatMul, args: []graph.Type{f32("n", "40"), f32("40", "72")},
			stages: []stage{{op: graph.OpAdd, at: 0, args: []graph.Type{{}, f32("72")}}, {op: graph.OpRelu, at: 0, args: []graph.Type{{}}}},
			binds:  []map[string]int64{{"n": 3}, {"n": 65}}},
	}
}

// lowerTiled lowers a case, checks that the tiled rule took it and that the launched
// kernel verifies (every thread of a block reaches each barrier).
func lowerTiled(t *testing.T, c gcase, tg target.Target) *lowered {
	t.Helper()
	l := lower(t, c, tg)
	if !strings.HasPrefix(l.impl.Strategy, "gpu-matmul-tiled") {
		t.Fatalf("%s: strategy %s, want gpu-matmul-tiled", c.name, l.impl.Strategy)
	}
	if err := loopir.Verify(l.f); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return l
}

// TestMatMulTiledKernelsMatchRefInLockStep runs every case's launched kernel on the CPU,
// each block's threads in lock-step phases between the barriers (a missing barrier
// reads a tile another thread has not copied yet, or overwrites one another thread
// still reads), and compares with the reference evaluator.
func TestMatMulTiledKernelsMatchRefInLockStep(t *testing.T) {
	for _, c := range matmulCases(t) {
		lowerTiled(t, c, testGPU(t))
	}
	emulateCases(t, matmulCases(t))
}

// TestMatMulTiledKernelsCompileToPTX prints every case in CUDA C and compiles it with
// NVRTC for sm_80.
func TestMatMulTiledKernelsCompileToPTX(t *testing.T) {
	nv := nvrtcOrSkip(t)
	tg := testGPU(t)
	for _, c := range matmulCases(t) {
		l := lowerTiled(t, c, tg)
		src := l.cudaSource(t)
		ptx, err := nv.Compile(src.Code, c.name+".cu", cuda.CompileOptions{Arch: "sm_80"})
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, src.Code)
		}
		if !strings.Contains(string(ptx), ".entry "+src.Kernels[0]) || !strings.Contains(string(ptx), ".shared") || !strings.Contains(string(ptx), "bar.sync") {
			t.Errorf("%s: the PTX lacks the entry, shared memory or a barrier", c.name)
		}
	}
}

// TestMatMulTiledKernelsMatchRefOnOpenCL runs every case, printed in OpenCL C, on the
// OpenCL device (PoCL here).
func TestMatMulTiledKernelsMatchRefOnOpenCL(t *testing.T) {
	d := openclOrSkip(t)
	checkCases(t, matmulCases(t), d, openclTarget(t, d), openclLoader(d))
}

// TestMatMulTiledKernelsMatchRefOnCUDA runs every case on a CUDA GPU (skipped without one).
func TestMatMulTiledKernelsMatchRefOnCUDA(t *testing.T) {
	nv := nvrtcOrSkip(t)
	d := deviceOrSkip(t)
	checkCases(t, matmulCases(t), d, cudaTarget(t, d), cudaLoader(nv, d))
}

func TestMatMulTiledLaunchAndTrace(t *testing.T) {
	l := lowerTiled(t, matmulCases(t)[6], testGPU(t)) // b × s × 8 by b × 8 × s
	if got, want := l.launch.String(), "grid(((s + 63) / 64), ((s + 63) / 64), b) block(16, 16, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	trace := l.impl.Trace.String()
	for _, want := range []string{`cache_read(b0, "shared", [0])`, `cache_read(b0, "shared", [1])`, `"blockIdx.z"`, `"threadIdx.y"`, "decompose_reduction("} {
		if !strings.Contains(trace, want) {
			t.Errorf("the trace lacks %s:\n%s", want, trace)
		}
	}
	text := loopir.Print(l.f)
	if n := strings.Count(text, "barrier"); n != 2 {
		t.Errorf("%d barriers, want 2:\n%s", n, text)
	}
	small := lowerTiled(t, matmulCases(t)[2], testGPU(t)) // 3×5 by 5×7: a 32×32 tile
	if got, want := small.launch.String(), "grid(1, 1, 1) block(16, 16, 1)"; got != want {
		t.Errorf("small product: launch %s, want %s", got, want)
	}
}

func TestMatMulTileFitsTheTarget(t *testing.T) {
	tg := testGPU(t)
	rows, cols := loopir.Int(1000), loopir.Int(1000)
	for _, c := range []struct {
		wg    int
		local int64
		want  string
	}{{1024, 48 << 10, "64x64x16/16x16"}, {128, 48 << 10, "16x16x16/8x8"}, {1024, 4 << 10, "32x32x16/16x16"}, {16, 1024, "8x8x8/4x4"}} {
		tg.GPU.MaxWorkGroup, tg.GPU.LocalMemBytes = c.wg, c.local
		tile, err := gpu.ChooseMatMulTile(tg, rows, cols)
		if err != nil || tile.String() != c.want {
			t.Errorf("%d threads, %d bytes: tile %v (%v), want %s", c.wg, c.local, tile, err, c.want)
		}
	}
	tg.GPU.LocalMemBytes = 100
	if _, err := gpu.ChooseMatMulTile(tg, rows, cols); err == nil {
		t.Error("a tile fits 100 bytes of local memory")
	}
}

// TestMatMulTiledRefusesWhatItDoesNotHandle: integer operands, a vector operand and a
// CPU target are not the tiled rule's (the one-thread-per-output reduction rule takes
// the first two).
func TestMatMulTiledRefusesWhatItDoesNotHandle(t *testing.T) {
	st := gpu.Strategies(kernels.Default())
	for _, c := range []struct {
		name string
		args []graph.Type
		tg   target.Target
	}{
		// K = 37 keeps the contraction a reduction (a short K is written out as a sum,
		// which the injective rule takes)
		{"int32", []graph.Type{ty(t, tensor.Int32, "4", "37"), ty(t, tensor.Int32, "37", "4")}, testGPU(t)},
		{"vector", []graph.Type{ty(t, tensor.Float32, "37"), ty(t, tensor.Float32, "37", "4")}, testGPU(t)},
		{"host", []graph.Type{ty(t, tensor.Float32, "4", "37"), ty(t, tensor.Float32, "37", "4")}, target.Host()},
	} {
		b := graph.NewBuilder("main")
		x, y := b.Param("x", c.args[0]), b.Param("y", c.args[1])
		outs, err := b.Node(graph.OpMatMul, nil, 1, x, y)
		if err != nil {
			t.Fatal(err)
		}
		in := []kernels.Input{{T: placeholder(t, x)}, {T: placeholder(t, y)}}
		impl, err := st.Lower(outs[0].Def, in, c.tg)
		switch {
		case c.tg.Kind == target.CPU && !errors.Is(err, kernels.ErrNoKernel):
			t.Errorf("%s: err = %v, want ErrNoKernel", c.name, err)
		case c.tg.Kind != target.CPU && (err != nil || !strings.HasPrefix(impl.Strategy, "gpu-reduce")):
			t.Errorf("%s: err = %v, strategy %v, want gpu-reduce or gpu-reduce-tree", c.name, err, impl)
		}
	}
}

// TestLockStepEmulationCatchesAMissingBarrier: the tiled kernel without the barrier
// after the copy (threads read tiles not yet copied), or without the one before the
// next copy (threads overwrite tiles others still read), gives wrong results in the
// lock-step emulation, so the emulation checks the barriers' placement.
func TestLockStepEmulationCatchesAMissingBarrier(t *testing.T) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l := lowerTiled(t, matmulCases(t)[0], testGPU(t)) // 70×45 by 45×100: three k steps
	in := l.inputs(t, nil, 1)
	res, err := ref.Eval(l.m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := res[0].(*tensor.Tensor)
	for _, drop := range []int{0, 1} { // the k loop's first barrier (before the copy), its second (after)
		seen := -1
		body := loopir.MapStmt(l.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
			if _, ok := s.(*loopir.Barrier); ok {
				if seen++; seen == drop {
					return loopir.Seq{}
				}
			}
			return nil
		})
		broken := *l
		broken.f = &loopir.PrimFunc{Name: l.f.Name, Params: l.f.Params, Dims: l.f.Dims, Body: body}
		src, err := codegen.EmitC(serialLaunch(broken.f))
		if err != nil {
			t.Fatal(err)
		}
		bin, err := d.Compiler().Build(context.Background(), src.Code)
		if errors.Is(err, devices.ErrUnavailable) {
			testdata.NoCompiler(t, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		mod, k := loadKernel(t, d, bin, src.Kernels[0])
		got, _, err := broken.exec(t, d, k, nil, in, want.Shape)
		if err != nil {
			t.Fatal(err)
		}
		wrong := 0
		g, w := got.Float64s(), want.Float64s()
		for i := range w {
			if math.Abs(g[i]-w[i]) > 1e-3*(1+math.Abs(w[i])) {
				wrong++
			}
		}
		if wrong == 0 {
			t.Errorf("without barrier %d the emulated kernel still matches the reference", drop)
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMatMulTiledLeavesAVectorTimesAMatrixToTheReductionRule: a product of one row
// (a batch-1 classifier) takes a reduction rule (gpu-reduce, or its block-wide form for
// a few long outputs); two rows are tiled.
func TestMatMulTiledLeavesAVectorTimesAMatrixToTheReductionRule(t *testing.T) {
	f32 := func(dims ...string) graph.Type { return ty(t, tensor.Float32, dims...) }
	one := []map[string]int64{{}}
	for rows, want := range map[string]string{"1": "gpu-reduce", "2": "gpu-matmul-tiled"} {
		l := lower(t, gcase{name: "gemv", op: graph.OpMatMul, args: []graph.Type{f32(rows, "512"), f32("512", "100")}, binds: one}, testGPU(t))
		if !strings.HasPrefix(l.impl.Strategy, want) {
			t.Errorf("%s×512 · 512×100: %s, want %s", rows, l.impl.Strategy, want)
		}
	}
}
