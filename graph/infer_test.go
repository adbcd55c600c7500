package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func i64s(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// op1 adds a single-output node or fails the test.
func op1(t *testing.T, b *Builder, op Op, attrs any, in ...*Value) *Value {
	t.Helper()
	v, err := b.Op1(op, attrs, in...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestConcatSymbolic(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Sym("s")))
	y := b.Param("y", TensorType(tensor.Float32, Sym("b"), Const(1)))
	out := op1(t, b, OpConcat, &AxisAttrs{Axis: 1}, x, y)
	if got := out.Type.String(); got != "f32[b,s+1]" {
		t.Errorf("Concat type %s, want f32[b,s+1]", got)
	}
}

// TestShapeArithmetic follows the exporter pattern Shape → Gather → Unsqueeze → Concat →
// Reshape, which must keep the batch and sequence symbols.
func TestShapeArithmetic(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Sym("s"), Const(256)))
	shp := op1(t, b, OpShape, nil, x)
	if got := shp.Type.String(); got != "i64[3]{b,s,256}" {
		t.Fatalf("Shape type %s", got)
	}
	axis0 := b.Const("zero", tensor.Scalar(int64(0)))
	axis1 := b.Const("one", tensor.Scalar(int64(1)))
	bs := op1(t, b, OpGather, &GatherAttrs{}, shp, axis0)
	ss := op1(t, b, OpGather, &GatherAttrs{}, shp, axis1)
	ax := b.Const("ax", i64s(0))
	bu := op1(t, b, OpUnsqueeze, nil, bs, ax)
	su := op1(t, b, OpUnsqueeze, nil, ss, ax)
	heads := b.Const("heads", i64s(4, -1))
	target := op1(t, b, OpConcat, &AxisAttrs{Axis: 0}, bu, su, heads)
	if got := target.Type.String(); got != "i64[4]{b,s,4,-1}" {
		t.Fatalf("Concat type %s", got)
	}
	r := op1(t, b, OpReshape, nil, x, target)
	if got := r.Type.String(); got != "f32[b,s,4,64]" {
		t.Errorf("Reshape type %s, want f32[b,s,4,64]", got)
	}
	tr := op1(t, b, OpTranspose, &TransposeAttrs{Perm: []int64{0, 2, 1, 3}}, r)
	mm := op1(t, b, OpMatMul, nil, tr, op1(t, b, OpTranspose, &TransposeAttrs{Perm: []int64{0, 1, 3, 2}}, tr))
	if got := mm.Type.String(); got != "f32[b,4,s,s]" {
		t.Errorf("attention scores type %s, want f32[b,4,s,s]", got)
	}
	// Range(0, s, 1) has extent s
	start := b.Const("start", tensor.Scalar(int64(0)))
	step := b.Const("step", tensor.Scalar(int64(1)))
	rng := op1(t, b, OpRange, nil, start, ss, step)
	if got := rng.Type.String(); got != "i64[s]" {
		t.Errorf("Range type %s, want i64[s]", got)
	}
	if _, err := b.Module(mm, rng); err != nil {
		t.Fatal(err)
	}
}

func TestConvPoolSymbolicBatch(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("n"), Const(3), Const(224), Const(224)))
	w := b.Const("w", tensor.New(tensor.Float32, tensor.Shape{64, 3, 7, 7}))
	c := op1(t, b, OpConv, &ConvAttrs{Group: 1, Strides: []int64{2, 2}, Pads: []int64{3, 3, 3, 3}, AutoPad: "NOTSET"}, x, w)
	if got := c.Type.String(); got != "f32[n,64,112,112]" {
		t.Errorf("Conv type %s", got)
	}
	outs, err := b.Node(OpMaxPool, &PoolAttrs{KernelShape: []int64{3, 3}, Strides: []int64{2, 2}, Pads: []int64{1, 1, 1, 1}, AutoPad: "NOTSET"}, 1, c)
	if err != nil {
		t.Fatal(err)
	}
	if got := outs[0].Type.String(); got != "f32[n,64,56,56]" {
		t.Errorf("MaxPool type %s", got)
	}
	g := op1(t, b, OpGlobalAveragePool, nil, outs[0])
	f := op1(t, b, OpFlatten, &FlattenAttrs{Axis: 1}, g)
	if got := f.Type.String(); got != "f32[n,64]" {
		t.Errorf("Flatten type %s", got)
	}
}

func TestInferErrorsNameTheNode(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Const(2), Const(3)))
	y := b.Param("y", TensorType(tensor.Float32, Const(4), Const(5)))
	if _, err := b.NodeNamed(OpMatMul, "mm1", nil, []string{"z"}, x, y); err == nil || !strings.Contains(err.Error(), `MatMul "mm1"`) {
		t.Errorf("MatMul with mismatched inner dims: %v", err)
	}
	if _, err := b.NodeNamed(OpAdd, "add", nil, []string{"z"}, x, y); err == nil {
		t.Error("Add of [2,3] and [4,5] should fail")
	}
}

