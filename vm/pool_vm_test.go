package vm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// maxN bounds the vector length of varyingProgram; smallN is where its output storage
// switches from the small to the large size.
const maxN, smallN = 1 << 16, 1 << 14

// varyingProgram computes x + y for vectors of any length n ≤ maxN: the inputs' storages
// are 4n bytes, and the output lives in a storage of 4·smallN or 4·maxN bytes chosen by
// an If on n, so every call asks the pool for different sizes.
func varyingProgram(dev *cpu.Device, bin []byte, kernel string) *vm.Executable {
	f32 := tensor.Float32
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 8, Code: []vm.Instr{
			{Op: vm.ShapeOf, Dst: 2, Args: []vm.Reg{0}},                              // 0
			{Op: vm.CallBuiltin, Dst: 3, Args: []vm.Reg{2}, Imm: 0},                  // 1: n
			{Op: vm.CallBuiltin, Dst: 4, Args: []vm.Reg{3}, Imm: 1},                  // 2: n > smallN
			{Op: vm.If, Args: []vm.Reg{4}, Imm: 3},                                   // 3
			{Op: vm.AllocStorage, Dst: 5, Imm: 4 * maxN},                             // 4
			{Op: vm.Goto, Imm: 2},                                                    // 5
			{Op: vm.AllocStorage, Dst: 5, Imm: 4 * smallN},                           // 6
			{Op: vm.AllocTensorReg, Dst: 6, Args: []vm.Reg{5, 2}, DType: f32},        // 7
			{Op: vm.InvokeKernel, Args: []vm.Reg{0, 1, 6}, In: 2, Dims: []vm.Reg{3}}, // 8
			{Op: vm.Ret, Args: []vm.Reg{6}},                                          // 9
		}}},
		Kernels:  []vm.KernelInfo{{Name: kernel, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}},
		Binaries: []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins: []string{"first", "large"},
	}
}

func loadVarying(t *testing.T) *vm.VM {
	t.Helper()
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	table := builtins()
	table["large"] = func(a []*tensor.Tensor) (*tensor.Tensor, error) {
		v := int64(0)
		if a[0].Int64s()[0] > smallN {
			v = 1
		}
		return tensor.MustFromSlice(tensor.Shape{}, []int64{v}), nil
	}
	m, err := vm.Load(varyingProgram(dev, bin, kernel), []devices.Device{dev}, table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// runVarying runs the program on length n and checks x + y.
func runVarying(m *vm.VM, n int) error {
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	out, err := m.Run(context.Background(), []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{n}, x), tensor.MustFromSlice(tensor.Shape{n}, y)})
	if err != nil {
		return err
	}
	got := out[0].Float64s()
	if len(got) != n {
		return fmt.Errorf("n=%d: %d outputs", n, len(got))
	}
	for i := range got {
		if got[i] != float64(3*i+1) {
			return fmt.Errorf("n=%d: element %d is %v, want %v", n, i, got[i], 3*i+1)
		}
	}
	return nil
}

// TestPoolVaryingSizes: after one call at the largest size, calls of random sizes are
// served by splitting the pooled buffers: no new device memory, and correct results
// from tensors in split storages.
func TestPoolVaryingSizes(t *testing.T) {
	m := loadVarying(t)
	if err := runVarying(m, maxN); err != nil {
		t.Fatal(err)
	}
	warm := m.MemoryStats()
	r := rand.New(rand.NewPCG(5, 6))
	for call := 0; call < 200; call++ {
		if err := runVarying(m, 1+r.IntN(maxN)); err != nil {
			t.Fatal(err)
		}
	}
	st := m.MemoryStats()
	if st.Allocs != warm.Allocs || st.Held != warm.Held || st.InUse != 0 || st.Splits == 0 {
		t.Fatalf("after warm-up %+v, after 200 calls of random sizes %+v", warm, st)
	}
	if n := m.TrimMemory(); n != st.Held || m.MemoryStats().Held != 0 {
		t.Fatalf("trim returned %d of %d bytes", n, st.Held)
	}
}

// TestPoolReserve: a buffer reserved for the largest call serves every call from the
// first one on.
func TestPoolReserve(t *testing.T) {
	m := loadVarying(t)
	if err := m.Reserve(0, 3*4*maxN+1<<16); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for call := 0; call < 50; call++ {
		if err := runVarying(m, 1+r.IntN(maxN)); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.MemoryStats(); st.Allocs != 1 || st.Misses != 1 || st.Buffers != 1 {
		t.Fatalf("%+v", st)
	}
}

// TestPoolVaryingConcurrent runs calls of random sizes from several goroutines (-race)
// and checks their results and that nearly every request is a hit.
func TestPoolVaryingConcurrent(t *testing.T) {
	m := loadVarying(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 10))
			for call := 0; call < 40; call++ {
				if err := runVarying(m, 1+r.IntN(maxN)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := m.MemoryStats()
	if st.InUse != 0 || st.Hits < 9*st.Misses {
		t.Fatalf("%+v", st)
	}
	t.Logf("%+v", st)
}
