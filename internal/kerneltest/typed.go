package kerneltest

import (
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// RunTensors is Run for a function over static extents with inputs and an output of any
// numeric type: the inputs are tensors in parameter order (their raw encoding is the
// buffer), and the output, last, is returned as a tensor of dt and shape.
func RunTensors(t testing.TB, f *loopir.PrimFunc, inputs []*tensor.Tensor, dt tensor.DType, shape tensor.Shape) *tensor.Tensor {
	t.Helper()
	dev, k, done := compile(t, f)
	defer done()
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
