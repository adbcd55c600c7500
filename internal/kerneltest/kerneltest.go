package kerneltest

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/internal/testdata"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/tensor"
)

// Run lowers f through the CPU pipeline, compiles it, launches it with dims on the
// inputs (float32 buffers in parameter order, the output last) and returns the output.
// Without a C compiler it skips the test (fails it under KILN_REQUIRE_DATA=1).
func Run(t testing.TB, f *loopir.PrimFunc, dims []int64, outLen int, inputs ...[]float32) []float32 {
	t.Helper()
	dev, k, done := compile(t, f)
	defer done()
	out, err := Launch(dev, k, dims, outLen, inputs...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compile lowers f through the CPU pipeline, builds it and loads its kernel on a new
// CPU device; done closes them. Without a C compiler it skips the test (fails it under
// KILN_REQUIRE_DATA=1).
func compile(t testing.TB, f *loopir.PrimFunc) (*cpu.Device, devices.Kernel, func()) {
	t.Helper()
	if err := loopir.Verify(f); err != nil {
		t.Fatal(err)
	}
	g, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(g)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cpu.Open(cpu.Options{})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		dev.Close()
		t.Fatal(err)
	}
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		mod.Close()
		dev.Close()
		t.Fatal(err)
	}
	return dev, k, func() {
		mod.Close()
		dev.Close()
	}
}

// Launch runs a loaded kernel on float32 inputs (in parameter order) with fresh buffers,
// the output last, and returns the output; the buffers are freed.
func Launch(dev devices.Device, k devices.Kernel, dims []int64, outLen int, inputs ...[]float32) ([]float32, error) {
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	for _, d := range append(inputs, make([]float32, outLen)) {
		b, err := dev.Alloc(int64(4 * len(d)))
		if err != nil {
			return nil, err
		}
		bufs = append(bufs, b)
		if err := dev.CopyIn(b, F32Bytes(d)); err != nil {
			return nil, err
		}
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, dims); err != nil {
		return nil, err
	}
	raw := make([]byte, 4*outLen)
	if err := dev.CopyOut(raw, bufs[len(bufs)-1]); err != nil {
		return nil, err
	}
	out := make([]float32, outLen)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out, nil
}

// F32Bytes encodes floats little-endian.
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// Ref evaluates one graph op with the given tensor inputs (as parameters) followed by
// constant inputs.
func Ref(t testing.TB, op graph.Op, attrs any, ins []*tensor.Tensor, consts ...*tensor.Tensor) *tensor.Tensor {
	t.Helper()
	b := graph.NewBuilder("main")
	inputs := map[string]ref.Value{}
	var vals []*graph.Value
	for i, in := range ins {
		name := string(rune('a' + i))
		shape := make([]int64, len(in.Shape))
		for k, d := range in.Shape {
			shape[k] = int64(d)
		}
		vals = append(vals, b.Param(name, graph.TensorType(in.DType, graph.StaticShape(shape...)...)))
		inputs[name] = in
	}
	for _, c := range consts {
		vals = append(vals, b.Const("", c))
	}
	out, err := b.Op1(op, attrs, vals...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ref.Eval(m, inputs, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].(*tensor.Tensor)
}

// Close fails the test unless got matches want within 1e-4 + 1e-3·|want|.
func Close(t testing.TB, what string, got []float32, want *tensor.Tensor) {
	t.Helper()
	w := want.Float64s()
	if len(got) != len(w) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(w))
	}
	for i := range w {
		if d := math.Abs(float64(got[i]) - w[i]); d > 1e-4+1e-3*math.Abs(w[i]) {
			t.Fatalf("%s: element %d = %v, want %v", what, i, got[i], w[i])
		}
	}
}

// Random returns n floats in [-1, 1) from a fixed seed.
func Random(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}
