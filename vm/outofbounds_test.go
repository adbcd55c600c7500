package vm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TestOutOfBoundsKernelIsAnErrorNamingKernelAndBuffer: a bounds-checked kernel whose
// store runs one past the end of its output fails the call with ErrOutOfBounds (not
// ErrInput: the executable is wrong) naming the kernel, the node, the output and the
// offset; the VM keeps serving.
func TestOutOfBoundsKernelIsAnErrorNamingKernelAndBuffer(t *testing.T) {
	dev := openCPU(t)
	n, i := loopir.NewVar("n"), loopir.NewVar("i")
	x := &loopir.Buffer{Name: "x", DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	y := &loopir.Buffer{Name: "y", DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	f := &loopir.PrimFunc{Name: "overrun", Params: []*loopir.Buffer{x, y}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: i, Min: loopir.Int(0), Extent: loopir.Bin(loopir.Add, n, loopir.Int(1)),
			Body: &loopir.Store{Buf: y, Index: []loopir.Expr{i}, Value: loopir.Float(2, tensor.Float32)}}}
	src, err := codegen.EmitCWith(codegen.COptions{BoundsCheck: true}, f)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	const size = 16
	arg := vm.KernelArg{DType: tensor.Float32, Elements: vm.Extent{vm.ExtDim, 0}}
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 5, Code: []vm.Instr{
			{Op: vm.AllocStorage, Dst: 1, Imm: 4 * size},
			{Op: vm.AllocTensor, Dst: 2, Args: []vm.Reg{1}, DType: tensor.Float32, Shape: []int64{size}},
			{Op: vm.ShapeOf, Dst: 3, Args: []vm.Reg{0}},
			{Op: vm.CallBuiltin, Dst: 4, Args: []vm.Reg{3}, Imm: 0},
			{Op: vm.InvokeKernel, Args: []vm.Reg{0, 2}, In: 1, Dims: []vm.Reg{4}, Str: `tensor "y" of Relu "/act"`},
			{Op: vm.Ret, Args: []vm.Reg{2}},
		}}},
		Kernels:  []vm.KernelInfo{{Name: src.Kernels[0], Binary: 0, Inputs: 1, Outputs: 1, Dims: []string{"n"}, Args: []vm.KernelArg{arg, arg}}},
		Binaries: []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins: []string{"first"},
	}
	m, err := vm.Load(exe, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in := []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{size}, make([]float32, size))}
	for range 2 {
		_, err = m.Run(context.Background(), in)
		var ke *devices.KernelError
		if !errors.Is(err, vm.ErrOutOfBounds) || errors.Is(err, vm.ErrInput) || !errors.As(err, &ke) {
			t.Fatalf("got %v, want ErrOutOfBounds wrapping the kernel's error, not ErrInput", err)
		}
		for _, want := range []string{src.Kernels[0], `Relu "/act"`, "output 0 (argument 1, 16 elements)", "element 16"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: does not mention %q", err, want)
			}
		}
	}
	t.Log(err)
}
