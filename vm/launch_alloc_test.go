package vm_test

import (
	"context"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// chainProgram adds y to x launches times in place into one output tensor.
func chainProgram(t *testing.T, launches int) (*vm.VM, []*tensor.Tensor) {
	t.Helper()
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 16
	code := []vm.Instr{
		{Op: vm.AllocStorage, Dst: 2, Imm: 4 * n},
		{Op: vm.AllocTensor, Dst: 3, Args: []vm.Reg{2}, DType: tensor.Float32, Shape: []int64{n}},
		{Op: vm.ShapeOf, Dst: 4, Args: []vm.Reg{0}},
		{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{4}, Imm: 0},
		{Op: vm.InvokeKernel, Args: []vm.Reg{0, 1, 3}, In: 2, Dims: []vm.Reg{5}},
	}
	for i := 1; i < launches; i++ {
		code = append(code, vm.Instr{Op: vm.InvokeKernel, Args: []vm.Reg{3, 1, 3}, In: 2, Dims: []vm.Reg{5}})
	}
	code = append(code, vm.Instr{Op: vm.Ret, Args: []vm.Reg{3}})
	exe := &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 6, Code: code}},
		Kernels:   []vm.KernelInfo{{Name: kernel, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}},
		Binaries:  []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins:  []string{"first"},
	}
	m, err := vm.Load(exe, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	in, _ := inputs(n)
	return m, in
}

// TestHostKernelLaunchesAllocateNothing checks that a CPU kernel's launch costs the Go
// heap nothing: a run of 41 launches allocates no more than a run of one (the argument
// arrays are the call's, reused), and the chained launches still compute x + 41·y.
func TestHostKernelLaunchesAllocateNothing(t *testing.T) {
	allocs := func(launches int) float64 {
		m, in := chainProgram(t, launches)
		out, err := m.Run(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		x, y, got := in[0].Float64s(), in[1].Float64s(), out[0].Float64s()
		for i := range got {
			if want := x[i] + float64(launches)*y[i]; got[i] != want {
				t.Fatalf("%d launches: element %d is %v, want %v", launches, i, got[i], want)
			}
		}
		return testing.AllocsPerRun(20, func() {
			if _, err := m.Run(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		})
	}
	one, many := allocs(1), allocs(41)
	if perLaunch := (many - one) / 40; perLaunch >= 0.5 {
		t.Errorf("%.2f allocations per launch (%.0f for 1 launch, %.0f for 41), want none", perLaunch, one, many)
	}
	t.Logf("allocations per run: %.0f with 1 launch, %.0f with 41", one, many)
}
