package compiler_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// stageLimit is how long one stage (load, compile, run) of a generated model may take
// before it counts as a hang.
const stageLimit = 2 * time.Minute

func openDevice(tb testing.TB) *devcpu.Device {
	tb.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		if t, ok := tb.(*testing.T); ok {
			testdata.NoCompiler(t, err)
		}
		tb.Skipf("no C compiler: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dev.Close() })
	return dev
}

// within runs f, failing the test if it takes longer than stageLimit (a hang).
func within(t *testing.T, stage string, model []byte, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil && (strings.Contains(err.Error(), "BUG") || strings.Contains(err.Error(), "panic")) {
			t.Fatalf("%s of a generated model: %v\nmodel: %x", stage, err, model)
		}
		return err
	case <-time.After(stageLimit):
		t.Fatalf("%s of a generated model took more than %v\nmodel: %x", stage, stageLimit, model)
		return nil
	}
}

// checkGenerated drives the loader, the compiler and the VM with the model data
// describes: any stage may refuse it with an error, none may crash, hang, report a
// BUG, or answer where the reference evaluator finds the model or input invalid, and an
// answer must match the reference evaluator's. With boundsCheck the kernels are built
// bounds-checked, and an access outside a buffer (vm.ErrOutOfBounds) fails the test.
func checkGenerated(t *testing.T, dev *devcpu.Device, data []byte, boundsCheck bool) {
	model, shape := (&genModel{b: data}).build()
	var m *graph.Module
	if err := within(t, "load", model, func() (err error) { m, err = onnx.LoadBytes(model, "", onnx.Options{}); return err }); err != nil {
		t.Logf("load: %v", err)
		return
	}
	x := input(shape, data)
	inputs := map[string]*tensor.Tensor{"x": x}
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		t.Logf("dims: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stageLimit)
	defer cancel()
	var res *compiler.Result
	if err := within(t, "compile", model, func() (err error) {
		res, err = compiler.Build(m, target.Host(), compiler.Options{Dims: dims, CPU: dev, Context: ctx, Jobs: 2, Recipe: engine.Recipe{BoundsCheck: boundsCheck}})
		return err
	}); err != nil {
		t.Logf("compile: %v", err)
		return
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatalf("loading a generated model's executable: %v\nmodel: %x", err, model)
	}
	defer machine.Close()
	var got []*tensor.Tensor
	runErr := within(t, "run", model, func() (err error) { got, err = machine.Run(ctx, []*tensor.Tensor{x}); return err })
	want, refErr := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	switch {
	case errors.Is(runErr, vm.ErrOutOfBounds):
		t.Fatalf("a kernel accessed memory outside a buffer: %v\nmodel: %x", runErr, model)
	case runErr != nil:
		t.Logf("run: %v", runErr)
		return // refused by the compiled engine: fine whatever the reference says
	case refErr != nil:
		t.Fatalf("the compiled engine answered a model the reference evaluator refuses (%v)\nmodel: %x", refErr, model)
	}
	for i := range want {
		if msg := differ(got[i], want[i].(*tensor.Tensor)); msg != "" {
			t.Fatalf("output %d: %s\nmodel: %x", i, msg, model)
		}
	}
}

// input is a tensor of the shape with values drawn from the data's tail.
func input(shape []int64, data []byte) *tensor.Tensor {
	s := make(tensor.Shape, len(shape))
	for i, d := range shape {
		s[i] = int(d)
	}
	x := tensor.New(tensor.Float32, s)
	v := x.Data.([]float32)
	for i := range v {
		if len(data) > 0 {
			v[i] = float32(int(data[(i*7+3)%len(data)]%17) - 8)
		}
	}
	return x
}

// differ compares an output with the reference: same dtype and shape, values within a
// float32 tolerance, infinities of the same sign, no NaN where the reference has a
// number. Where the reference has NaN any value passes: how NaN travels through max,
// min and comparisons differs between engines (ONNX Runtime's Relu of NaN is 0, the
// ONNX reference's is NaN).
func differ(got, want *tensor.Tensor) string {
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		return fmt.Sprintf("%v%v, reference %v%v", got.DType, got.Shape, want.DType, want.Shape)
	}
	if !got.DType.IsFloat() {
		if fmt.Sprint(got.Data) != fmt.Sprint(want.Data) {
			return "values differ from the reference"
		}
		return ""
	}
	g, w := got.Float64s(), want.Float64s()
	for i := range w {
		a, b := g[i], w[i]
		switch {
		case math.IsNaN(b):
		case math.IsNaN(a):
			return fmt.Sprintf("element %d: %v, reference %v", i, a, b)
		case math.IsInf(b, 0) || math.IsInf(a, 0):
			if a != b && math.Abs(b) < math.MaxFloat32/2 {
				return fmt.Sprintf("element %d: %v, reference %v", i, a, b)
			}
		case math.Abs(a-b) > 1e-3+1e-3*math.Abs(b):
			return fmt.Sprintf("element %d: %v, reference %v", i, a, b)
		}
	}
	return ""
}

// TestGeneratedModels runs a fixed sample of generated models (FuzzCompileModel
// explores more): each is refused cleanly or answers as the reference does.
func TestGeneratedModels(t *testing.T) {
	runGenerated(t, rand.New(rand.NewPCG(1, 2)), false)
}

// TestGeneratedModelsBoundsChecked runs the same sample with bounds-checked kernels: no
// access of any kernel falls outside its buffers (FuzzCompileModel -fuzz-bounds-check
// explores more).
func TestGeneratedModelsBoundsChecked(t *testing.T) {
	runGenerated(t, rand.New(rand.NewPCG(1, 2)), true)
}

// runGenerated checks 40 generated models drawn from r (8 with -short).
func runGenerated(t *testing.T, r *rand.Rand, boundsCheck bool) {
	dev := openDevice(t)
	n := 40
	if testing.Short() {
		n = 8
	}
	for i := range n {
		data := make([]byte, 16+r.IntN(48))
		for k := range data {
			data[k] = byte(r.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkGenerated(t, dev, data, boundsCheck) })
	}
}

// fuzzBoundsCheck makes FuzzCompileModel build bounds-checked kernels.
var fuzzBoundsCheck = flag.Bool("fuzz-bounds-check", false, "FuzzCompileModel: build bounds-checked kernels and fail on an access outside a buffer")

// FuzzCompileModel: go test ./compiler -run '^$' -fuzz FuzzCompileModel -fuzztime 10m
// [-fuzz-bounds-check]
func FuzzCompileModel(f *testing.F) {
	for _, s := range []string{"", "\x00\x01\x02", "\x03\x13\x1a\x05\xff", "\x04\x02\x02\x02\x02\x13\x80\x81", "\x02\x01\x01\x21\x05\x00\x00"} {
		f.Add([]byte(s))
	}
	dev := openDevice(f)
	f.Fuzz(func(t *testing.T, data []byte) { checkGenerated(t, dev, data, *fuzzBoundsCheck) })
}
