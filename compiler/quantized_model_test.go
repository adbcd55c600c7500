package compiler_test

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// qmodel builds an ONNX graph in the pattern that ONNX Runtime's quantize_dynamic
// writes: activations quantized at run time, weights stored quantized.
type qmodel struct {
	r     *rand.Rand
	nodes []*onnxpb.NodeProto
	inits []*onnxpb.TensorProto
}

func (q *qmodel) init(name string, dt onnxpb.TensorProto_DataType, dims []int64, raw []byte) string {
	d := int32(dt)
	q.inits = append(q.inits, &onnxpb.TensorProto{Name: str(name), DataType: &d, Dims: dims, RawData: raw})
	return name
}

// floats adds a float initializer of values in [lo, hi).
func (q *qmodel) floats(name string, lo, hi float64, dims ...int64) string {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	raw := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(lo+(hi-lo)*q.r.Float64())))
	}
	return q.init(name, onnxpb.TensorProto_FLOAT, dims, raw)
}

// bytes adds a uint8 or int8 initializer of random values.
func (q *qmodel) bytes(name string, dt onnxpb.TensorProto_DataType, dims ...int64) string {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	raw := make([]byte, n)
	for i := range raw {
		raw[i] = byte(q.r.IntN(256))
	}
	return q.init(name, dt, dims, raw)
}

func (q *qmodel) node(op string, in, out []string, attrs ...*onnxpb.AttributeProto) {
	q.nodes = append(q.nodes, &onnxpb.NodeProto{OpType: str(op), Name: str(out[0]), Input: in, Output: out, Attribute: attrs})
}

// dequantized is Cast(acc) · (x_scale · w_scale) + bias, as quantize_dynamic writes it
// after an integer product.
func (q *qmodel) dequantized(acc, xScale, wScale, bias, out string) {
	q.node("Cast", []string{acc}, []string{acc + "_f"}, attrInt("to", int64(onnxpb.TensorProto_FLOAT)))
	q.node("Mul", []string{xScale, wScale}, []string{acc + "_scale"})
	q.node("Mul", []string{acc + "_f", acc + "_scale"}, []string{acc + "_deq"})
	q.node("Add", []string{acc + "_deq", bias}, []string{out})
}

// dynamicQuantizedNet is x [n, 3, 10, 10] → Conv 3→8 (3×3, pad 1, int8 weights
// per output channel) → Relu → Conv 8→8 (3×3, stride 2, 2 groups, uint8 weights) →
// Reshape [n, 200] → MatMul 200→10 (int8 weights, per-column zero points), each product
// quantized dynamically: DynamicQuantizeLinear → ConvInteger / MatMulInteger → Cast →
// Mul by the scales → Add bias.
func dynamicQuantizedNet(batch string) []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(11, 12))}
	i8, u8 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8
	q.node("DynamicQuantizeLinear", []string{"x"}, []string{"x_q", "x_s", "x_z"})
	q.node("ConvInteger", []string{"x_q", q.bytes("w1", i8, 8, 3, 3, 3), "x_z", q.bytes("w1_z", i8, 8)}, []string{"c1"},
		attrInts("pads", []int64{1, 1, 1, 1}))
	q.dequantized("c1", "x_s", q.floats("w1_s", 0.002, 0.004), q.floats("b1", -0.5, 0.5, 8, 1, 1), "y1")
	q.node("Relu", []string{"y1"}, []string{"r1"})
	q.node("DynamicQuantizeLinear", []string{"r1"}, []string{"r1_q", "r1_s", "r1_z"})
	q.node("ConvInteger", []string{"r1_q", q.bytes("w2", u8, 8, 4, 3, 3), "r1_z", q.bytes("w2_z", u8)}, []string{"c2"},
		attrInts("strides", []int64{2, 2}), attrInts("pads", []int64{1, 1, 1, 1}), attrInt("group", 2))
	q.dequantized("c2", "r1_s", q.floats("w2_s", 0.001, 0.002), q.floats("b2", -0.5, 0.5, 8, 1, 1), "y2")
	shape := make([]byte, 16)
	binary.LittleEndian.PutUint64(shape, math.MaxUint64) // -1
	binary.LittleEndian.PutUint64(shape[8:], 200)
	q.node("Reshape", []string{"y2", q.init("shape", onnxpb.TensorProto_INT64, []int64{2}, shape)}, []string{"flat"})
	q.node("DynamicQuantizeLinear", []string{"flat"}, []string{"f_q", "f_s", "f_z"})
	q.node("MatMulInteger", []string{"f_q", q.bytes("w3", i8, 200, 10), "f_z", q.bytes("w3_z", i8, 10)}, []string{"m"})
	q.dequantized("m", "f_s", q.floats("w3_s", 0.001, 0.002), q.floats("b3", -1, 1, 10), "out")

	return q.model(batch, []int64{3, 10, 10}, "dynamic_quantized")
}

