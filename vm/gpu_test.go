package vm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// addSigmoid is sigmoid(x + y) for x of type xt and y of type yt, with its two nodes.
func addSigmoid(t *testing.T, xt, yt graph.Type) (*graph.Module, *graph.Node, *graph.Node) {
	t.Helper()
	b := graph.NewBuilder("main")
	x, y := b.Param("x", xt), b.Param("y", yt)
	z, err := b.Node(graph.OpAdd, nil, 1, x, y)
	if err != nil {
		t.Fatal(err)
	}
	s, err := b.Node(graph.OpSigmoid, nil, 1, z[0])
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(s[0])
	if err != nil {
		t.Fatal(err)
	}
	return m, z[0].Def, s[0].Def
}

// want evaluates the module with the reference evaluator.
func want(t *testing.T, m *graph.Module, in map[string]ref.Value) *tensor.Tensor {
	t.Helper()
	res, err := ref.Eval(m, in, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

func randomF32(shape tensor.Shape, seed uint64) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 5))
	v := make([]float32, shape.NumElements())
	for i := range v {
		v[i] = r.Float32()*16 - 8
	}
	return tensor.MustFromSlice(shape, v)
}

// staticAddSigmoid is an executable over a CPU device (0) and a GPU (1): it copies its
// input x (f32[4,37]) to the GPU, adds the constant y (f32[37], broadcast; placed on
// the GPU at load), applies sigmoid, each a GPU kernel writing a tensor of one arena
// planned at the GPU's alignment, and copies the result back to the host device.
func staticAddSigmoid(t *testing.T, r *gpuRig, y *tensor.Tensor) (*graph.Module, *vm.Executable) {
	f32 := tensor.Float32
	m, add, sig := addSigmoid(t, gtype(t, f32, "4", "37"), gtype(t, f32, "37"))
	b0, k0 := r.kernel(t, add, 0)
	b1, k1 := r.kernel(t, sig, 1)
	const bytes = 4 * 37 * 4
	plan, err := vm.PlanArenas([]vm.Interval{{Size: bytes, Start: 0, End: 1, Device: 1}, {Size: bytes, Start: 1, End: 2, Device: 1}},
		[]int64{vm.PlanAlign, vm.DeviceAlign(r.dev)})
	if err != nil {
		t.Fatal(err)
	}
	shape := []int64{4, 37}
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 7, Code: []vm.Instr{
			{Op: vm.DeviceCopy, Dst: 1, Args: []vm.Reg{0}, Device: 1},
			{Op: vm.LoadConst, Dst: 2, Imm: 0},
			{Op: vm.AllocStorage, Dst: 3, Imm: plan.Sizes[1], Device: 1},
			{Op: vm.AllocTensor, Dst: 4, Args: []vm.Reg{3}, Imm: plan.Offsets[0], DType: f32, Shape: shape},
			{Op: vm.AllocTensor, Dst: 5, Args: []vm.Reg{3}, Imm: plan.Offsets[1], DType: f32, Shape: shape},
			{Op: vm.InvokeKernel, Imm: 0, Args: []vm.Reg{1, 2, 4}, In: 2, Str: "z of node add"},
			{Op: vm.InvokeKernel, Imm: 1, Args: []vm.Reg{4, 5}, In: 1, Str: "s of node sigmoid"},
			{Op: vm.DeviceCopy, Dst: 6, Args: []vm.Reg{5}, Device: 0},
			{Op: vm.Ret, Args: []vm.Reg{6}},
		}}},
		Constants: []*tensor.Tensor{y},
		Kernels:   []vm.KernelInfo{k0, k1},
		Binaries:  []vm.Binary{b0, b1},
	}
	return m, exe
}

// roundTrip encodes and decodes an executable (the launch geometry travels with it).
func roundTrip(t *testing.T, exe *vm.Executable) *vm.Executable {
	t.Helper()
	b, err := exe.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out vm.Executable
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return &out
}

