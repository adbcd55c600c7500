package vm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// hugeShape is ConstantOfShape's [2^31, 2^31]: 2^62 float32 elements, 2^64 bytes, a
// byte count that wraps to 0 in int64.
var hugeShape = []int64{1 << 31, 1 << 31}

// TestOverflowingTensorIsRefused: a tensor whose byte count does not fit an int64 is a
// format error when its shape is static (Load) and an input error when its shape is
// computed at run time, never a tensor that "fits" a 128-byte storage.
func TestOverflowingTensorIsRefused(t *testing.T) {
	dev := openCPU(t)
	const what = `tensor "y" of ConstantOfShape "cos"`
	static := &vm.Executable{Functions: []vm.Function{{Name: "main", Regs: 2, Code: []vm.Instr{
		{Op: vm.AllocStorage, Dst: 0, Imm: 128},
		{Op: vm.AllocTensor, Dst: 1, Args: []vm.Reg{0}, DType: tensor.Float32, Shape: hugeShape, Str: what},
		{Op: vm.Ret, Args: []vm.Reg{1}},
	}}}}
	if _, err := vm.Load(static, []devices.Device{dev}, vm.StdBuiltins()); !errors.Is(err, vm.ErrFormat) || !strings.Contains(err.Error(), what) {
		t.Errorf("static shape: got %v, want ErrFormat naming the tensor", err)
	}
	dynamic := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Regs: 3, Code: []vm.Instr{
			{Op: vm.AllocStorage, Dst: 0, Imm: 128},
			{Op: vm.LoadConst, Dst: 1, Imm: 0},
			{Op: vm.AllocTensorReg, Dst: 2, Args: []vm.Reg{0, 1}, DType: tensor.Float32, Str: what},
			{Op: vm.Ret, Args: []vm.Reg{2}},
		}}},
		Constants: []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{2}, hugeShape)},
	}
	m, err := vm.Load(dynamic, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = m.Run(context.Background(), nil)
	if !errors.Is(err, vm.ErrInput) || !errors.Is(err, tensor.ErrTooLarge) || !strings.Contains(err.Error(), what) {
		t.Errorf("run-time shape: got %v, want ErrInput wrapping tensor.ErrTooLarge naming the tensor", err)
	}
}

// TestLoadRefusesStaticMemoryOverTheLimits: the static plan's arena above RequestBytes,
// or a planned tensor above TensorBytes, fails Load with ErrMemoryLimit.
func TestLoadRefusesStaticMemoryOverTheLimits(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 8 // the arena is 8n bytes, the tensor in it 4n
	for name, l := range map[string]vm.Limits{
		"arena":  {RequestBytes: 8*n - 1, TensorBytes: -1},
		"tensor": {RequestBytes: -1, TensorBytes: 4*n - 1},
	} {
		_, err := vm.LoadWith(loopProgram(dev, bin, kernel, n), []devices.Device{dev}, builtins(), vm.Options{Limits: l})
		if !errors.Is(err, vm.ErrMemoryLimit) {
			t.Errorf("%s: got %v, want ErrMemoryLimit", name, err)
		}
	}
	m, err := vm.LoadWith(loopProgram(dev, bin, kernel, n), []devices.Device{dev}, builtins(), vm.Options{Limits: vm.Limits{RequestBytes: 16 * n, TensorBytes: 4 * n}})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// TestRunRefusesCallsOverTheRequestLimit: what a call holds at once (its inputs and its
// storages) is counted against RequestBytes; the refusal is an input error.
func TestRunRefusesCallsOverTheRequestLimit(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 8
	in, _ := inputs(n)
	// inputs 2·4n bytes, arena 8n: 16n in all
	for limit, ok := range map[int64]bool{16*n - 1: false, 16 * n: true} {
		m, err := vm.LoadWith(loopProgram(dev, bin, kernel, n), []devices.Device{dev}, builtins(), vm.Options{Limits: vm.Limits{RequestBytes: limit}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Run(context.Background(), in)
		m.Close()
		if ok && err != nil {
			t.Errorf("limit %d: %v", limit, err)
		}
		if !ok && (!errors.Is(err, vm.ErrInput) || !errors.Is(err, vm.ErrMemoryLimit)) {
			t.Errorf("limit %d: got %v, want ErrInput and ErrMemoryLimit", limit, err)
		}
	}
}

// memPlanProgram reads n from its input's shape and checks a plan whose run-time
// sized tensor has 8n² bytes (mem.plan), then returns n.
func memPlanProgram() *vm.Executable {
	poly := vm.ShapePoly{Terms: []vm.ShapeTerm{{Coef: 8, Syms: []int{0, 0}}}}
	prog := vm.EncodeShapeProgram(tensor.Int64, []int64{2, 1}, []vm.ShapePoly{poly, poly})
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 6, Code: []vm.Instr{
			{Op: vm.ShapeOf, Dst: 1, Args: []vm.Reg{0}},
			{Op: vm.LoadConstInt, Dst: 2, Imm: 0},
			{Op: vm.CallBuiltin, Dst: 3, Args: []vm.Reg{1, 2}, Imm: 0},
			{Op: vm.LoadConst, Dst: 4, Imm: 0},
			{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{4, 3}, Imm: 1, Str: `tensor "scores" of MatMul "mm"`},
			{Op: vm.Ret, Args: []vm.Reg{3}},
		}}},
		Constants: []*tensor.Tensor{prog},
		Builtins:  []string{vm.BuiltinShapeDim, vm.BuiltinMemPlan},
	}
}

