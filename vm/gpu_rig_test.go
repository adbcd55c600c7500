package vm_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/gpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// gpuRig is a GPU device with its target and a way to turn a lowered kernel into a
// device binary.
type gpuRig struct {
	dev   devices.Device
	tg    target.Target
	build func(t *testing.T, f *loopir.PrimFunc) (bin []byte, entry string)
}

// openclRig opens the default OpenCL device (PoCL here), or skips the test when there
// is none (fails it under KILN_REQUIRE_DATA=1).
func openclRig(t *testing.T) *gpuRig {
	t.Helper()
	d := gputest.OpenCL(t)
	tg, err := d.Target()
	if err != nil {
		t.Fatal(err)
	}
	return &gpuRig{dev: d, tg: tg, build: func(t *testing.T, f *loopir.PrimFunc) ([]byte, string) {
		t.Helper()
		src, err := codegen.Emit(codegen.OpenCLDialect(), codegen.COptions{}, f)
		if err != nil {
			t.Fatal(err)
		}
		bin, err := d.Build(src.Code, "")
		if err != nil {
			t.Fatalf("%v\n%s", err, src.Code)
		}
		return bin, src.Kernels[0]
	}}
}

// cudaRig opens CUDA GPU 0 with NVRTC, or skips the test when either is absent (fails
// it under KILN_REQUIRE_GPU=1).
func cudaRig(t *testing.T) *gpuRig {
	t.Helper()
	d, err := cuda.Open(cuda.Options{})
	if err == nil && d.Compiler() == nil {
		d.Close()
		err = devices.Unavailablef("NVRTC is absent")
	}
	if errors.Is(err, devices.ErrUnavailable) {
		if os.Getenv("KILN_REQUIRE_GPU") == "1" {
			t.Fatalf("no CUDA device and KILN_REQUIRE_GPU=1: %v", err)
		}
		t.Skipf("no CUDA device with NVRTC (%v); skipping", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	tg, err := d.Target()
	if err != nil {
		t.Fatal(err)
	}
	return &gpuRig{dev: d, tg: tg, build: func(t *testing.T, f *loopir.PrimFunc) ([]byte, string) {
		t.Helper()
		src, err := codegen.Emit(codegen.CUDADialect(), codegen.COptions{}, f)
		if err != nil {
			t.Fatal(err)
		}
		ptx, err := d.Compiler().Compile(src.Code, src.Kernels[0]+".cu", cuda.CompileOptions{Arch: d.Arch()})
		if err != nil {
			t.Fatalf("%v\n%s", err, src.Code)
		}
		return ptx, src.Kernels[0]
	}}
}

// gtype is a tensor type over dims as graph.ParseDim reads them ("3", "n").
func gtype(t *testing.T, dt tensor.DType, dims ...string) graph.Type {
	t.Helper()
	shape := make([]graph.Dim, len(dims))
	for i, s := range dims {
		d, err := graph.ParseDim(s)
		if err != nil {
			t.Fatal(err)
		}
		shape[i] = d
	}
	return graph.TensorType(dt, shape...)
}

// kernel lowers one node with the GPU strategies for the rig's target, builds it and
// returns its binary and its kernel table entry (in binary number bin, geometry and
// argument extents over its runtime dims, which are named as the graph's symbols).
func (r *gpuRig) kernel(t *testing.T, n *graph.Node, bin int) (vm.Binary, vm.KernelInfo) {
	t.Helper()
	syms := kernels.Syms{}
	in := make([]kernels.Input, len(n.Inputs))
	for i, v := range n.Inputs {
		in[i] = kernels.Input{T: te.Placeholder(fmt.Sprintf("in%d", i), v.Type.DType, syms.Shape(v.Type.Shape)...)}
	}
	impl, err := gpu.Strategies(kernels.Default()).Lower(n, in, r.tg)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range impl.Params {
		if p.Node != 0 || p.Input != i {
			t.Fatalf("%v: kernel parameter %d is input %d of node %d", n.Op, i, p.Input, p.Node)
		}
	}
	low, err := passes.GPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	f, launch, err := passes.DeriveLaunch(low)
	if err != nil {
		t.Fatal(err)
	}
	code, entry := r.build(t, f)
	dims := map[*loopir.Var]int64{}
	k := vm.KernelInfo{Name: entry, Binary: bin, Inputs: len(n.Inputs), Outputs: 1, Launch: &vm.KernelLaunch{}}
	for i, d := range f.Dims {
		dims[d] = int64(i)
		k.Dims = append(k.Dims, d.Name)
	}
	for _, p := range f.Params {
		k.Args = append(k.Args, vm.KernelArg{DType: p.DT, Elements: extent(t, p.Elements(), dims)})
	}
	for i := range 3 {
		k.Launch.Grid[i] = extent(t, launch.Grid[i], dims)
		k.Launch.Block[i] = extent(t, launch.Block[i], dims)
	}
	return vm.Binary{Device: r.dev.Info().Kind, Data: code}, k
}

// extent encodes an integer expression over the dims as a vm.Extent.
func extent(t *testing.T, x loopir.Expr, dims map[*loopir.Var]int64) vm.Extent {
	t.Helper()
	ops := map[loopir.BinOp]int64{loopir.Add: vm.ExtAdd, loopir.Sub: vm.ExtSub, loopir.Mul: vm.ExtMul,
		loopir.Div: vm.ExtDiv, loopir.Mod: vm.ExtMod, loopir.Min: vm.ExtMin, loopir.Max: vm.ExtMax}
	switch x := x.(type) {
	case *loopir.IntImm:
		return vm.ConstExtent(x.V)
	case *loopir.Var:
		i, ok := dims[x]
		if !ok {
			t.Fatalf("%s is not a runtime dim", x.Name)
		}
		return vm.Extent{vm.ExtDim, i}
	case *loopir.Binary:
		if op, ok := ops[x.Op]; ok {
			return append(append(extent(t, x.A, dims), extent(t, x.B, dims)...), op)
		}
	}
	t.Fatalf("extent %s", loopir.ExprString(x))
	return nil
}
