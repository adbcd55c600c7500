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

// qdqResidualNet is a ResNet block in the QDQ form quantize_static writes, every
// quantizer with its own scale and zero point: x [1, 3, 12, 12] → Q → DQ → Conv 3→16
// (3×3, pad 1: a stem) → Q → DQ → Relu → Q → DQ → Conv 16→16 (3×3) → Q → DQ → Relu →
// Q → DQ → Conv 16→16 (1×1) → Q → DQ, plus the stem's DQ (the skip) → Add → Q → DQ →
// Relu → Q → DQ. Each convolution's epilogue then reads several uint8 zero points of
// the same name (each op's input 2) and, for the last, a uint8 skip per lane.
func qdqResidualNet() []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(51, 52))}
	i8, u8 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8
	f32, i32 := onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_INT32
	k := 0
	quant := func(in string, scale float64, zero byte) string {
		k++
		s, z, out := "s"+string(rune('a'+k)), "z"+string(rune('a'+k)), "q"+string(rune('a'+k))
		q.node("QuantizeLinear", []string{in, q.floats(s, scale, scale), q.init(z, u8, nil, []byte{zero})}, []string{out})
		q.node("DequantizeLinear", []string{out, s, z}, []string{out + "_d"})
		return out + "_d"
	}
	conv := func(in string, sx float64, c, m, kk int64, pads []int64) string {
		k++
		p := "w" + string(rune('a'+k))
		sw, sb, bq := make([]byte, 4*m), make([]byte, 4*m), make([]byte, 4*m)
		for o := range m {
			s := float32(0.002 + 0.004*q.r.Float64())
			binary.LittleEndian.PutUint32(sw[4*o:], math.Float32bits(s))
			binary.LittleEndian.PutUint32(sb[4*o:], math.Float32bits(float32(sx)*s))
			binary.LittleEndian.PutUint32(bq[4*o:], uint32(int32(q.r.IntN(2001)-1000)))
		}
		q.node("DequantizeLinear", []string{q.bytes(p, i8, m, c, kk, kk), q.init(p+"_s", f32, []int64{m}, sw), q.init(p+"_z", i8, []int64{m}, make([]byte, m))},
			[]string{p + "_d"}, attrInt("axis", 0))
		q.node("DequantizeLinear", []string{q.init(p+"_b", i32, []int64{m}, bq), q.init(p+"_bs", f32, []int64{m}, sb)}, []string{p + "_bd"}, attrInt("axis", 0))
		attrs := []*onnxpb.AttributeProto{}
		if pads != nil {
			attrs = append(attrs, attrInts("pads", pads))
		}
		q.node("Conv", []string{in, p + "_d", p + "_bd"}, []string{p + "_y"}, attrs...)
		return p + "_y"
	}
	relu := func(in string) string {
		q.node("Relu", []string{in}, []string{in + "_r"})
		return in + "_r"
	}
	pad := []int64{1, 1, 1, 1}
	x := quant("x", 0.02, 128)
	stem := quant(relu(quant(conv(x, float64(float32(0.02)), 3, 16, 3, pad), 0.05, 97)), 0.03, 0)
	a := quant(relu(quant(conv(stem, float64(float32(0.03)), 16, 16, 3, pad), 0.04, 140)), 0.025, 0)
	b := quant(conv(a, float64(float32(0.025)), 16, 16, 1, nil), 0.06, 111)
	q.node("Add", []string{b, stem}, []string{"sum"})
	out := quant(relu(quant("sum", 0.07, 123)), 0.035, 0)
	q.node("Identity", []string{out}, []string{"out"})
	return q.model("1", []int64{3, 12, 12}, "qdq_residual")
}

// TestQDQResidualBlockOnIntegers: at O3 the block's three convolutions are
// QLinearConv kernels (the stem's 3 channels in one padded block) and the block's
// output is within one quantization step (0.035) of the reference evaluator's float
// operators nearly everywhere (a step taken inside can move the output by a few).
func TestQDQResidualBlockOnIntegers(t *testing.T) {
	dev := openDevice(t)
	m, err := onnx.LoadBytes(qdqResidualNet(), "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.New(tensor.Float32, tensor.Shape{1, 3, 12, 12})
	r := rand.New(rand.NewPCG(9, 10))
	for i := range x.Data.([]float32) {
		x.Data.([]float32)[i] = float32(2.4 * (2*r.Float64() - 1))
	}
	want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var integer int
	lowered := func(workload string, _ *loopir.PrimFunc) {
		if strings.Contains(workload, "qlinearconv") {
			integer++
		}
	}
	res, err := compiler.Build(m, target.Host(), compiler.Options{CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: engine.O3}, Lowered: lowered})
	if err != nil {
		t.Fatal(err)
	}
	if integer != 3 {
		t.Errorf("%d QLinearConv kernels, want 3", integer)
	}
	machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer machine.Close()
	got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	g, w := got[0].Float64s(), want[0].(*tensor.Tensor).Float64s()
	const step = 0.035
	off := 0
	for i := range w {
		d := math.Abs(g[i] - w[i])
		if d > 3*step*(1+1e-6) {
			t.Fatalf("output %d is %g, the float operators' %g: more than three steps apart", i, g[i], w[i])
		}
		if d > step*(1+1e-6) {
			off++
		}
	}
	if off*100 > len(w) {
		t.Fatalf("%d of %d outputs more than one step off the float operators' (over 1%%)", off, len(w))
	}
	t.Logf("%d of %d outputs more than one step off the float operators'", off, len(w))
}
