package vm_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// stdExe calls the standard host op op with attrs on n inputs and returns output 0.
func stdExe(op string, attrs vm.HostAttrs, n int) *vm.Executable {
	args := make([]vm.Reg, n)
	for i := range args {
		args[i] = vm.Reg(i)
	}
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: n, Regs: n + 2, Code: []vm.Instr{
			{Op: vm.CallHost, Dst: vm.Reg(n), Args: args, Str: "node " + op},
			{Op: vm.GetField, Dst: vm.Reg(n + 1), Args: []vm.Reg{vm.Reg(n)}},
			{Op: vm.Ret, Args: []vm.Reg{vm.Reg(n + 1)}},
		}}},
		HostCalls: []vm.HostCall{{Op: op, Attrs: attrs}},
	}
}

func ints(name string, v ...int64) vm.HostAttr {
	return vm.HostAttr{Name: name, Kind: vm.AttrInts, Ints: v}
}

// TestStdHostOpsRefuseBadAttributesAtLoad: attribute values no op run could use are
// refused when the executable is loaded.
func TestStdHostOpsRefuseBadAttributesAtLoad(t *testing.T) {
	dev := []devices.Device{openCPU(t)}
	for _, c := range []struct {
		op    string
		attrs vm.HostAttrs
		want  string
	}{
		{vm.HostNMS, vm.HostAttrs{ints("center_point_box", 2)}, "center_point_box"},
		{vm.HostUnique, vm.HostAttrs{ints("sorted", 3)}, "sorted"},
		{vm.HostMaxUnpool, nil, "kernel_shape is missing"},
		{vm.HostMaxUnpool, vm.HostAttrs{ints("kernel_shape", 2, 2), ints("strides", 0, 1)}, "strides"},
		{vm.HostMaxUnpool, vm.HostAttrs{ints("kernel_shape", 2, 2), ints("pads", 0, 0)}, "pads"},
	} {
		_, err := vm.LoadWith(stdExe(c.op, c.attrs, 2), dev, nil, vm.Options{})
		if !errors.Is(err, vm.ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want ErrFormat about %s", c.op, c.attrs, err, c.want)
		}
	}
}

// TestStdHostOpsRefuseBadInputs: inputs of the wrong form, axes out of range and
// outputs over the limits are ErrInput errors naming the node.
func TestStdHostOpsRefuseBadInputs(t *testing.T) {
	x := f32s(tensor.Shape{2, 3}, 1, 0, 2, 0, 3, 4)
	for _, c := range []struct {
		op    string
		attrs vm.HostAttrs
		in    []*tensor.Tensor
		lim   vm.Limits
		want  string
	}{
		{vm.HostUnique, vm.HostAttrs{ints("axis", 2)}, []*tensor.Tensor{x}, vm.Limits{}, "axis"},
		{vm.HostCompress, vm.HostAttrs{ints("axis", -3)}, []*tensor.Tensor{x, tensor.MustFromSlice(tensor.Shape{2}, []bool{true, false})}, vm.Limits{}, "axis"},
		{vm.HostCompress, nil, []*tensor.Tensor{x, tensor.MustFromSlice(tensor.Shape{1, 2}, []bool{true, false})}, vm.Limits{}, "one dimension"},
		{vm.HostTopK, nil, []*tensor.Tensor{x, tensor.MustFromSlice(tensor.Shape{2}, []int64{1, 1})}, vm.Limits{}, "want one integer"},
		{vm.HostTopK, nil, []*tensor.Tensor{x, tensor.Scalar(float32(1))}, vm.Limits{}, "want one integer"},
		{vm.HostNMS, nil, []*tensor.Tensor{f32s(tensor.Shape{1, 1, 3}, 0, 0, 1), f32s(tensor.Shape{1, 1, 1}, 1)}, vm.Limits{}, "do not fit"},
		{vm.HostNonZero, nil, []*tensor.Tensor{ones(16)}, vm.Limits{TensorBytes: 256, RequestBytes: 1 << 20}, ""},
		{vm.HostNonZero, nil, []*tensor.Tensor{ones(64)}, vm.Limits{TensorBytes: 256, RequestBytes: 1 << 20}, "memory limit"},
	} {
		_, err := runStd(t, stdExe(c.op, c.attrs, len(c.in)), c.lim, c.in...)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s on %v: %v", c.op, c.in[0].Shape, err)
			}
			continue
		}
		if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "node "+c.op) {
			t.Errorf("%s %v: got %v, want ErrInput naming the node and %q", c.op, c.attrs, err, c.want)
		}
	}
}

func runStd(t *testing.T, exe *vm.Executable, lim vm.Limits, in ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	m, err := vm.LoadWith(roundTrip(t, exe), []devices.Device{openCPU(t)}, nil, vm.Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return m.Run(t.Context(), in)
}

func f32s(shape tensor.Shape, v ...float32) *tensor.Tensor { return tensor.MustFromSlice(shape, v) }

func ones(n int) *tensor.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return tensor.MustFromSlice(tensor.Shape{n}, v)
}

// TestUniqueTreatsNaNAsDistinctAndNegativeZeroAsZero: as the reference compares
// values: every NaN is an item of its own, -0 and 0 are one.
func TestUniqueTreatsNaNAsDistinctAndNegativeZeroAsZero(t *testing.T) {
	nan := float32(math.NaN())
	x := f32s(tensor.Shape{6}, nan, 0, nan, float32(math.Copysign(0, -1)), 1, 1)
	exe := stdExe(vm.HostUnique, vm.HostAttrs{ints("sorted", 0)}, 1)
	exe.Functions[0].Code[1].Imm = 3 // the counts
	out, err := runStd(t, exe, vm.Limits{}, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Int64s(); fmt.Sprint(got) != "[1 2 1 2]" {
		t.Fatalf("counts %v, want [1 2 1 2] (NaN, 0 twice, NaN, 1 twice)", got)
	}
}