func checkStaticAddSigmoid(t *testing.T, r *gpuRig) {
	y := randomF32(tensor.Shape{37}, 2)
	m, exe := staticAddSigmoid(t, r, y)
	devs := []devices.Device{openCPU(t), r.dev}
	v, err := vm.Load(roundTrip(t, exe), devs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	// the constant's own storage on the CPU and its copy on the GPU, both made at load
	if st := v.MemoryStats(); st.Buffers != 2 {
		t.Fatalf("after load the VM holds %d buffers, want the constant and its GPU copy", st.Buffers)
	}
	for i := range 3 {
		x := randomF32(tensor.Shape{4, 37}, uint64(10+i))
		out, err := v.Run(context.Background(), []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		nt.CloseTensor(t, fmt.Sprintf("run %d", i), out[0], want(t, m, map[string]ref.Value{"x": x, "y": y}))
	}
}

// checkConstantPlacedAtFirstUse: a constant that reaches a GPU kernel through a call
// (which the load-time scan does not follow) is copied to the GPU at its first use, once.
func checkConstantPlacedAtFirstUse(t *testing.T, r *gpuRig) {
	y := randomF32(tensor.Shape{37}, 4)
	m, exe := staticAddSigmoid(t, r, y)
	body := exe.Functions[0]
	body.Name, body.Params = "body", 2
	body.Code = append([]vm.Instr{}, body.Code...)
	// y is the second parameter: moved out of register 1 before x's copy lands there
	body.Code[0], body.Code[1] = vm.Instr{Op: vm.Move, Dst: 2, Args: []vm.Reg{1}}, body.Code[0]
	exe.Functions = []vm.Function{{Name: "main", Params: 1, Regs: 3, Code: []vm.Instr{
		{Op: vm.LoadConst, Dst: 1, Imm: 0},
		{Op: vm.Invoke, Dst: 2, Args: []vm.Reg{0, 1}, Imm: 1},
		{Op: vm.Ret, Args: []vm.Reg{2}},
	}}, body}
	v, err := vm.Load(roundTrip(t, exe), []devices.Device{openCPU(t), r.dev}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if st := v.MemoryStats(); st.Buffers != 1 {
		t.Fatalf("after load the VM holds %d buffers, want the constant's only", st.Buffers)
	}
	held := 0
	for i := range 3 {
		x := randomF32(tensor.Shape{4, 37}, uint64(30+i))
		out, err := v.Run(context.Background(), []*tensor.Tensor{x})
		if err != nil {
			t.Fatal(err)
		}
		nt.CloseTensor(t, fmt.Sprintf("run %d", i), out[0], want(t, m, map[string]ref.Value{"x": x, "y": y}))
		if st := v.MemoryStats(); i == 0 {
			held = st.Buffers
		} else if st.Buffers != held {
			t.Fatalf("run %d holds %d buffers, the first %d: the constant was copied again", i, st.Buffers, held)
		}
	}
}

// symbolicAddSigmoid is sigmoid(x + y) for x: f32[m, n] and y: f32[n], both inputs: the
// kernels' dims, grids and tensors' sizes come from x's shape at run time, and the GPU
// result is returned as is (Run copies it to the host).
func symbolicAddSigmoid(t *testing.T, r *gpuRig) (*graph.Module, *vm.Executable) {
	f32 := tensor.Float32
	m, add, sig := addSigmoid(t, gtype(t, f32, "m", "n"), gtype(t, f32, "n"))
	b0, k0 := r.kernel(t, add, 0)
	b1, k1 := r.kernel(t, sig, 1)
	dimRegs := map[string]vm.Reg{"m": 5, "n": 6}
	dims := func(k vm.KernelInfo) []vm.Reg {
		var out []vm.Reg
		for _, d := range k.Dims {
			r, ok := dimRegs[d]
			if !ok {
				t.Fatalf("kernel %s has dim %q", k.Name, d)
			}
			out = append(out, r)
		}
		return out
	}
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 12, Code: []vm.Instr{
			{Op: vm.DeviceCopy, Dst: 2, Args: []vm.Reg{0}, Device: 1},
			{Op: vm.DeviceCopy, Dst: 3, Args: []vm.Reg{1}, Device: 1},
			{Op: vm.ShapeOf, Dst: 4, Args: []vm.Reg{0}},
			{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{4}, Imm: 0},
			{Op: vm.CallBuiltin, Dst: 6, Args: []vm.Reg{4}, Imm: 1},
			{Op: vm.CallBuiltin, Dst: 7, Args: []vm.Reg{4}, Imm: 2},
			{Op: vm.AllocStorage, Dst: 8, Args: []vm.Reg{7}, Device: 1},
			{Op: vm.AllocTensorReg, Dst: 9, Args: []vm.Reg{8, 4}, DType: f32},
			{Op: vm.AllocStorage, Dst: 10, Args: []vm.Reg{7}, Device: 1},
			{Op: vm.AllocTensorReg, Dst: 11, Args: []vm.Reg{10, 4}, DType: f32},
			{Op: vm.InvokeKernel, Imm: 0, Args: []vm.Reg{2, 3, 9}, In: 2, Dims: dims(k0), Str: "z of node add"},
			{Op: vm.InvokeKernel, Imm: 1, Args: []vm.Reg{9, 11}, In: 1, Dims: dims(k1), Str: "s of node sigmoid"},
			{Op: vm.Ret, Args: []vm.Reg{11}},
		}}},
		Kernels:  []vm.KernelInfo{k0, k1},
		Binaries: []vm.Binary{b0, b1},
		Builtins: []string{"dim0", "dim1", "f32bytes"},
	}
	return m, exe
}

