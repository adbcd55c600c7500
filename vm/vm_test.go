package vm_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/kilnrt/kiln/internal/testdata"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// addKernel builds out[i] = a[i] + b[i] for a symbolic n, as a CPU shared object.
func addKernel(t *testing.T, dev *cpu.Device) ([]byte, string) {
	t.Helper()
	n := te.Dim("n")
	a := te.Placeholder("a", tensor.Float32, n)
	b := te.Placeholder("b", tensor.Float32, n)
	c := te.Compute("c", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr { return te.Add(a.At(i[0]), b.At(i[0])) })
	f, err := te.Lower("vadd", []*te.Tensor{a, b}, []*te.Tensor{c})
	if err != nil {
		t.Fatal(err)
	}
	low, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(low)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	return bin, src.Kernels[0]
}

// loopProgram computes x + k·y for k = LoadConstInt 3 plus one: out = x + y, then three
// more in-place adds of y, counted down by builtins in an If/Goto loop; the output lives
// at an offset inside one storage (after a scratch tensor) and is returned with its shape
// through a tuple.
func loopProgram(dev *cpu.Device, bin []byte, kernel string, n int64) *vm.Executable {
	f32 := tensor.Float32
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: 2, Regs: 12, Code: []vm.Instr{
			{Op: vm.AllocStorage, Dst: 2, Imm: 8 * n},                                                  // 0
			{Op: vm.AllocTensor, Dst: 3, Args: []vm.Reg{2}, Imm: 4 * n, DType: f32, Shape: []int64{n}}, // 1
			{Op: vm.ShapeOf, Dst: 4, Args: []vm.Reg{0}},                                                // 2
			{Op: vm.CallBuiltin, Dst: 5, Args: []vm.Reg{4}, Imm: 2},                                    // 3: n from the shape
			{Op: vm.InvokeKernel, Args: []vm.Reg{0, 1, 3}, In: 2, Dims: []vm.Reg{5}},                   // 4
			{Op: vm.LoadConstInt, Dst: 6, Imm: 3},                                                      // 5
			{Op: vm.CallBuiltin, Dst: 7, Args: []vm.Reg{6}, Imm: 0},                                    // 6: loop: k > 0
			{Op: vm.If, Args: []vm.Reg{7}, Imm: 4},                                                     // 7
			{Op: vm.InvokeKernel, Args: []vm.Reg{3, 1, 3}, In: 2, Dims: []vm.Reg{5}},                   // 8
			{Op: vm.CallBuiltin, Dst: 6, Args: []vm.Reg{6}, Imm: 1},                                    // 9: k - 1
			{Op: vm.Goto, Imm: -4},                                                                     // 10
			{Op: vm.ShapeOf, Dst: 8, Args: []vm.Reg{3}},                                                // 11
			{Op: vm.AllocTuple, Dst: 9, Args: []vm.Reg{3, 8}},                                          // 12
			{Op: vm.Ret, Args: []vm.Reg{9}},                                                            // 13
		}}},
		Kernels:  []vm.KernelInfo{{Name: kernel, Binary: 0, Inputs: 2, Outputs: 1, Dims: []string{"n"}, Args: vaddArgs()}},
		Binaries: []vm.Binary{{Device: "cpu", Fingerprint: dev.Info().Fingerprint, Data: bin}},
		Builtins: []string{"positive", "decrement", "first"},
	}
}

func builtins() map[string]vm.Builtin {
	scalar := func(v int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{}, []int64{v}) }
	return map[string]vm.Builtin{
		"positive": func(a []*tensor.Tensor) (*tensor.Tensor, error) {
			if a[0].Int64s()[0] > 0 {
				return scalar(1), nil
			}
			return scalar(0), nil
		},
		"decrement": func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(a[0].Int64s()[0] - 1), nil },
		"first":     func(a []*tensor.Tensor) (*tensor.Tensor, error) { return scalar(a[0].Int64s()[0]), nil },
		"explode":   func(a []*tensor.Tensor) (*tensor.Tensor, error) { panic("builtin bug") },
	}
}

