package vm_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// constProgram computes x + c for a constant c[i] = 100 + i.
func constProgram(dev *cpu.Device, bin []byte, kernel string, n int64) *vm.Executable {
	c := make([]float32, n)
	for i := range c {
		c[i] = float32(100 + i)
	}
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 1, Regs: 6, Code: []vm.Instr{
			{Op: vm.AllocStorage, Dst: 1, Imm: 4 * n},
			{Op: vm.AllocTensor, Dst: 2, Args: []vm.Reg{1}, DType: tensor.Float32, Shape: []int64{n}},
			{Op: vm.LoadConst, Dst: 3, Imm: 0},
			{Op: vm.ShapeOf, Dst: 4, Args: []vm.Reg{0}},
			{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{4}, Imm: 0},
			{Op: vm.InvokeKernel, Args: []vm.Reg{0, 3, 2}, In: 2, Dims: []vm.Reg{5}},
			{Op: vm.Ret, Args: []vm.Reg{2}},
		}}},
		Constants: []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{int(n)}, c)},
		Kernels:   []vm.KernelInfo{{Name: kernel, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}},
		Binaries:  []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins:  []string{"first"},
	}
}

// splitAt returns the encoding's metadata and a copy of its data section at an address
// that is 64-byte aligned plus skew.
func splitAt(t *testing.T, whole []byte, skew int) (meta, data []byte) {
	t.Helper()
	off, err := vm.DataOffset(whole)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(whole)-int(off)+128)
	start := (64-int(uintptr(unsafe.Pointer(&buf[0]))%64))%64 + skew
	data = buf[start : start+len(whole)-int(off)]
	copy(data, whole[off:])
	return bytes.Clone(whole[:off]), data
}

func runOnce(t *testing.T, m *vm.VM, in []*tensor.Tensor) []float64 {
	t.Helper()
	out, err := m.Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Float64s()
}

// TestMappedConstants: an executable whose constants alias their data section (bound
// in place on the CPU device) computes what a copied one does; so does one decoded from
// misaligned data (constants copied, uploaded). The mapped constant is the data
// section's memory itself: a change there shows through.
func TestMappedConstants(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 37
	whole, err := constProgram(dev, bin, kernel, n).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := inputs(n)
	in = in[:1]
	var copied vm.Executable
	if err := copied.UnmarshalBinary(whole); err != nil {
		t.Fatal(err)
	}
	ref, err := vm.Load(&copied, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want := runOnce(t, ref, in)
	for i, v := range want {
		if v != float64(i+100+i) {
			t.Fatalf("element %d: %v", i, v)
		}
	}
	for _, skew := range []int{0, 2} {
		meta, data := splitAt(t, whole, skew)
		exe, err := vm.Decode(meta, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		if exe.Mapped() != (skew == 0) {
			t.Fatalf("skew %d: Mapped() = %v", skew, exe.Mapped())
		}
		m, err := vm.Load(exe, []devices.Device{dev}, builtins())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		got := runOnce(t, m, in)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("skew %d, element %d: got %v, want %v", skew, i, got[i], want[i])
			}
		}
		copy(data, []byte{0, 0, 0, 0}) // c[0] = 0: seen only through a mapped constant
		if got := runOnce(t, m, in)[0]; (got == 0) != (skew == 0) {
			t.Errorf("skew %d: after changing the data section, element 0 is %v", skew, got)
		}
	}
}

// TestConstantIsNotAnOutput: a kernel given a constant as its output is refused, and
// the constant stays intact.
func TestConstantIsNotAnOutput(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 8
	x := constProgram(dev, bin, kernel, n)
	x.Functions[0].Code[5].Args = []vm.Reg{0, 2, 3}
	x.Functions[0].Code[6].Args = []vm.Reg{3}
	whole, err := x.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	meta, data := splitAt(t, whole, 0)
	exe, err := vm.Decode(meta, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(exe, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, _ := inputs(n)
	if _, err := m.Run(context.Background(), in[:1]); !errors.Is(err, vm.ErrRun) || !strings.Contains(err.Error(), "constant") {
		t.Errorf("got %v, want ErrRun about writing a constant", err)
	}
	if c := exe.Constants[0].Float64s(); c[0] != 100 || c[n-1] != 100+n-1 {
		t.Errorf("the constant changed: %v", c)
	}
}