// shapeBuiltins read a 2-D shape: its extents and the bytes of an f32 tensor of it.
func shapeBuiltins() map[string]vm.Builtin {
	scalar := func(v int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{}, []int64{v}) }
	return map[string]vm.Builtin{
		"dim0": func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(a[0].Int64s()[0]), nil },
		"dim1": func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(a[0].Int64s()[1]), nil },
		"f32bytes": func(a []*tensor.Tensor) (*tensor.Tensor, error) {
			s := a[0].Int64s()
			return scalar(4 * s[0] * s[1]), nil
		},
	}
}

func checkSymbolicAddSigmoid(t *testing.T, r *gpuRig) {
	m, exe := symbolicAddSigmoid(t, r)
	v, err := vm.Load(roundTrip(t, exe), []devices.Device{openCPU(t), r.dev}, shapeBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for i, mn := range [][2]int{{1, 1}, {3, 29}, {2, 1000}, {5, 0}, {7, 300}} {
		x := randomF32(tensor.Shape{mn[0], mn[1]}, uint64(20+i))
		y := randomF32(tensor.Shape{mn[1]}, uint64(40+i))
		var prof vm.Profile
		out, err := v.RunProfiled(context.Background(), []*tensor.Tensor{x, y}, &prof)
		if err != nil {
			t.Fatalf("m=%d n=%d: %v", mn[0], mn[1], err)
		}
		nt.CloseTensor(t, fmt.Sprintf("m=%d n=%d", mn[0], mn[1]), out[0], want(t, m, map[string]ref.Value{"x": x, "y": y}))
		launches := 1
		if mn[0]*mn[1] == 0 {
			launches = 0 // an empty grid: nothing launched
		}
		for _, k := range prof.Kernels {
			if k.Launches != launches {
				t.Fatalf("m=%d n=%d: kernel %s launched %d times, want %d", mn[0], mn[1], k.Name, k.Launches, launches)
			}
		}
	}
}

// gatherExe gathers columns of x (f32[5,6]) at indices (i64[3]) on the GPU.
func gatherExe(t *testing.T, r *gpuRig) *vm.Executable {
	f32 := tensor.Float32
	b := graph.NewBuilder("main")
	x, idx := b.Param("x", gtype(t, f32, "5", "6")), b.Param("i", gtype(t, tensor.Int64, "3"))
	g, err := b.Node(graph.OpGather, &graph.GatherAttrs{Axis: 1}, 1, x, idx)
	if err != nil {
		t.Fatal(err)
	}
	b0, k0 := r.kernel(t, g[0].Def, 0)
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 6, Code: []vm.Instr{
			{Op: vm.DeviceCopy, Dst: 2, Args: []vm.Reg{0}, Device: 1},
			{Op: vm.DeviceCopy, Dst: 3, Args: []vm.Reg{1}, Device: 1},
			{Op: vm.AllocStorage, Dst: 4, Imm: 5 * 3 * 4, Device: 1},
			{Op: vm.AllocTensor, Dst: 5, Args: []vm.Reg{4}, DType: f32, Shape: []int64{5, 3}},
			{Op: vm.InvokeKernel, Imm: 0, Args: []vm.Reg{2, 3, 5}, In: 2, Str: "y of node gather_7"},
			{Op: vm.Ret, Args: []vm.Reg{5}},
		}}},
		Kernels:  []vm.KernelInfo{k0},
		Binaries: []vm.Binary{b0},
	}
}

