package compiler

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/tensor"
)

// TestOpenCLTargetPlacesKernelsAndFallsBackToTheCPU: a model compiled for OpenCL
// (PoCL in CI) runs its elementwise kernels on the device and the nodes without a GPU
// strategy on the CPU, with copies at the boundaries; the executable carries one
// binary per device and matches the reference evaluator.
func TestOpenCLTargetPlacesKernelsAndFallsBackToTheCPU(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	m := convReluMatMul(t)
	in := map[string]*tensor.Tensor{"x": f32(7, 1, 8, 10, 9)}
	res := checkCompiledFor(t, m, in, tg, Options{GPU: gpu})
	if res.Stats.Backend != "opencl" {
		t.Errorf("backend %q, want opencl", res.Stats.Backend)
	}
	devs := map[string]int{}
	for _, g := range res.Stats.Groups {
		devs[g.Device]++
		if g.Device == "opencl" && g.Why != "" {
			t.Errorf("%s on the device gives a reason %q", g.Anchor, g.Why)
		}
		if g.Device == "cpu" && !strings.Contains(g.Why, "not on opencl") {
			t.Errorf("%s on the CPU says why: %q", g.Anchor, g.Why)
		}
	}
	t.Logf("kernels by device %v, %d copies: %+v", devs, res.Stats.Copies, res.Stats.Groups)
	if devs["opencl"] == 0 {
		t.Errorf("no kernel on the OpenCL device: %+v", res.Stats.Groups)
	}
	if devs["cpu"] > 0 && res.Stats.Copies == 0 {
		t.Errorf("kernels on both devices and no copy between them: %+v", res.Stats.Groups)
	}
	for _, b := range res.Exe.Binaries {
		if b.Device == "opencl" && b.Fingerprint != gpu.Info().Fingerprint {
			t.Errorf("OpenCL binary for %q, the device is %q", b.Fingerprint, gpu.Info().Fingerprint)
		}
	}
	for _, k := range res.Exe.Kernels {
		if gpuKernel := res.Exe.Binaries[k.Binary].Device == "opencl"; gpuKernel != (k.Launch != nil) {
			t.Errorf("kernel %s: on %s with launch %v", k.Name, res.Exe.Binaries[k.Binary].Device, k.Launch)
		}
	}
}

// TestOpenCLTargetSymbolicBatch: a symbolic batch compiles once for OpenCL: the
// device's grid follows the run-time dims (an empty batch launches nothing), the
// CPU's kernels take them too, and every batch matches the reference; so does the
// CPU's symbolic model with shape arithmetic and a reshape.
func TestOpenCLTargetSymbolicBatch(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("n"), graph.Const(37)))
	s, _ := b.Op1(graph.OpAdd, nil, x, b.Const("bias", f32(3, 37)))
	s, _ = b.Op1(graph.OpSigmoid, nil, s)
	mm, err := b.Op1(graph.OpMatMul, nil, s, b.Const("w", f32(4, 37, 19)))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Op1(graph.OpRelu, nil, mm)
	sm, err := b.Op1(graph.OpSoftmax, graph.OpSoftmax.NewAttrs(), r)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(sm, s)
	if err != nil {
		t.Fatal(err)
	}
	var runs [][]*tensor.Tensor
	for _, n := range []int{1, 5, 300, 0} {
		runs = append(runs, []*tensor.Tensor{f32(uint64(n), n, 37)})
	}
	_, res := checkSymbolic(t, m, tg, Options{GPU: gpu}, runs)
	if res.Exe.Inputs[0].Shape[0] != -1 {
		t.Fatalf("input shape %v, want a dynamic batch", res.Exe.Inputs[0].Shape)
	}
	symbolicOnceFor(t, tg, Options{GPU: gpu})
}

// TestOpenCLKernelsWithOneBodyAndTwoGridsStayTwo: Relu over 512 and over 1024
// elements prints the same GPU body (a thread's index arithmetic does not depend on
// the element count when the block divides it); they are two kernels with their own
// grids, and each output is whole.
func TestOpenCLKernelsWithOneBodyAndTwoGridsStayTwo(t *testing.T) {
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, 256)...))
	y := b.Param("y", graph.TensorType(tensor.Float32, graph.StaticShape(4, 256)...))
	rx, _ := b.Op1(graph.OpRelu, nil, x)
	ry, _ := b.Op1(graph.OpRelu, nil, y)
	m, err := b.Module(rx, ry)
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiledFor(t, m, map[string]*tensor.Tensor{"x": f32(1, 2, 256), "y": f32(2, 4, 256)}, tg, Options{GPU: gpu})
	if res.Stats.Kernels != 2 {
		t.Fatalf("%d kernels, want 2: %+v", res.Stats.Kernels, res.Exe.Kernels)
	}
}
