package compiler

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	lpasses "github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// mmaCase is one matrix product for the tensor-core rule: operand shapes ("n" is a
// symbolic dim), Gemm attributes or nil for MatMul.
type mmaCase struct {
	name string
	args [][]string
	gemm *graph.GemmAttrs
}

// mmaCases: tails on every axis (K too), whole tiles, a small product (the 32×32
// block), symbolic rows, batches, Gemm with transposes, alpha and beta·C.
var mmaCases = []mmaCase{
	{name: "matmul_tails", args: [][]string{{"70", "45"}, {"45", "100"}}},
	{name: "matmul_whole_tiles", args: [][]string{{"128", "64"}, {"64", "128"}}},
	{name: "matmul_small", args: [][]string{{"3", "20"}, {"20", "7"}}},
	{name: "matmul_symbolic_rows", args: [][]string{{"n", "33"}, {"33", "50"}}},
	{name: "matmul_batched", args: [][]string{{"3", "20", "17"}, {"3", "17", "40"}}},
	{name: "gemm_trans_alpha_beta", args: [][]string{{"19", "30"}, {"40", "19"}, {"40"}},
		gemm: &graph.GemmAttrs{TransA: 1, TransB: 1, Alpha: 0.5, Beta: 2}},
}

func (c mmaCase) typ(dims []string) graph.Type {
	var shape []graph.Dim
	for _, d := range dims {
		var n int64
		if _, err := fmt.Sscan(d, &n); err == nil {
			shape = append(shape, graph.Const(n))
		} else {
			shape = append(shape, graph.Sym(d))
		}
	}
	return graph.TensorType(tensor.Float32, shape...)
}

// module builds the case as a one-node model with parameters x0, x1 (and x2).
func (c mmaCase) module(t testing.TB) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	var in []*graph.Value
	for i, a := range c.args {
		in = append(in, b.Param(fmt.Sprintf("x%d", i), c.typ(a)))
	}
	var attrs any
	op := graph.OpMatMul
	if c.gemm != nil {
		op, attrs = graph.OpGemm, c.gemm
	}
	y, err := b.Op1(op, attrs, in...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// lowerMMA lowers the case's node with the CUDA backend's tensor-core strategies ahead
// of its own for tg and prints it in CUDA C.
func lowerMMA(t *testing.T, c mmaCase, tg target.Target) (*kernels.Impl, codegen.Source) {
	t.Helper()
	m := c.module(t)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	syms := kernels.Syms{}
	var in []kernels.Input
	for i, v := range n.Inputs {
		in = append(in, kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...)})
	}
	reg := kernels.Default()
	st := gpu.Strategies(reg).First(cudaTensorCores(reg)...)
	impl, err := st.Lower(n, in, tg)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	low, err := lpasses.GPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	f, launch, err := lpasses.DeriveLaunch(low)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if err := lpasses.VerifyLaunch(f, launch, tg.GPU); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if err := loopir.Verify(f); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	src, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, f)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return impl, src
}

func cudaArchTarget(t *testing.T, arch string) target.Target {
	t.Helper()
	tg, err := target.GPU(target.CUDA, arch, target.GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 108})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// TestTF32MatMulsTakeTheTensorCoreRule: every case lowers with gpu-matmul-mma for