// checkKernelStatusError: a GPU kernel that finds an index out of range fails the call
// with an ErrInput naming the node and the index, and the next call succeeds.
func checkKernelStatusError(t *testing.T, r *gpuRig) {
	v, err := vm.Load(roundTrip(t, gatherExe(t, r)), []devices.Device{openCPU(t), r.dev}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	x := randomF32(tensor.Shape{5, 6}, 3)
	bad := tensor.MustFromSlice(tensor.Shape{3}, []int64{1, 9, -2})
	_, err = v.Run(context.Background(), []*tensor.Tensor{x, bad})
	if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "gather_7") || !strings.Contains(err.Error(), "index 9") {
		t.Fatalf("err = %v, want an ErrInput naming node gather_7 and index 9", err)
	}
	good := tensor.MustFromSlice(tensor.Shape{3}, []int64{1, 5, -2})
	out, err := v.Run(context.Background(), []*tensor.Tensor{x, good})
	if err != nil {
		t.Fatalf("the call after a kernel's failure: %v", err)
	}
	xs, got := x.Float64s(), out[0].Float64s()
	for row := range 5 {
		for j, c := range []int{1, 5, 4} {
			if got[row*3+j] != xs[row*6+c] {
				t.Fatalf("out[%d][%d] = %v, want x[%d][%d] = %v", row, j, got[row*3+j], row, c, xs[row*6+c])
			}
		}
	}
}

// checkConcurrentCallsKeepTheirStatus: calls on one GPU at once, from two VMs, half of
// them with an index out of range: every bad call fails naming its index, every good
// call answers (a kernel's status belongs to the call that launched it).
func checkConcurrentCallsKeepTheirStatus(t *testing.T, r *gpuRig) {
	cpu := openCPU(t)
	var vms []*vm.VM
	for range 2 {
		v, err := vm.Load(roundTrip(t, gatherExe(t, r)), []devices.Device{cpu, r.dev}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		vms = append(vms, v)
	}
	x := randomF32(tensor.Shape{5, 6}, 3)
	bad := tensor.MustFromSlice(tensor.Shape{3}, []int64{1, 9, -2})
	good := tensor.MustFromSlice(tensor.Shape{3}, []int64{1, 5, -2})
	const calls = 64
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := good
			if i%2 == 1 {
				idx = bad
			}
			_, errs[i] = vms[i%4/2].Run(context.Background(), []*tensor.Tensor{x, idx})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && err != nil {
			t.Errorf("good call %d: %v", i, err)
		}
		if i%2 == 1 && (!errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), "index 9")) {
			t.Errorf("bad call %d: err = %v, want ErrInput naming index 9", i, err)
		}
	}
}

// checkCPUFeedsGPU: a CPU kernel (a + b on device 0) feeds a GPU kernel (sigmoid on
// device 1) through DeviceCopy.
func checkCPUFeedsGPU(t *testing.T, r *gpuRig) {
	f32 := tensor.Float32
	cpuDev := openCPU(t)
	bin, vadd := addKernel(t, cpuDev)
	m, _, sig := addSigmoid(t, gtype(t, f32, "n"), gtype(t, f32, "n"))
	b1, k1 := r.kernel(t, sig, 1)
	if len(k1.Dims) != 1 || k1.Dims[0] != "n" {
		t.Fatalf("sigmoid's dims are %v", k1.Dims)
	}
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 11, Code: []vm.Instr{
			{Op: vm.ShapeOf, Dst: 2, Args: []vm.Reg{0}},
			{Op: vm.CallBuiltin, Dst: 3, Args: []vm.Reg{2}, Imm: 0},
			{Op: vm.CallBuiltin, Dst: 4, Args: []vm.Reg{2}, Imm: 1},
			{Op: vm.AllocStorage, Dst: 5, Args: []vm.Reg{4}},
			{Op: vm.AllocTensorReg, Dst: 6, Args: []vm.Reg{5, 2}, DType: f32},
			{Op: vm.InvokeKernel, Imm: 0, Args: []vm.Reg{0, 1, 6}, In: 2, Dims: []vm.Reg{3}, Str: "z of node add"},
			{Op: vm.DeviceCopy, Dst: 7, Args: []vm.Reg{6}, Device: 1},
			{Op: vm.AllocStorage, Dst: 8, Args: []vm.Reg{4}, Device: 1},
			{Op: vm.AllocTensorReg, Dst: 9, Args: []vm.Reg{8, 2}, DType: f32},
			{Op: vm.InvokeKernel, Imm: 1, Args: []vm.Reg{7, 9}, In: 1, Dims: []vm.Reg{3}, Str: "s of node sigmoid"},
			{Op: vm.Ret, Args: []vm.Reg{9}},
		}}},
		Kernels:  []vm.KernelInfo{{Name: vadd, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}, k1},
		Binaries: []vm.Binary{{Device: "cpu", Fingerprint: cpuDev.Info().Fingerprint, Data: bin}, b1},
		Builtins: []string{"n", "f32bytes"},
	}
	scalar := func(v int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{}, []int64{v}) }
	table := map[string]vm.Builtin{
		"n":        func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(a[0].Int64s()[0]), nil },
		"f32bytes": func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(4 * a[0].Int64s()[0]), nil },
	}
	v, err := vm.Load(roundTrip(t, exe), []devices.Device{cpuDev, r.dev}, table)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for i, n := range []int{1, 33, 5000} {
		a, b := randomF32(tensor.Shape{n}, uint64(60+i)), randomF32(tensor.Shape{n}, uint64(80+i))
		out, err := v.Run(context.Background(), []*tensor.Tensor{a, b})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		nt.CloseTensor(t, fmt.Sprintf("n=%d", n), out[0], want(t, m, map[string]ref.Value{"x": a, "y": b}))
	}
}