// TestBroadcastInferenceKeepsEachDType: inferring one Max on int32 must not make the
// next Max, on float64, int32 too (the inference closure is shared by the op's nodes).
func TestBroadcastInferenceKeepsEachDType(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Int32, tensor.Float64, tensor.Uint8} {
		b := NewBuilder("main")
		x := b.Param("x", TensorType(dt, Const(3)))
		y, err := b.Op1(OpMax, nil, x, x)
		if err != nil {
			t.Fatal(err)
		}
		if y.Type.DType != dt {
			t.Fatalf("Max of %v inferred as %v", dt, y.Type.DType)
		}
	}
}

// TestSliceSymbolicEnd: gpt2's causal mask, a static [1,1,1024,1024] table sliced to the
// sequence length on two axes, keeps the symbol (the compiler checks seq <= 1024 at run
// time); a negative start or a step other than 1 stays a fresh symbol.
func TestSliceSymbolicEnd(t *testing.T) {
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Sym("seq")))
	mask := b.Param("mask", TensorType(tensor.Bool, Const(1), Const(1), Const(1024), Const(1024)))
	shp := op1(t, b, OpShape, nil, x)
	seq := op1(t, b, OpSlice, nil, shp, b.Const("one", i64s(1)), b.Const("two", i64s(2)))
	if got := seq.Type.String(); got != "i64[1]{seq}" {
		t.Fatalf("Slice of the shape: %s", got)
	}
	zero, axis2, axis3 := b.Const("zero", i64s(0)), b.Const("axis2", i64s(2)), b.Const("axis3", i64s(3))
	rows := op1(t, b, OpSlice, nil, mask, zero, seq, axis2)
	cols := op1(t, b, OpSlice, nil, rows, zero, seq, axis3)
	if got := cols.Type.String(); got != "bool[1,1,seq,seq]" {
		t.Errorf("causal mask slice: %s, want bool[1,1,seq,seq]", got)
	}
	from2 := op1(t, b, OpSlice, nil, mask, b.Const("two2", i64s(2)), seq, axis2)
	if got := from2.Type.String(); got != "bool[1,1,seq-2,1024]" {
		t.Errorf("slice from 2: %s, want bool[1,1,seq-2,1024]", got)
	}
	stepped := op1(t, b, OpSlice, nil, mask, zero, seq, axis2, b.Const("step2", i64s(2)))
	if d := stepped.Type.Shape[2]; d.Equal(Sym("seq")) {
		t.Errorf("a step of 2 kept seq: %v", stepped.Type)
	}
}

// TestAttentionMaskInference: kiln.AttentionMask has its mask's shape and the dtype of
// its to attribute, is elementwise (it fuses into the Add that reads it), and rejects a
// non-float to or a string mask with an error naming the node.
func TestAttentionMaskInference(t *testing.T) {
	info := OpAttentionMask.Info()
	if info == nil || info.Domain != KilnDomain || info.Pattern != ElemWise {
		t.Fatalf("op table row %+v", info)
	}
	b := NewBuilder("main")
	m := b.Param("m", TensorType(tensor.Bool, Sym("b"), Const(1), Const(1), Sym("s")))
	for _, to := range []tensor.DType{tensor.Float32, tensor.Float64} {
		y := op1(t, b, OpAttentionMask, &AttentionMaskAttrs{Value: -10000, To: int64(to)}, m)
		if want := to.String() + "[b,1,1,s]"; y.Type.String() != want {
			t.Errorf("AttentionMask to %v: type %s, want %s", to, y.Type, want)
		}
	}
	for _, to := range []tensor.DType{tensor.Int64, tensor.Float16, tensor.Bool} {
		_, err := b.NodeNamed(OpAttentionMask, "mask", &AttentionMaskAttrs{Value: -10000, To: int64(to)}, []string{"z"}, m)
		if !errors.Is(err, ErrInfer) || !strings.Contains(err.Error(), `AttentionMask "mask"`) {
			t.Errorf("AttentionMask to %v: %v, want an inference error naming the node", to, err)
		}
	}
	s := b.Param("s", TensorType(tensor.String, Const(2)))
	if _, err := b.NodeNamed(OpAttentionMask, "smask", &AttentionMaskAttrs{To: int64(tensor.Float32)}, []string{"z2"}, s); !errors.Is(err, ErrInfer) {
		t.Errorf("AttentionMask of strings: %v, want an inference error", err)
	}
}