// sm_80, its kernel calls the mma intrinsic between the two barriers of the k step, and
// the printed unit holds the TF32 rounding and the m16n8k8 instruction.
func TestTF32MatMulsTakeTheTensorCoreRule(t *testing.T) {
	for _, c := range mmaCases {
		impl, src := lowerMMA(t, c, cudaArchTarget(t, "sm_80"))
		if impl.Strategy != "gpu-matmul-mma" {
			t.Errorf("%s: strategy %s, want gpu-matmul-mma", c.name, impl.Strategy)
			continue
		}
		for _, want := range []string{"cvt.rna.tf32.f32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "kiln_mma_tf32_4x8_k16("} {
			if !strings.Contains(src.Code, want) {
				t.Errorf("%s: the CUDA source lacks %s", c.name, want)
			}
		}
		// the call reads the shared tiles: a barrier after the copy and one before the
		// next step's copy overwrites them
		if n := strings.Count(src.Code, "__syncthreads()"); n != 2 {
			t.Errorf("%s: %d barriers, want 2", c.name, n)
		}
	}
}

// TestTF32KernelCompilesToPTXForSM80AndSM90: NVRTC compiles every case's tensor-core
// kernel for sm_80 and sm_90, and the PTX holds the mma and cvt instructions.
func TestTF32KernelCompilesToPTXForSM80AndSM90(t *testing.T) {
	for _, arch := range []string{"sm_80", "sm_90"} {
		off := gputest.CUDAArch(t, arch)
		for _, c := range mmaCases {
			_, src := lowerMMA(t, c, cudaArchTarget(t, arch))
			ptx, err := off.BuildPTX(src.Code)
			if err != nil {
				t.Fatalf("%s for %s: %v\n%s", c.name, arch, err, src.Code)
			}
			for _, want := range []string{".entry " + src.Kernels[0], "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "cvt.rna.tf32.f32", "%laneid;"} {
				if !strings.Contains(string(ptx), want) {
					t.Errorf("%s for %s: the PTX lacks %s", c.name, arch, want)
				}
			}
		}
	}
}

// TestTF32KernelSourceIsTheGolden: the printed tensor-core kernel of the tails case
// (70×45 by 45×100) is testdata/gpu_matmul_tf32.cu (-update rewrites it).
func TestTF32KernelSourceIsTheGolden(t *testing.T) {
	_, src := lowerMMA(t, mmaCases[0], cudaArchTarget(t, "sm_80"))
	path := filepath.Join("testdata", "gpu_matmul_tf32.cu")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(src.Code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if src.Code != string(want) {
		t.Errorf("the tensor-core kernel differs from %s (run with -update and review the diff):\n%s", path, src.Code)
	}
}

// TestTensorCoresAreRefusedBelowSM80AndOnOpenCL: on sm_75 and on an OpenCL target the
// tensor-core rule is not applicable and the exact float32 tiled rule builds the node.
func TestTensorCoresAreRefusedBelowSM80AndOnOpenCL(t *testing.T) {
	ocl, err := target.GPU(target.OpenCL, "pocl", target.GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []target.Target{cudaArchTarget(t, "sm_75"), ocl} {
		impl, src := lowerMMA(t, mmaCases[0], tg)
		if impl.Strategy != "gpu-matmul-tiled" || strings.Contains(src.Code, "mma.sync") {
			t.Errorf("%v %s: strategy %s (mma in the source: %v), want gpu-matmul-tiled without mma", tg.Kind, tg.Arch, impl.Strategy, strings.Contains(src.Code, "mma.sync"))
		}
	}
}

// TestRecipePrecisionChoosesTheTensorCoreRule: compiling a MatMul model for a CUDA
// sm_90 (compile-only) with Recipe.Precision tf32 builds its kernel with gpu-matmul-mma
// and the executable's PTX holds mma.sync; the default recipe builds gpu-matmul-tiled
// without it; an unknown precision fails the compile.
func TestRecipePrecisionChoosesTheTensorCoreRule(t *testing.T) {
	off := gputest.CUDAArch(t, "sm_90")
	tg, err := off.Target()
	if err != nil {
		t.Fatal(err)
	}
	m := mmaCases[0].module(t)
	for _, c := range []struct {
		precision engine.Precision
		strategy  string
		mma       bool
	}{{engine.PrecisionTF32, "gpu-matmul-mma", true}, {"", "gpu-matmul-tiled", false}, {engine.PrecisionFP32, "gpu-matmul-tiled", false}} {
		res, err := Build(m, tg, Options{CPU: openCPU(t), GPU: off, Recipe: engine.Recipe{Precision: c.precision}})
		if err != nil {
			t.Fatalf("%q: %v", c.precision, err)
		}
		var strategies []string
		for _, g := range res.Stats.Groups {
			strategies = append(strategies, g.Strategy)
		}
		if len(strategies) != 1 || strategies[0] != c.strategy {
			t.Errorf("%q: strategies %v, want [%s]", c.precision, strategies, c.strategy)
		}
		mma := false
		for _, b := range res.Exe.Binaries {
			mma = mma || strings.Contains(string(b.Data), "mma.sync.aligned.m16n8k8")
		}
		if mma != c.mma {
			t.Errorf("%q: mma.sync in the PTX: %v, want %v", c.precision, mma, c.mma)
		}
	}
	if _, err := Build(m, tg, Options{CPU: openCPU(t), GPU: off, Recipe: engine.Recipe{Precision: "fp16"}}); !errors.Is(err, engine.ErrPrecision) {
		t.Errorf("precision fp16: %v, want ErrPrecision", err)
	}
}