// model is the graph of q's nodes with one float input x [batch, dims...] and the
// float output "out"; batch is a symbol, or a number for a static batch.
func (q *qmodel) model(batch string, dims []int64, name string) []byte {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	shape := []*onnxpb.TensorShapeProto_Dimension{{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: batch}}}
	if n, err := strconv.ParseInt(batch, 10, 64); err == nil {
		shape[0].Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: n}
	}
	for _, d := range dims {
		shape = append(shape, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	in := &onnxpb.ValueInfoProto{Name: str("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
		ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: shape}}}}}
	out := &onnxpb.ValueInfoProto{Name: str("out"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32}}}}
	v13, ir := int64(13), int64(8)
	m := &onnxpb.ModelProto{IrVersion: &ir, OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: str(""), Version: &v13}},
		Graph: &onnxpb.GraphProto{Name: str(name), Input: []*onnxpb.ValueInfoProto{in}, Output: []*onnxpb.ValueInfoProto{out},
			Node: q.nodes, Initializer: q.inits}}
	b, err := proto.Marshal(m)
	if err != nil {
		panic("BUG: marshal the quantized model: " + err.Error())
	}
	return b
}

// TestDynamicallyQuantizedModelMatchesRef: a Conv/Conv/MatMul network quantized the
// way quantize_dynamic does it, with a symbolic batch, compiled at O3 and at O0 and run
// at two batch sizes: every output within float tolerance of the reference evaluator.
func TestDynamicallyQuantizedModelMatchesRef(t *testing.T) {
	checkQuantizedModel(t, dynamicQuantizedNet("n"), []int{1, 3}, 3, 10, 10)
}

// TestQDQModelMatchesRef: the same for a Conv/MatMul network in the QDQ form (float
// operators between QuantizeLinear and DequantizeLinear, which fusion puts in the
// operators' kernels), with a batch of 2.
func TestQDQModelMatchesRef(t *testing.T) {
	checkQuantizedModel(t, qdqNet("2"), []int{2}, 4, 9, 9)
}

// checkQuantizedModel compiles model (input x [n, dims...]) at O3 and O0 and runs it at
// each batch size n against the reference evaluator.
func checkQuantizedModel(t *testing.T, model []byte, batches []int, dims ...int) {
	dev := openDevice(t)
	m, err := onnx.LoadBytes(model, "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range []engine.Level{engine.O3, engine.O0} {
		res, err := compiler.Build(m, target.Host(), compiler.Options{CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: level}})
		if err != nil {
			t.Fatalf("%v: %v", level, err)
		}
		machine, err := vm.Load(res.Exe, []devices.Device{dev}, vm.StdBuiltins())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range batches {
			x := tensor.New(tensor.Float32, append(tensor.Shape{n}, dims...))
			r := rand.New(rand.NewPCG(uint64(n), 21))
			for i := range x.Data.([]float32) {
				x.Data.([]float32)[i] = float32(r.NormFloat64())
			}
			got, err := machine.Run(context.Background(), []*tensor.Tensor{x})
			if err != nil {
				t.Fatalf("%v, batch %d: %v", level, n, err)
			}
			want, err := ref.Eval(m, map[string]ref.Value{"x": x}, ref.Options{})
			if err != nil {
				t.Fatal(err)
			}
			w := want[0].(*tensor.Tensor)
			if msg := differ(got[0], w); msg != "" {
				t.Fatalf("%v, batch %d: %s", level, n, msg)
			}
			if !w.Shape.Equal(tensor.Shape{n, 10}) {
				t.Fatalf("%v, batch %d: output shape %v", level, n, w.Shape)
			}
		}
		machine.Close()
	}
}