// TestMemPlanRefusesBeforeAllocating: mem.plan (the VM's own builtin, absent from the
// table) refuses a call whose run-time sized tensors would exceed the limits as soon
// as the symbols are bound, naming the tensor and node.
func TestMemPlanRefusesBeforeAllocating(t *testing.T) {
	dev := openCPU(t)
	for name, l := range map[string]vm.Limits{
		"request": {RequestBytes: 1 << 20, TensorBytes: -1},
		"tensor":  {RequestBytes: -1, TensorBytes: 1 << 20},
	} {
		m, err := vm.LoadWith(memPlanProgram(), []devices.Device{dev}, vm.StdBuiltins(), vm.Options{Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Run(context.Background(), []*tensor.Tensor{tensor.New(tensor.Int64, tensor.Shape{100})}); err != nil {
			t.Errorf("%s: n=100 (80 KB): %v", name, err)
		}
		_, err = m.Run(context.Background(), []*tensor.Tensor{tensor.New(tensor.Int64, tensor.Shape{1000})})
		if !errors.Is(err, vm.ErrInput) || !errors.Is(err, vm.ErrMemoryLimit) || !strings.Contains(err.Error(), `MatMul "mm"`) || !strings.Contains(err.Error(), "limit of 1048576 bytes") {
			t.Errorf("%s: n=1000 (8 MB): got %v, want ErrInput and ErrMemoryLimit naming the node and the limit", name, err)
		}
		m.Close()
	}
}

// TestShapeProgramOverflowIsAnInputError: a shape program whose arithmetic leaves int64
// (s² for s = 2^40) is an input error, not a wrapped-around extent.
func TestShapeProgramOverflowIsAnInputError(t *testing.T) {
	prog := vm.EncodeShapeProgram(tensor.Int64, nil, []vm.ShapePoly{{Terms: []vm.ShapeTerm{{Coef: 4, Syms: []int{0, 0}}}}})
	_, err := vm.StdBuiltins()[vm.BuiltinShapeEval]([]*tensor.Tensor{prog, tensor.Scalar(int64(1 << 40))})
	if !errors.Is(err, vm.ErrInput) || !errors.Is(err, tensor.ErrTooLarge) {
		t.Errorf("got %v, want ErrInput wrapping tensor.ErrTooLarge", err)
	}
}

// TestLaunchChecksTensorsAgainstTheKernel: a launch whose tensor holds less than the
// kernel may touch through it (by the kernel table's extents), or with a negative
// runtime dim, is refused before the kernel runs.
func TestLaunchChecksTensorsAgainstTheKernel(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 8
	in, _ := inputs(n)
	for name, c := range map[string]struct {
		edit func(x *vm.Executable)
		want string
	}{
		"output too small": {func(x *vm.Executable) {
			x.Functions[0].Code[1].Shape = []int64{1} // the kernel writes n elements
		}, "may touch 32 bytes"},
		"extent larger than the tensor": {func(x *vm.Executable) {
			x.Kernels[0].Args[0].Elements = vm.Extent{vm.ExtDim, 0, vm.ExtConst, 2, vm.ExtMul}
		}, "may touch 64 bytes"},
		"negative dim": {func(x *vm.Executable) {
			x.Functions[0].Code[3] = vm.Instr{Op: vm.LoadConstInt, Dst: 5, Imm: -1}
		}, "dim n is -1"},
	} {
		x := loopProgram(dev, bin, kernel, n)
		c.edit(x)
		m, err := vm.Load(x, []devices.Device{dev}, builtins())
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Run(context.Background(), in)
		m.Close()
		if !errors.Is(err, vm.ErrRun) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error mentioning %q", name, err, c.want)
		}
	}
	x := loopProgram(dev, bin, kernel, n)
	x.Kernels[0].Args[2].Elements = vm.Extent{vm.ExtDim, 0, vm.ExtAdd}
	if _, err := vm.Load(x, []devices.Device{dev}, builtins()); !errors.Is(err, vm.ErrFormat) {
		t.Errorf("malformed extent: got %v, want ErrFormat", err)
	}
	x = loopProgram(dev, bin, kernel, n)
	x.Kernels[0].Args = x.Kernels[0].Args[:2]
	if _, err := vm.Load(x, []devices.Device{dev}, builtins()); !errors.Is(err, vm.ErrFormat) {
		t.Errorf("missing argument extents: got %v, want ErrFormat", err)
	}
}
