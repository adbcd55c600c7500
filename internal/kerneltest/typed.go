package kerneltest

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/tensor"
)

// RunTensors is Run for a function over static extents with inputs and an output of any
// numeric type: the inputs are tensors in parameter order (their raw encoding is the
// buffer), and the output, last, is returned as a tensor of dt and shape.
func RunTensors(t testing.TB, f *loopir.PrimFunc, inputs []*tensor.Tensor, dt tensor.DType, shape tensor.Shape) *tensor.Tensor {
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
	defer dev.Close()
	bin, err := dev.Compiler().Build(context.Background(), src.Code)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := dev.Load(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	k, err := mod.Kernel(src.Kernels[0])
	if err != nil {
		t.Fatal(err)
	}
	var bufs []devices.Buffer
	defer func() {
		for _, b := range bufs {
			dev.Free(b)
		}
	}()
	outBytes := shape.NumElements() * dt.Size()
	raws := [][]byte{}
	for _, in := range inputs {
		raw, err := in.Raw()
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for _, raw := range append(raws, make([]byte, outBytes)) {
		b, err := dev.Alloc(int64(max(len(raw), 1)))
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
		if err := dev.CopyIn(b, raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := dev.Launch(k, devices.Geometry{}, bufs, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, outBytes)
	if err := dev.CopyOut(out, bufs[len(bufs)-1]); err != nil {
		t.Fatal(err)
	}
	res, err := tensor.FromRaw(dt, shape, out)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
