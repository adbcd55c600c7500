package vm_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// testHostOps: "scale" returns (x·factor, the element count) with the optional input 1
// (an offset) added when present; "boom" panics; "huge" asks for an output of the
// extent in its input.
func testHostOps() vm.HostOps {
	return vm.HostOps{
		"scale": {Outputs: 2,
			Check: func(a vm.HostAttrs) error {
				if a.Float("factor", 0) == 0 {
					return errors.New("factor must not be 0")
				}
				return nil
			},
			Run: func(h *vm.HostCtx, a vm.HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
				x := in[0].Float64s()
				out, err := h.Alloc(tensor.Float32, int64(len(x)))
				if err != nil {
					return nil, err
				}
				off := 0.0
				if len(in) > 2 && in[2] != nil {
					off = in[2].Float64s()[0]
				}
				o := out.Data.([]float32)
				for i, v := range x {
					o[i] = float32(v*a.Float("factor", 0) + off)
				}
				return []*tensor.Tensor{out, tensor.Scalar(int64(len(x)))}, nil
			}},
		"boom": {Outputs: 1, Run: func(*vm.HostCtx, vm.HostAttrs, []*tensor.Tensor) ([]*tensor.Tensor, error) {
			var s []int
			return nil, errors.New(string(rune(s[3])))
		}},
		"huge": {Outputs: 1, Run: func(h *vm.HostCtx, _ vm.HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			t, err := h.Alloc(tensor.Float32, in[0].Int64s()[0])
			return []*tensor.Tensor{t}, err
		}},
	}
}

// hostExe calls the host op op on its one input (and, with off, a second input as op
// input 2) and returns output field.
func hostExe(op string, attrs vm.HostAttrs, off bool, field int64) *vm.Executable {
	call := vm.HostCall{Op: op, Attrs: attrs}
	args := []vm.Reg{0}
	params := 1
	if off {
		call.Slots, args, params = []int{0, 2}, []vm.Reg{0, 1}, 2
	}
	return &vm.Executable{
		Functions: []vm.Function{{Name: "main", Params: params, Regs: 4, Code: []vm.Instr{
			{Op: vm.CallHost, Dst: 2, Args: args, Imm: 0, Str: "node " + op + "_1"},
			{Op: vm.GetField, Dst: 3, Args: []vm.Reg{2}, Imm: field},
			{Op: vm.Ret, Args: []vm.Reg{3}},
		}}},
		HostCalls: []vm.HostCall{call},
	}
}

func runHost(t *testing.T, exe *vm.Executable, lim vm.Limits, in ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	t.Helper()
	m, err := vm.LoadWith(roundTrip(t, exe), []devices.Device{openCPU(t)}, nil, vm.Options{HostOps: testHostOps(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return m.Run(context.Background(), in)
}

func TestHostOpRunsWithAttributesOptionalInputsAndSeveralOutputs(t *testing.T) {
	attrs := vm.HostAttrs{{Name: "factor", Kind: vm.AttrFloats, Floats: []float64{3}}}
	x := tensor.MustFromSlice(tensor.Shape{3}, []float32{1, 2, 3})
	out, err := runHost(t, hostExe("scale", attrs, true, 0), vm.Limits{}, x, tensor.Scalar(float32(0.5)))
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Data.([]float32); !reflect.DeepEqual(got, []float32{3.5, 6.5, 9.5}) {
		t.Fatalf("scale with offset: %v", got)
	}
	out, err = runHost(t, hostExe("scale", attrs, false, 1), vm.Limits{}, x)
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Int64s(); !reflect.DeepEqual(got, []int64{3}) {
		t.Fatalf("second output: %v", got)
	}
}

func TestHostCallsRoundTripThroughTheBinaryFormat(t *testing.T) {
	exe := hostExe("scale", vm.HostAttrs{
		{Name: "a", Kind: vm.AttrStrings, Strings: []string{"x", ""}},
		{Name: "factor", Kind: vm.AttrFloats, Floats: []float64{-0.25}},
		{Name: "k", Kind: vm.AttrInts, Ints: []int64{-1, 1 << 40}},
	}, true, 0)
	got := roundTrip(t, exe)
	if !reflect.DeepEqual(got.HostCalls, exe.HostCalls) {
		t.Fatalf("host calls changed: %+v, want %+v", got.HostCalls, exe.HostCalls)
	}
}

func TestVerifyRefusesMalformedHostCalls(t *testing.T) {
	for name, mutate := range map[string]func(x *vm.Executable){
		"unsorted attributes": func(x *vm.Executable) {
			x.HostCalls[0].Attrs = vm.HostAttrs{{Name: "b", Kind: vm.AttrInts}, {Name: "a", Kind: vm.AttrInts}}
		},
		"values of another kind": func(x *vm.Executable) {
			x.HostCalls[0].Attrs = vm.HostAttrs{{Name: "a", Kind: vm.AttrInts, Floats: []float64{1}}}
		},
		"unknown kind":      func(x *vm.Executable) { x.HostCalls[0].Attrs = vm.HostAttrs{{Name: "a", Kind: 9}} },
		"descending slots":  func(x *vm.Executable) { x.HostCalls[0].Slots = []int{2, 0} },
		"slots and args":    func(x *vm.Executable) { x.HostCalls[0].Slots = []int{0, 1, 2} },
		"call out of range": func(x *vm.Executable) { x.Functions[0].Code[0].Imm = 1 },
		"no op name":        func(x *vm.Executable) { x.HostCalls[0].Op = "" },
	} {
		x := hostExe("scale", nil, true, 0)
		mutate(x)
		if err := x.Verify(); !errors.Is(err, vm.ErrFormat) {
			t.Errorf("%s: Verify = %v, want ErrFormat", name, err)
		}
	}
}

func TestLoadRefusesUnknownHostOpsAndBadAttributes(t *testing.T) {
	dev := []devices.Device{openCPU(t)}
	if _, err := vm.LoadWith(hostExe("nosuch", nil, false, 0), dev, nil, vm.Options{HostOps: testHostOps()}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("unknown host op: %v", err)
	}
	if _, err := vm.LoadWith(hostExe("scale", nil, false, 0), dev, nil, vm.Options{HostOps: testHostOps()}); err == nil || !strings.Contains(err.Error(), "factor") {
		t.Fatalf("attribute check: %v", err)
	}
}

func TestHostOpPanicIsAnErrorNamingTheNode(t *testing.T) {
	_, err := runHost(t, hostExe("boom", nil, false, 0), vm.Limits{}, tensor.Scalar(float32(1)))
	if err == nil || !strings.Contains(err.Error(), "node boom_1") || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("got %v, want a recovered panic naming the node", err)
	}
}

func TestHostOpAllocationsCountAgainstTheCallsLimits(t *testing.T) {
	lim := vm.Limits{TensorBytes: 1 << 20, RequestBytes: 1 << 21}
	for _, n := range []int64{1 << 19, 1 << 62, -1} {
		_, err := runHost(t, hostExe("huge", nil, false, 0), lim, tensor.Scalar(n))
		if !errors.Is(err, vm.ErrInput) {
			t.Errorf("extent %d: got %v, want ErrInput", n, err)
		}
	}
	if _, err := runHost(t, hostExe("huge", nil, false, 0), lim, tensor.Scalar(int64(1000))); err != nil {
		t.Fatalf("a small output: %v", err)
	}
}
