package compiler

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kcpu "github.com/kilnrt/kiln/kernels/cpu"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// scalarKind is a target kind that only the test's backend table knows.
const scalarKind target.Kind = 100

// convReluMatMul is conv (64 output channels: a multiple of every micro-kernel width,
// so the CPU backend tensorizes it and blocks its output) → relu → matmul with a
// constant → add.
func convReluMatMul(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 8, 10, 9)...))
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape, a.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
	c, err := b.Op1(graph.OpConv, a, x, b.Const("w", f32(1, 64, 8, 3, 3)), b.Const("bias", f32(2, 64)))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Op1(graph.OpRelu, nil, c)
	mm, err := b.Op1(graph.OpMatMul, nil, r, b.Const("m", f32(3, 9, 32)))
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Op1(graph.OpAdd, nil, mm, b.Const("shift", f32(4, 32)))
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSecondBackendIsOneTableEntry: a target kind gets its own compile from one more
// Backend value in the table: the CPU's with the generic strategies alone and no
// layout policy. The model compiled for that kind matches the reference evaluator and
// only the generic strategy built its kernels; the same model compiled for the CPU
// through the same table takes the tensorized strategies.
func TestSecondBackendIsOneTableEntry(t *testing.T) {
	scalar := CPUBackend()
	scalar.Name = "cpu-scalar"
	scalar.Strategies = kcpu.ScalarStrategies
	scalar.Layout = nil
	table := DefaultBackends()
	table[scalarKind] = scalar

	m := convReluMatMul(t)
	in := map[string]*tensor.Tensor{"x": f32(5, 1, 8, 10, 9)}
	tg := target.Host()
	tg.Kind = scalarKind
	res := checkCompiledFor(t, m, in, tg, Options{Backends: table})
	if res.Stats.Backend != "cpu-scalar" {
		t.Errorf("compiled by backend %q, want cpu-scalar", res.Stats.Backend)
	}
	if len(res.Stats.Strategies) == 0 {
		t.Fatal("no strategies recorded")
	}
	for name := range res.Stats.Strategies {
		if name != "generic" && name != "generic+epilogue" {
			t.Errorf("strategies %v: %q ran for the scalar backend", res.Stats.Strategies, name)
		}
	}
	for _, g := range res.Stats.Groups {
		if strings.Contains(g.Anchor, "LayoutTransform") {
			t.Errorf("group %+v: a layout transform without a layout policy", g)
		}
	}

	cpu := checkCompiledFor(t, m, in, target.Host(), Options{Backends: table})
	if cpu.Stats.Backend != "cpu" {
		t.Errorf("compiled by backend %q, want cpu", cpu.Stats.Backend)
	}
	if cpu.Stats.Strategies["conv2d-nchwc-tensorized+epilogue"]+cpu.Stats.Strategies["conv2d-winograd-tensorized+epilogue"] != 1 {
		t.Errorf("strategies %v: want the CPU backend's tensorized convolution", cpu.Stats.Strategies)
	}
}

func TestTargetKindWithoutBackendIsRefused(t *testing.T) {
	m := convReluMatMul(t)
	tg := target.Host()
	tg.Kind = target.CUDA
	_, err := Build(m, tg, Options{Backends: Backends{target.CPU: CPUBackend(), target.OpenCL: OpenCLBackend()}})
	if !errors.Is(err, ErrNoBackend) || !errors.Is(err, ErrCompile) || !strings.Contains(err.Error(), "no backend for target cuda") {
		t.Fatalf("err = %v, want ErrCompile and ErrNoBackend naming cuda (a table without CUDA)", err)
	}
	_, err = Build(m, target.Host(), Options{Backends: Backends{scalarKind: CPUBackend()}})
	if !errors.Is(err, ErrNoBackend) || !strings.Contains(err.Error(), "no backend for target cpu") {
		t.Fatalf("err = %v, want ErrNoBackend naming cpu (a table without the CPU)", err)
	}
}

// TestCPUBackendKeyPartsAreTheJournals: the kernel objects' key parts come from the CPU
// backend and are what journals hold: the target's fingerprint with the device's, and
// the C compiler's identity ("none" without a device).
func TestCPUBackendKeyPartsAreTheJournals(t *testing.T) {
	tg := target.Host()
	if got := targetFingerprint(tg, Options{}); got != tg.Fingerprint() {
		t.Errorf("no device: target part %q", got)
	}
	if got := toolchain(tg, Options{}); got != "none" {
		t.Errorf("no device: toolchain part %q", got)
	}
	dev := openCPU(t)
	if got, want := targetFingerprint(tg, Options{CPU: dev}), tg.Fingerprint()+" | device "+dev.Info().Fingerprint; got != want {
		t.Errorf("target part %q, want %q", got, want)
	}
	if got, want := toolchain(tg, Options{CPU: dev}), dev.Compiler().Identity(); got != want {
		t.Errorf("toolchain part %q, want %q", got, want)
	}
}
