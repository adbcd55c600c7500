package graph

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestZeroStrideConvIsAnInvalidModel: a Conv whose strides are 0 is an inference error
// naming the node and the attribute (the extent arithmetic divides by the stride), as
// are other attributes out of range and a kernel_shape or group that does not fit the
// weight (kernels read the weight at the attributes' extents).
func TestZeroStrideConvIsAnInvalidModel(t *testing.T) {
	for name, attrs := range map[string]*ConvAttrs{
		"stride 0":                      {Group: 1, Strides: []int64{0, 0}},
		"dilation 0":                    {Group: 1, Dilations: []int64{1, 0}},
		"group 0":                       {Group: 0},
		"negative pad":                  {Group: 1, Pads: []int64{0, -1, 0, 0}},
		"kernel 0":                      {Group: 1, KernelShape: []int64{0, 1}},
		"huge dilation":                 {Group: 1, Dilations: []int64{1 << 62, 1}},
		"huge stride":                   {Group: 1, Strides: []int64{1 << 40, 1}},
		"huge pads":                     {Group: 1, Pads: []int64{math.MaxInt64, 0, 0, 0}},
		"kernel too big":                {Group: 1, KernelShape: []int64{1 << 33, 1}},
		"kernel_shape not the weight's": {Group: 1, KernelShape: []int64{3, 3}},
		"groups not the channels":       {Group: 2},
	} {
		b := NewBuilder("main")
		x := b.Param("x", TensorType(tensor.Float32, Const(1), Const(1), Const(4), Const(4)))
		w := b.Const("w", tensor.New(tensor.Float32, tensor.Shape{1, 1, 1, 1}))
		_, err := b.NodeNamed(OpConv, "conv0", attrs, []string{"y"}, x, w)
		if !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), `"conv0"`) {
			t.Errorf("%s: got %v, want an inference error naming conv0", name, err)
		}
	}
}

// TestOverflowingShapeIsRefused: ConstantOfShape [2^31, 2^31] in float32 has 2^64
// bytes; inference refuses it (tensor.ErrTooLarge) instead of letting a byte count wrap
// to 0 later.
func TestOverflowingShapeIsRefused(t *testing.T) {
	b := NewBuilder("main")
	shape := b.Const("shape", i64s(1<<31, 1<<31))
	_, err := b.NodeNamed(OpConstantOfShape, "cos", nil, []string{"y"}, shape)
	if !errors.Is(err, ErrInfer) || !errors.Is(err, tensor.ErrTooLarge) || !strings.Contains(err.Error(), `"cos"`) {
		t.Fatalf("got %v, want an inference error wrapping tensor.ErrTooLarge naming cos", err)
	}
	// within int64 it is a type like any other (memory limits refuse it later)
	b = NewBuilder("main")
	if _, err := b.NodeNamed(OpConstantOfShape, "cos", nil, []string{"y"}, b.Const("shape", i64s(1<<20, 1<<20))); err != nil {
		t.Fatal(err)
	}
}

// TestDimArithmeticOverflowIsSticky: constant arithmetic that leaves int64 gives an
// overflowed Dim, which stays overflowed, is not a constant, and is refused in a type.
func TestDimArithmeticOverflowIsSticky(t *testing.T) {
	big := Const(1 << 62)
	for name, d := range map[string]Dim{
		"scale":       big.Scale(4),
		"mul":         big.Mul(Const(4)),
		"add":         big.Add(big).Add(big),
		"sym coef":    Sym("s").Scale(1 << 62).Scale(4),
		"sym product": Sym("s").Scale(1 << 40).Mul(Sym("t").Scale(1 << 40)),
		"then sub":    big.Scale(4).Sub(big.Scale(4)),
	} {
		if !d.Overflowed() {
			t.Errorf("%s: %v is not overflowed", name, d)
		}
		if _, ok := d.Value(); ok {
			t.Errorf("%s: an overflowed dim has a value", name)
		}
		if err := CheckTypeSize(TensorType(tensor.Uint8, d)); !errors.Is(err, tensor.ErrTooLarge) {
			t.Errorf("%s: CheckTypeSize gave %v", name, err)
		}
	}
	if d := Const(1 << 61).Scale(2); d.Overflowed() || d.String() != "4611686018427387904" {
		t.Errorf("2^61·2 = %v", d)
	}
	if _, ok := Sym("s").Scale(1 << 40).Eval(map[string]int64{"s": 1 << 40}); ok {
		t.Error("an overflowing Eval reported a value")
	}
}

// TestSliceWithHugeStepOfKnownValues: slicing a shape tensor (Known values) with a
// step near MaxInt64 takes one element, not an index that wrapped around.
func TestSliceWithHugeStepOfKnownValues(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Sym("s"), Const(4)))
	shp := op1(t, b, OpShape, nil, x)
	starts, ends := b.Const("st", i64s(1)), b.Const("en", i64s(3))
	axes, steps := b.Const("ax", i64s(0)), b.Const("sp", i64s(math.MaxInt64))
	out := op1(t, b, OpSlice, nil, shp, starts, ends, axes, steps)
	if got := out.Type.String(); got != "i64[1]{s}" {
		t.Errorf("Slice type %s, want i64[1]{s}", got)
	}
}

// TestReshapeToAnotherElementCountIsRefused: a Reshape whose static target holds more
// or fewer elements than its input is an inference error naming the node (a chain of
// two such reshapes was simplified into one valid one and answered, where ONNX and the
// reference evaluator refuse the model).
func TestReshapeToAnotherElementCountIsRefused(t *testing.T) {
	for _, c := range []struct {
		in     tensor.Shape
		target []int64
		ok     bool
	}{
		{tensor.Shape{}, []int64{1, 4}, false},
		{tensor.Shape{2, 3}, []int64{-1, 4}, false},
		{tensor.Shape{2, 3}, []int64{7}, false},
		{tensor.Shape{2, 3}, []int64{3, -1}, true},
		{tensor.Shape{2, 3}, []int64{0, 3}, true},
		{tensor.Shape{}, []int64{1, 1}, true},
		{tensor.Shape{0, 3}, []int64{-1, 3}, true},
	} {
		b := NewBuilder("main")
		dims := make([]Dim, len(c.in))
		for i, d := range c.in {
			dims[i] = Const(int64(d))
		}
		x := b.Param("x", TensorType(tensor.Float32, dims...))
		shape := b.Const("shape", i64s(c.target...))
		_, err := b.NodeNamed(OpReshape, "r0", &ReshapeAttrs{}, []string{"y"}, x, shape)
		if c.ok && err != nil {
			t.Errorf("%v to %v: %v", c.in, c.target, err)
		}
		if !c.ok && (!errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), `"r0"`)) {
			t.Errorf("%v to %v: %v, want an inference error naming r0", c.in, c.target, err)
		}
	}
}
