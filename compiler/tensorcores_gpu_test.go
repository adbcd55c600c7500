package compiler

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// TF32 tolerances of TestTF32MatMulsMatchRefOnCUDA, relative to the element's scale
// Σ_k |alpha·a_ik·b_kj| + |beta·c|: against float32 inputs (the user's view: TF32
// rounds each operand by at most 2⁻¹¹, so a product by at most ~2⁻¹⁰ ≈ 1e-3), and
// against the reference on inputs rounded to TF32 as cvt.rna.tf32.f32 does (what the
// tensor cores compute: exact TF32 products, float32 accumulation).
const (
	tf32TolFP32 = 2e-3
	tf32TolTF32 = 1e-5
)

// roundTF32 rounds x to TF32 (10 explicit mantissa bits) to nearest, ties away from
// zero, as cvt.rna.tf32.f32 does; infinities and NaN are kept.
func roundTF32(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7f800000 == 0x7f800000 {
		return x
	}
	return math.Float32frombits((b + 0x1000) &^ 0x1fff)
}

func mapTensor(x *tensor.Tensor, f func(float32) float32) *tensor.Tensor {
	v := x.Data.([]float32)
	out := make([]float32, len(v))
	for i := range v {
		out[i] = f(v[i])
	}
	return tensor.MustFromSlice(x.Shape, out)
}

// TestTF32MatMulsMatchRefOnCUDA compiles every case with Recipe.Precision tf32 for the
// CUDA GPU (skipped without one), runs it on the VM and checks each element against the
// reference evaluator: within tf32TolTF32 of the reference on TF32-rounded operands,
// within tf32TolFP32 of the float32 reference, and differing from the float32
// reference somewhere (the tensor cores ran, not the float32 rule).
func TestTF32MatMulsMatchRefOnCUDA(t *testing.T) {
	gpu := gputest.CUDA(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	if !intrin.MMAs()[0].Supports(tg) {
		t.Skipf("the GPU is %s; TF32 tensor cores need sm_80 or later", tg.Arch)
	}
	cpu := openCPU(t)
	for ci, c := range mmaCases {
		m := c.module(t)
		inputs := map[string]*tensor.Tensor{}
		for i, a := range c.args {
			var shape []int
			for _, d := range a {
				n, err := strconv.Atoi(d)
				if err != nil {
					n = 130 // the symbolic rows
				}
				shape = append(shape, n)
			}
			inputs["x"+strconv.Itoa(i)] = f32(uint64(10*ci+i+1), shape...)
		}
		dims, err := engine.DimsFromInputs(m, inputs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Build(m, tg, Options{CPU: cpu, GPU: gpu, Dims: dims, Recipe: engine.Recipe{Precision: engine.PrecisionTF32}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mma := false
		for _, g := range res.Stats.Groups {
			mma = mma || g.Strategy == "gpu-matmul-mma"
		}
		if !mma {
			t.Fatalf("%s: no kernel took gpu-matmul-mma: %+v", c.name, res.Stats.Groups)
		}
		machine, err := vm.Load(res.Exe, []devices.Device{cpu, gpu}, vm.StdBuiltins())
		if err != nil {
			t.Fatal(err)
		}
		var args []*tensor.Tensor
		exact, rounded, scale := map[string]ref.Value{}, map[string]ref.Value{}, map[string]ref.Value{}
		for _, p := range m.Main.Params {
			x := inputs[p.Name]
			args = append(args, x)
			exact[p.Name] = x
			rounded[p.Name] = x
			if p.Name != "x2" { // Gemm's C is added in float32, not rounded
				rounded[p.Name] = mapTensor(x, roundTF32)
			}
			scale[p.Name] = mapTensor(x, func(v float32) float32 { return float32(math.Abs(float64(v))) })
		}
		got, err := machine.Run(context.Background(), args)
		machine.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		eval := func(in map[string]ref.Value) []float32 {
			out, err := ref.Eval(m, in, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return out[0].(*tensor.Tensor).Data.([]float32)
		}
		wantFP32, wantTF32, sc := eval(exact), eval(rounded), eval(scale)
		g := got[0].Data.([]float32)
		if len(g) != len(wantFP32) {
			t.Fatalf("%s: %d elements, want %d", c.name, len(g), len(wantFP32))
		}
		var worst, worstTF32 float64
		differs := false
		for i := range g {
			s := float64(sc[i]) + 1e-30
			e := math.Abs(float64(g[i]) - float64(wantFP32[i]))
			e2 := math.Abs(float64(g[i]) - float64(wantTF32[i]))
			worst, worstTF32 = max(worst, e/s), max(worstTF32, e2/s)
			differs = differs || g[i] != wantFP32[i]
			if e > tf32TolFP32*s || e2 > tf32TolTF32*s || math.IsNaN(float64(g[i])) {
				t.Fatalf("%s: element %d is %g; float32 reference %g, TF32 reference %g, scale %g", c.name, i, g[i], wantFP32[i], wantTF32[i], s)
			}
		}
		if !differs {
			t.Errorf("%s: every element equals the float32 reference: the tensor cores did not run", c.name)
		}
		t.Logf("%s on %s: largest error relative to Σ|a·b|: %.2e against float32, %.2e against TF32 inputs", c.name, tg.Arch, worst, worstTF32)
	}
}