// The GPU executables on the OpenCL device (PoCL here).

func TestGPUKernelsRunAStaticExecutableOnOpenCL(t *testing.T) {
	checkStaticAddSigmoid(t, openclRig(t))
}

func TestGPUKernelsTakeTheirGridFromDimsAndSkipEmptyLaunchesOnOpenCL(t *testing.T) {
	checkSymbolicAddSigmoid(t, openclRig(t))
}

func TestGPUKernelStatusFailsTheCallNamingTheNodeOnOpenCL(t *testing.T) {
	checkKernelStatusError(t, openclRig(t))
}

func TestConcurrentCallsKeepTheirKernelStatusOnOpenCL(t *testing.T) {
	checkConcurrentCallsKeepTheirStatus(t, openclRig(t))
}

func TestCPUKernelFeedsGPUKernelThroughDeviceCopyOnOpenCL(t *testing.T) {
	checkCPUFeedsGPU(t, openclRig(t))
}

func TestConstantReachingAGPUKernelThroughACallIsPlacedOnceOnOpenCL(t *testing.T) {
	checkConstantPlacedAtFirstUse(t, openclRig(t))
}

// The same on a CUDA GPU (skipped without one).

func TestGPUKernelsRunAStaticExecutableOnCUDA(t *testing.T) {
	checkStaticAddSigmoid(t, cudaRig(t))
}

func TestGPUKernelsTakeTheirGridFromDimsAndSkipEmptyLaunchesOnCUDA(t *testing.T) {
	checkSymbolicAddSigmoid(t, cudaRig(t))
}

func TestGPUKernelStatusFailsTheCallNamingTheNodeOnCUDA(t *testing.T) {
	checkKernelStatusError(t, cudaRig(t))
}

func TestConcurrentCallsKeepTheirKernelStatusOnCUDA(t *testing.T) {
	checkConcurrentCallsKeepTheirStatus(t, cudaRig(t))
}

func TestCPUKernelFeedsGPUKernelThroughDeviceCopyOnCUDA(t *testing.T) {
	checkCPUFeedsGPU(t, cudaRig(t))
}

// fixedTimer is a GPU device that reports every kernel as running 7 ms (devices.Timer).
type fixedTimer struct{ gpuDevice }

// gpuDevice is what the VM uses of a GPU device: views for tensors in arenas and the
// base alignment they need.
type gpuDevice interface {
	devices.Device
	devices.Slicer
	BaseAlign() int64
}

func (fixedTimer) Timing() bool { return true }

func (d fixedTimer) Time(k devices.Kernel, g devices.Geometry, bufs []devices.Buffer, dims []int64) (time.Duration, error) {
	return 7 * time.Millisecond, d.Launch(k, g, bufs, dims)
}

// TestProfileTakesAGPUKernelsTimeFromTheDevice: on a device that measures its kernels,
// RunProfiled records the device's time of each launch, not the wall time around it.
func TestProfileTakesAGPUKernelsTimeFromTheDevice(t *testing.T) {
	r := openclRig(t)
	y := randomF32(tensor.Shape{37}, 2)
	m, exe := staticAddSigmoid(t, r, y)
	v, err := vm.Load(roundTrip(t, exe), []devices.Device{openCPU(t), fixedTimer{r.dev.(gpuDevice)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	var p vm.Profile
	x := randomF32(tensor.Shape{4, 37}, 10)
	for range 2 {
		out, err := v.RunProfiled(context.Background(), []*tensor.Tensor{x}, &p)
		if err != nil {
			t.Fatal(err)
		}
		nt.CloseTensor(t, "profiled", out[0], want(t, m, map[string]ref.Value{"x": x, "y": y}))
	}
	for _, k := range p.Kernels {
		if k.Launches != 2 || k.Total != 14*time.Millisecond {
			t.Errorf("kernel %s: %d launches, %v: want 2 launches of the device's 7 ms", k.Name, k.Launches, k.Total)
		}
	}
}