func openCPU(t *testing.T) *cpu.Device {
	t.Helper()
	dev, err := cpu.Open(cpu.Options{Threads: 1})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

func inputs(n int) ([]*tensor.Tensor, []float32) {
	x, y := make([]float32, n), make([]float32, n)
	want := make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
		want[i] = x[i] + 4*y[i]
	}
	return []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{n}, x), tensor.MustFromSlice(tensor.Shape{n}, y)}, want
}

// TestRunLoopProgram runs the hand-assembled program after a round trip through the
// binary format, from several goroutines at once.
func TestRunLoopProgram(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 37
	data, err := loopProgram(dev, bin, kernel, n).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var exe vm.Executable
	if err := exe.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(&exe, []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, want := inputs(n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 0; it < 5; it++ {
				out, err := m.Run(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				got := out[0].Float64s()
				for i := range want {
					if float32(got[i]) != want[i] {
						errs <- fmt.Errorf("element %d: got %v, want %v", i, got[i], want[i])
						return
					}
				}
				if s := out[1].Int64s(); len(s) != 1 || s[0] != n {
					errs <- fmt.Errorf("shape output %v", s)
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
}

// TestRunFailuresAreErrors: wrong inputs, a missing builtin, a Fatal instruction, an
// infinite loop under a deadline, a tensor that does not fit its storage and a panicking
// builtin are errors, not crashes.
func TestRunFailuresAreErrors(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 8
	in, _ := inputs(n)
	load := func(t *testing.T, edit func(x *vm.Executable)) *vm.VM {
		x := loopProgram(dev, bin, kernel, n)
		edit(x)
		m, err := vm.Load(x, []devices.Device{dev}, builtins())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	cases := map[string]struct {
		edit  func(x *vm.Executable)
		ctx   func() (context.Context, context.CancelFunc)
		input []*tensor.Tensor
		want  string
	}{
		"too few inputs": {edit: func(*vm.Executable) {}, input: in[:1], want: "takes 2 inputs"},
		"fatal": {edit: func(x *vm.Executable) {
			x.Functions[0].Code[5] = vm.Instr{Op: vm.Fatal, Str: "shape not supported"}
		}, want: "shape not supported"},
		"endless loop": {edit: func(x *vm.Executable) {
			x.Functions[0].Code[9] = vm.Instr{Op: vm.Move, Dst: 6, Args: []vm.Reg{6}} // never counts down
		}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		},
			want: "deadline"},
		"tensor past its storage": {edit: func(x *vm.Executable) { x.Functions[0].Code[1].Imm = 4*n + 4 }, want: "does not fit"},
		"panicking builtin":       {edit: func(x *vm.Executable) { x.Builtins[2] = "explode" }, want: "BUG: panic"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := load(t, c.edit)
			ctx, cancel := context.Background(), func() {}
			if c.ctx != nil {
				ctx, cancel = c.ctx()
			}
			defer cancel()
			input := in
			if c.input != nil {
				input = c.input
			}
			_, err := m.Run(ctx, input)
			if !errors.Is(err, vm.ErrRun) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrRun mentioning %q", err, c.want)
			}
		})
	}
	x := loopProgram(dev, bin, kernel, n)
	x.Builtins[0] = "not-there"
	if _, err := vm.Load(x, []devices.Device{dev}, builtins()); !errors.Is(err, vm.ErrRun) {
		t.Errorf("missing builtin: %v", err)
	}
	x = loopProgram(dev, bin, kernel, n)
	x.Binaries[0].Fingerprint = "cpu riscv64"
	if _, err := vm.Load(x, []devices.Device{dev}, builtins()); !errors.Is(err, vm.ErrRun) {
		t.Errorf("foreign binary: %v", err)
	}
}

// vaddArgs describes addKernel's arguments: n float32s each.
func vaddArgs() []vm.KernelArg {
	a := vm.KernelArg{DType: tensor.Float32, Elements: vm.Extent{vm.ExtDim, 0}}
	return []vm.KernelArg{a, a, a}
}