// qdqNet is x [n, 4, 9, 9] in the QDQ form of static quantization: QuantizeLinear →
// DequantizeLinear around each float operator, weights stored int8 and dequantized per
// output channel (folded at compile time), a Conv (3×3, pad 1) + Relu, then Reshape
// and a MatMul, each result quantized to uint8 and dequantized.
func qdqNet(batch string) []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(13, 14))}
	i8, u8 := onnxpb.TensorProto_INT8, onnxpb.TensorProto_UINT8
	qdq := func(in, name string, scale float64, zero byte) string {
		s := q.floats(name+"_s", scale, scale)
		z := q.init(name+"_z", u8, nil, []byte{zero})
		q.node("QuantizeLinear", []string{in, s, z}, []string{name + "_q"})
		q.node("DequantizeLinear", []string{name + "_q", s, z}, []string{name})
		return name
	}
	x := qdq("x", "xd", 0.02, 128)
	q.node("DequantizeLinear", []string{q.bytes("w1q", i8, 6, 4, 3, 3), q.floats("w1s", 0.001, 0.003, 6), q.init("w1z", i8, []int64{6}, make([]byte, 6))},
		[]string{"w1"}, attrInt("axis", 0))
	q.node("Conv", []string{x, "w1", q.floats("b1", -0.2, 0.2, 6)}, []string{"c1"}, attrInts("pads", []int64{1, 1, 1, 1}))
	q.node("Relu", []string{"c1"}, []string{"r1"})
	r := qdq("r1", "r1d", 0.01, 0)
	shape := make([]byte, 16)
	binary.LittleEndian.PutUint64(shape, math.MaxUint64) // -1
	binary.LittleEndian.PutUint64(shape[8:], 6*81)
	q.node("Reshape", []string{r, q.init("shape", onnxpb.TensorProto_INT64, []int64{2}, shape)}, []string{"flat"})
	q.node("DequantizeLinear", []string{q.bytes("w2q", i8, 6*81, 10), q.floats("w2s", 0.002, 0.002)}, []string{"w2"})
	q.node("MatMul", []string{"flat", "w2"}, []string{"m"})
	qdq("m", "out", 0.05, 100)
	return q.model(batch, []int64{4, 9, 9}, "qdq")
}

// TestKernelsFeedingAQuantizerDoNotContract: at O3 the dequantization Cast · scale +
// bias runs inside the integer product's kernel, and the layers' results are quantized
// again for the next layer (DynamicQuantizeLinear): those kernels round each product
// before the add (loopir.PrimFunc.NoContract; a fused multiply-add moves values across
// rounding boundaries, and a quantized MobileNetV2's logits moved by 2%). The last
// layer's kernel, whose result is the model's output, keeps its fused multiply-adds.
func TestKernelsFeedingAQuantizerDoNotContract(t *testing.T) {
	exact := noContractByWorkload(t, dynamicQuantizedNet("n"))
	var convs, matmuls []bool
	for w, nc := range exact {
		switch {
		case strings.HasPrefix(w, "convinteger-"):
			convs = append(convs, nc)
		case strings.HasPrefix(w, "matmulinteger-"):
			matmuls = append(matmuls, nc)
		}
	}
	if len(convs) != 2 || !convs[0] || !convs[1] {
		t.Errorf("the two ConvInteger kernels (their results are quantized) without contraction: %v (%v)", convs, exact)
	}
	if len(matmuls) != 1 || matmuls[0] {
		t.Errorf("the MatMulInteger kernel (its result is the output) contracts: %v (%v)", matmuls, exact)
	}
}

