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

// bindFlat lowers f's single output block with its loops fused, split by 64 and bound
// to blockIdx.x and threadIdx.x, through the GPU pipeline and the launch derivation.
func bindFlat(t *testing.T, f *loopir.PrimFunc, block string) (*loopir.PrimFunc, loopir.Launch) {
	t.Helper()
	s := schedule.New(f)
	b, err := s.GetBlock(block)
	if err != nil {
		t.Fatal(err)
	}
	loops, err := s.GetLoops(b)
	if err != nil {
		t.Fatal(err)
	}
	fused := loops[0]
	if len(loops) > 1 {
		if fused, err = s.Fuse(loops...); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := s.Split(fused, []int64{-1, 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		t.Fatal(err)
	}
	low, err := passes.GPUPipeline().Run(s.Func())
	if err != nil {
		t.Fatal(err)
	}
	g, l, err := passes.DeriveLaunch(low)
	if err != nil {
		t.Fatal(err)
	}
	return g, l
}

// addBroadcastSym is Y[i, j] = X[i, j] + B[j] over a symbolic n × 3.
func addBroadcastSym(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, n, loopir.Int(3))
	b := te.Placeholder("B", tensor.Float32, loopir.Int(3))
	y := te.Compute("Y", []loopir.Expr{n, loopir.Int(3)}, func(i []loopir.Expr) loopir.Expr {
		return te.Add(x.At(i[0], i[1]), b.At(i[1]))
	})
	f, err := te.Lower("add_bcast", []*te.Tensor{x, b}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sigmoidCast is Y[i] = int64(sigmoid(X[i]) * 100) over 100 elements (a tail of 36
// in the second block of 64).
func sigmoidCast(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	x := te.Placeholder("X", tensor.Float32, loopir.Int(100))
	y := te.Compute("Y", []loopir.Expr{loopir.Int(100)}, func(i []loopir.Expr) loopir.Expr {
		return te.Cast(tensor.Int64, te.Mul(te.Sigmoid(x.At(i[0])), loopir.Float(100, tensor.Float32)))
	})
	f, err := te.Lower("sigmoid_cast", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// gatherRows is Y[i] = X[I[i]] over 37 indices into 10 elements, I checked.
func gatherRows(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	x := te.Placeholder("X", tensor.Float32, loopir.Int(10))
	idx := te.Placeholder("I", tensor.Int64, loopir.Int(37))
	y := te.Compute("Y", []loopir.Expr{loopir.Int(37)}, func(i []loopir.Expr) loopir.Expr {
		return x.At(te.CheckedIndex(idx.At(i[0]), loopir.Int(10)))
	})
	f, err := te.Lower("gather_rows", []*te.Tensor{x, idx}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGoldenGPUKernels prints the same kernels in CUDA C and OpenCL C: the calling
// convention (buffers, dims by value, status block last), the launch indices, the tail
// guard, and an index check that claims the status block.
func TestGoldenGPUKernels(t *testing.T) {
	for _, c := range []struct {
		name  string
		f     func(*testing.T) *loopir.PrimFunc
		block string
	}{{"gpu_add_bcast", addBroadcastSym, "Y"}, {"gpu_sigmoid_cast", sigmoidCast, "Y"}, {"gpu_gather_checked", gatherRows, "Y"}} {
		f, _ := bindFlat(t, c.f(t), c.block)
		for _, d := range []struct {
			dialect *codegen.Dialect
			ext     string
		}{{codegen.CUDADialect(), ".cu"}, {codegen.OpenCLDialect(), ".cl"}} {
			src, err := codegen.Emit(d.dialect, codegen.COptions{}, f)
			if err != nil {
				t.Fatalf("%s in %s: %v", c.name, d.dialect.Name, err)
			}
			if src.Lang != d.dialect.Name || len(src.Kernels) != 1 {
				t.Errorf("%s: Lang %q, kernels %v", c.name, src.Lang, src.Kernels)
			}
			checkGolden(t, c.name+d.ext, src.Code)
		}
	}
}

func TestGPUCallingConvention(t *testing.T) {
	f, l := bindFlat(t, addBroadcastSym(t), "Y")
	if got, want := l.String(), "grid((((n * 3) + 63) / 64), 1, 1) block(64, 1, 1)"; got != want {
		t.Errorf("launch %s, want %s", got, want)
	}
	cu, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, f)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ code, want string }{
		{cu.Code, `extern "C" __global__ void v_add_bcast(float *__restrict__ v_X, float *__restrict__ v_B, float *__restrict__ v_Y, i64 v_n, i64 *kiln_status) {`},
		{cu.Code, "typedef long long i64;"},
		{cu.Code, "(i64)blockIdx.x;"},
		{cu.Code, "(i64)threadIdx.x;"},
		{cl.Code, "__kernel void v_add_bcast(__global char *kiln_base_v_X, i64 kiln_off_v_X, __global char *kiln_base_v_B, i64 kiln_off_v_B, __global char *kiln_base_v_Y, i64 kiln_off_v_Y, i64 v_n, __global i64 *kiln_status) {"},
		{cl.Code, "  __global float *restrict v_X = (__global float *)(kiln_base_v_X + kiln_off_v_X);\n"},
		{cl.Code, "typedef long i64;"},
		{cl.Code, "(i64)get_group_id(0);"},
		{cl.Code, "(i64)get_local_id(0);"},
	} {
		if !strings.Contains(c.code, c.want) {
			t.Errorf("the kernel lacks %q:\n%s", c.want, c.code)
		}
	}
	for _, not := range []string{"LL", "__builtin", "bufs[", "long long"} {
		if strings.Contains(cl.Code, not) {
			t.Errorf("the OpenCL kernel has %q:\n%s", not, cl.Code)
		}
	}
}

func TestDialectsRefuseWhatTheyCannotPrintOnAGPU(t *testing.T) {
	bound, _ := bindFlat(t, addBroadcastSym(t), "Y")
	if _, err := codegen.EmitC(bound); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("C with bound loops: err = %v, want ErrUnsupported", err)
	}
	x := te.Placeholder("X", tensor.Float64, loopir.Int(8))
	y := te.Compute("Y", []loopir.Expr{loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr { return te.Exp(x.At(i[0])) })
	f64, err := te.Lower("exp64", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := bindFlat(t, f64, "Y")
	if _, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, g); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("OpenCL float64: err = %v, want ErrUnsupported", err)
	}
	if _, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, g); err != nil {
		t.Errorf("CUDA float64: %v", err)
	}
	host, err := passes.CPUPipeline().Run(lowerPackedMatMul(t)) // parallel loops
	if err != nil {
		t.Fatal(err)
	}
	if _, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, host); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("CUDA with parallel loops: err = %v, want ErrUnsupported", err)
	}
	if _, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{BoundsCheck: true}, bound); !errors.Is(err, codegen.ErrUnsupported) {
		t.Errorf("CUDA bounds checks: err = %v, want ErrUnsupported", err)
	}
}
