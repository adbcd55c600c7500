package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestQLinearParamsAreChecked: QLinearConv's scales and zero points are refused at type
// inference, naming the node, where a kernel would index past them (5 weight scales for
// 8 filters) or read them as another type (an int8 zero point of uint8 data); the shapes
// ONNX allows pass (per-tensor as a scalar or [1], per filter as [M]; QLinearMatMul's
// per-row parameters of any rank).
func TestQLinearParamsAreChecked(t *testing.T) {
	f32s := func(n int) *tensor.Tensor { return tensor.New(tensor.Float32, tensor.Shape{n}) }
	conv := func(ws, wz *tensor.Tensor, xz *tensor.Tensor, ys *tensor.Tensor) error {
		b := NewBuilder("main")
		x := b.Param("x", TensorType(tensor.Uint8, Const(1), Const(4), Const(5), Const(5)))
		in := []*Value{x, b.Const("xs", tensor.Scalar(float32(0.1))), b.Const("xz", xz),
			b.Const("w", tensor.New(tensor.Int8, tensor.Shape{8, 4, 3, 3})), b.Const("ws", ws), b.Const("wz", wz),
			b.Const("ys", ys), b.Const("yz", tensor.Scalar(uint8(0)))}
		_, err := b.Op1(OpQLinearConv, OpQLinearConv.NewAttrs(), in...)
		return err
	}
	u8, i8 := tensor.Scalar(uint8(0)), tensor.Scalar(int8(0))
	for _, c := range []struct {
		name       string
		ws, wz, xz *tensor.Tensor
		ys         *tensor.Tensor
		want       string // "": accepted
	}{
		{"per tensor", tensor.Scalar(float32(1)), i8, u8, tensor.Scalar(float32(1)), ""},
		{"per filter", f32s(8), tensor.New(tensor.Int8, tensor.Shape{8}), u8, tensor.New(tensor.Float32, tensor.Shape{1}), ""},
		{"5 scales for 8 filters", f32s(5), tensor.New(tensor.Int8, tensor.Shape{5}), u8, tensor.Scalar(float32(1)), "input 4 holds 5 values for 8 output channels"},
		{"weight scales of rank 2", tensor.New(tensor.Float32, tensor.Shape{8, 1}), i8, u8, tensor.Scalar(float32(1)), "input 4 is f32[8,1]: want a scalar or 1-D"},
		{"a y scale per channel", tensor.Scalar(float32(1)), i8, u8, f32s(8), "input 6 is f32[8]: want a scalar or one element"},
		{"an int8 zero point for uint8 data", tensor.Scalar(float32(1)), i8, i8, tensor.Scalar(float32(1)), "zero point (input 2) of type i8 for data of type u8"},
	} {
		err := conv(c.ws, c.wz, c.xz, c.ys)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "QLinearConv")):
			t.Errorf("%s: error %v, want one naming QLinearConv with %q", c.name, err, c.want)
		}
	}
	// QLinearMatMul: a's scale and zero point per row, [2,1] for a [2,3] a
	b := NewBuilder("main")
	a := b.Param("a", TensorType(tensor.Uint8, Const(2), Const(3)))
	in := []*Value{a, b.Const("as", tensor.New(tensor.Float32, tensor.Shape{2, 1})), b.Const("az", tensor.New(tensor.Uint8, tensor.Shape{2, 1})),
		b.Const("b", tensor.New(tensor.Uint8, tensor.Shape{3, 4})), b.Const("bs", tensor.Scalar(float32(1))), b.Const("bz", u8),
		b.Const("ys", tensor.Scalar(float32(1))), b.Const("yz", u8)}
	if _, err := b.Op1(OpQLinearMatMul, nil, in...); err != nil {
		t.Errorf("QLinearMatMul per row: %v", err)
	}
	in[2] = b.Const("az8", tensor.New(tensor.Int8, tensor.Shape{2, 1}))
	if _, err := b.Op1(OpQLinearMatMul, nil, in...); err == nil || !strings.Contains(err.Error(), "zero point (input 2) of type i8 for data of type u8") {
		t.Errorf("QLinearMatMul with an int8 zero point of uint8 data: %v", err)
	}
}

// TestQuantizerAxisIsChecked: a (de)quantizer's scale per element of an axis is refused
// where the axis is past the data's rank or the scale's length is not that axis's
// extent; one per channel along axis 1 (the default) passes.
func TestQuantizerAxisIsChecked(t *testing.T) {
	for _, c := range []struct {
		op   Op
		axis int64
		k    int
		want string
	}{
		{OpDequantizeLinear, 1, 4, ""}, {OpQuantizeLinear, -3, 4, ""},
		{OpDequantizeLinear, 7, 4, "axis 7 out of range for data of rank 4"},
		{OpQuantizeLinear, 1, 5, "5 scales for axis 1 of extent 4"},
	} {
		b := NewBuilder("main")
		dt := tensor.Uint8
		if c.op == OpQuantizeLinear {
			dt = tensor.Float32
		}
		x := b.Param("x", TensorType(dt, Const(1), Const(4), Const(5), Const(5)))
		s := b.Const("s", tensor.New(tensor.Float32, tensor.Shape{c.k}))
		_, err := b.Op1(c.op, &QuantAttrs{Axis: c.axis}, x, s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v axis %d, %d scales: %v", c.op, c.axis, c.k, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v axis %d, %d scales: error %v, want %q", c.op, c.axis, c.k, err, c.want)
		}
	}
}
