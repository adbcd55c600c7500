package vm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// addInputs are x (x[i] = i) and y (y[i] = 2i+1) of length n, each in its own slice
// starting skew elements into a larger one (skew 0: the slice's own start, page-aligned
// for a large slice).
func addInputs(n, skew int) (*tensor.Tensor, *tensor.Tensor) {
	x, y := make([]float32, n+skew)[skew:], make([]float32, n+skew)[skew:]
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	return tensor.MustFromSlice(tensor.Shape{n}, x), tensor.MustFromSlice(tensor.Shape{n}, y)
}

// TestLargeAlignedInputsAreReadInPlace: on the CPU, inputs of 64 KiB or more whose
// elements start aligned are kernels' arguments as they are — the pool holds only the
// output's storage — while the same inputs one element off their alignment are copied
// into pooled storages; both give x + y and leave the inputs unchanged.
func TestLargeAlignedInputsAreReadInPlace(t *testing.T) {
	for _, c := range []struct {
		skew    int
		inPlace bool
	}{{0, true}, {1, false}} {
		m := loadVarying(t)
		x, y := addInputs(maxN, c.skew)
		out, err := m.Run(context.Background(), []*tensor.Tensor{x, y})
		if err != nil {
			t.Fatal(err)
		}
		got := out[0].Data.([]float32)
		for i := range got {
			if got[i] != float32(3*i+1) || x.Data.([]float32)[i] != float32(i) {
				t.Fatalf("skew %d: element %d: x + y = %v (x %v), want %v (x %d)", c.skew, i, got[i], x.Data.([]float32)[i], 3*i+1, i)
			}
		}
		held, inputs := m.MemoryStats().Held, int64(2*4*maxN)
		if inPlace := held < inputs; inPlace != c.inPlace {
			t.Errorf("skew %d: the pool holds %d bytes (the inputs are %d): read in place %v, want %v", c.skew, held, inputs, inPlace, c.inPlace)
		}
	}
}

// TestKernelWritingABoundInputFails: a kernel whose output is an input read in place
// fails the call naming the constant it would write, and the caller's tensor is
// unchanged.
func TestKernelWritingABoundInputFails(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 4, Code: []vm.Instr{
			{Op: vm.ShapeOf, Dst: 2, Args: []vm.Reg{0}},
			{Op: vm.CallBuiltin, Dst: 3, Args: []vm.Reg{2}, Imm: 0},
			{Op: vm.InvokeKernel, Args: []vm.Reg{0, 1, 0}, In: 2, Dims: []vm.Reg{3}},
			{Op: vm.Ret, Args: []vm.Reg{0}},
		}}},
		Kernels:  []vm.KernelInfo{{Name: kernel, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}},
		Binaries: []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins: []string{"first"},
	}
	m, err := vm.Load(exe, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x, y := addInputs(maxN, 0)
	_, err = m.Run(context.Background(), []*tensor.Tensor{x, y})
	if err == nil || !strings.Contains(err.Error(), "constant") {
		t.Fatalf("got %v, want the write into the bound input refused", err)
	}
	for i, v := range x.Data.([]float32) {
		if v != float32(i) {
			t.Fatalf("x[%d] = %v after the refused call, want %d", i, v, i)
		}
	}
}
