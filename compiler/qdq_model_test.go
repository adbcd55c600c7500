package compiler_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	onnxpb "github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// qdqConvNet is x [1, 16, 10, 10] → QuantizeLinear → DequantizeLinear → Conv 16→32
// (3×3, pad 1; int8 weights per output channel, int32 biases at x's scale times the
// weights') → QuantizeLinear (y's scale 0.05, zero point 3) → DequantizeLinear: the
// form quantize_static writes, one the CPU runs as QLinearConv (qdq-conv).
func qdqConvNet() []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(31, 32))}
	i8, u8 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8
	const sx = float32(0.02)
	q.node("QuantizeLinear", []string{"x", q.floats("xs", float64(sx), float64(sx)), q.init("xz", u8, nil, []byte{128})}, []string{"xq"})
	q.node("DequantizeLinear", []string{"xq", "xs", "xz"}, []string{"xd"})
	sw, sb, bq := make([]byte, 4*32), make([]byte, 4*32), make([]byte, 4*32)
	for k := range 32 {
		s := float32(0.001 + 0.002*q.r.Float64())
		binary.LittleEndian.PutUint32(sw[4*k:], math.Float32bits(s))
		binary.LittleEndian.PutUint32(sb[4*k:], math.Float32bits(sx*s))
		binary.LittleEndian.PutUint32(bq[4*k:], uint32(int32(q.r.IntN(4001)-2000)))
	}
	f32, i32 := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT32
	q.node("DequantizeLinear", []string{q.bytes("wq", i8, 32, 16, 3, 3), q.init("ws", f32, []int64{32}, sw), q.init("wz", i8, []int64{32}, make([]byte, 32))},
		[]string{"w"}, attrInt("axis", 0))
	q.node("DequantizeLinear", []string{q.init("bq", i32, []int64{32}, bq), q.init("bs", f32, []int64{32}, sb)}, []string{"b"}, attrInt("axis", 0))
	q.node("Conv", []string{"xd", "w", "b"}, []string{"c"}, attrInts("pads", []int64{1, 1, 1, 1}))
	q.node("QuantizeLinear", []string{"c", q.floats("ys", 0.05, 0.05), q.init("yz", u8, nil, []byte{3})}, []string{"yq"})
	q.node("DequantizeLinear", []string{"yq", "ys", "yz"}, []string{"out"})
	return q.model("1", []int64{16, 10, 10}, "qdq_conv")
}

// TestQDQConvRunsOnIntegers: at O3 the QDQ convolution is a QLinearConv kernel (the
// integer product, exact sums, one rounding) and every output is within one
// quantization step (0.05) of the reference evaluator's float operators, nearly all
// equal; at O0 (no qdq-conv) the float operators match the reference as usual.
func TestQDQConvRunsOnIntegers(t *testing.T) {
	dev := openDevice(t)
	m, err := onnx.LoadBytes(qdqConvNet(), "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(tensor.Float32, tensor.Shape{1, 16, 10, 10})
	r := rand.New(rand.NewPCG(5, 6))
	for i := range x.Data.([]float32) {
		x.Data.([]float32)[i] = float32(2.5 * (2*r.Float64() - 1))
	}
	want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := want[0].(*tensor.Tensor).Float64s()
	for _, level := range []engine.Level{engine.O3, engine.O0} {
		var workloads []string
		lowered := func(workload string, _ *loopir.PrimFunc) { workloads = append(workloads, workload) }
		res, err := compiler.Build(m, target.Host(), compiler.Options{CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: level}, Lowered: lowered})
		if err != nil {
			t.Fatalf("%v: %v", level, err)
		}
		integer := strings.Contains(strings.Join(workloads, " "), "qlinearconv")
		if integer != (level == engine.O3) {
			t.Fatalf("%v: a QLinearConv kernel: %v, want %v (kernels %v)", level, integer, level == engine.O3, workloads)
		}
		machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
		if err != nil {
			t.Fatal(err)
		}
		got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
		machine.Close()
		if err != nil {
			t.Fatal(err)
		}
		if level == engine.O0 {
			if msg := differ(got[0], want[0].(*tensor.Tensor)); msg != "" {
				t.Fatalf("O0: %s", msg)
			}
			continue
		}
		g, off := got[0].Float64s(), 0
		for i := range w {
			d := math.Abs(g[i] - w[i])
			if d > 0.05*(1+1e-6) {
				t.Fatalf("O3: output %d is %g, the float operators' %g: more than one step apart", i, g[i], w[i])
			}
			if d != 0 {
				off++
			}
		}
		if off*100 > len(w) {
			t.Fatalf("O3: %d of %d outputs one step off the float operators' (more than 1%%)", off, len(w))
		}
		t.Logf("O3: %d of %d outputs one step off the float operators'", off, len(w))
	}
}