// dynamicQuantizedUNet is a dynamically quantized U-Net step: the first layer's result
// r1 reaches the next quantizer through a MaxPool, and through a skip connection; the
// second layer's result is upsampled (Resize, linear), added to r1 and quantized for
// the third layer, whose result is the output.
func dynamicQuantizedUNet() []byte {
	q := &qmodel{r: rand.New(rand.NewPCG(13, 14))}
	i8 := onnxpb.TensorProto_INT8
	q.node("DynamicQuantizeLinear", []string{"x"}, []string{"x_q", "x_s", "x_z"})
	q.node("ConvInteger", []string{"x_q", q.bytes("w1", i8, 8, 3, 3, 3), "x_z", q.bytes("w1_z", i8, 8)}, []string{"c1"},
		attrInts("pads", []int64{1, 1, 1, 1}))
	q.dequantized("c1", "x_s", q.floats("w1_s", 0.002, 0.004), q.floats("b1", -0.5, 0.5, 8, 1, 1), "y1")
	q.node("Relu", []string{"y1"}, []string{"r1"})
	q.node("MaxPool", []string{"r1"}, []string{"p1"}, attrInts("kernel_shape", []int64{2, 2}), attrInts("strides", []int64{2, 2}))
	q.node("DynamicQuantizeLinear", []string{"p1"}, []string{"p1_q", "p1_s", "p1_z"})
	q.node("ConvInteger", []string{"p1_q", q.bytes("w2", i8, 8, 8, 3, 3), "p1_z", q.bytes("w2_z", i8, 8)}, []string{"c2"},
		attrInts("pads", []int64{1, 1, 1, 1}))
	q.dequantized("c2", "p1_s", q.floats("w2_s", 0.001, 0.002), q.floats("b2", -0.5, 0.5, 8, 1, 1), "y2")
	q.node("Relu", []string{"y2"}, []string{"r2"})
	sizes := make([]byte, 32)
	for i, d := range []uint64{1, 8, 12, 12} {
		binary.LittleEndian.PutUint64(sizes[8*i:], d)
	}
	linear, half := onnxpb.AttributeProto_STRING, onnxpb.AttributeProto_STRING
	q.node("Resize", []string{"r2", "", "", q.init("sizes", onnxpb.TensorProto_INT64, []int64{4}, sizes)}, []string{"u2"},
		&onnxpb.AttributeProto{Name: str("mode"), Type: &linear, S: []byte("linear")},
		&onnxpb.AttributeProto{Name: str("coordinate_transformation_mode"), Type: &half, S: []byte("half_pixel")})
	q.node("Add", []string{"u2", "r1"}, []string{"a"})
	q.node("DynamicQuantizeLinear", []string{"a"}, []string{"a_q", "a_s", "a_z"})
	q.node("ConvInteger", []string{"a_q", q.bytes("w3", i8, 4, 8, 3, 3), "a_z", q.bytes("w3_z", i8, 4)}, []string{"c3"},
		attrInts("pads", []int64{1, 1, 1, 1}))
	q.dequantized("c3", "a_s", q.floats("w3_s", 0.001, 0.002), q.floats("b3", -1, 1, 4, 1, 1), "out")
	return q.model("1", []int64{3, 12, 12}, "dynamic_quantized_unet")
}

// TestKernelsReachingAQuantizerDoNotContract: a layer's result that reaches the next
// quantizer through ops that select their inputs' elements (a MaxPool) or that round
// as the reference runtimes do (Resize, a skip connection's Add) is computed without
// contraction, as are the Resize and the Add themselves: a one-ulp difference there
// moves a quantization step (a dynamically quantized ISNet's outputs drifted by 0.06
// from ONNX Runtime's before, and match them to 1.4e-7 after). The last layer's
// kernel, whose result is the output, keeps its fused multiply-adds.
func TestKernelsReachingAQuantizerDoNotContract(t *testing.T) {
	exact := noContractByWorkload(t, dynamicQuantizedUNet())
	contracted, resizes := 0, 0
	for w, nc := range exact {
		switch {
		case strings.HasPrefix(w, "convinteger-") && !nc:
			contracted++
		case strings.Contains(w, "resize"):
			resizes++
			if !nc {
				t.Errorf("kernel %s (the upsampling on the way to a quantizer) contracts", w)
			}
		}
	}
	if contracted != 1 {
		t.Errorf("%d ConvInteger kernels contract, want 1 (the last layer's): %v", contracted, exact)
	}
	if resizes == 0 {
		t.Errorf("no Resize kernel among %v", exact)
	}
}

// noContractByWorkload builds the model at O3 and returns, per kernel workload, whether
// the kernel was lowered without contraction (loopir.PrimFunc.NoContract).
func noContractByWorkload(t *testing.T, model []byte) map[string]bool {
	t.Helper()
	dev := openDevice(t)
	m, err := onnx.LoadBytes(model, "", onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exact := map[string]bool{}
	lowered := func(workload string, f *loopir.PrimFunc) { exact[workload] = f.NoContract }
	if _, err := compiler.Build(m, target.Host(), compiler.Options{CPU: dev, Jobs: 2, Recipe: engine.Recipe{Level: engine.O3}, Lowered: lowered}); err != nil {
		t.Fatal(err)
	}
	return exact
}
