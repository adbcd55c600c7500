package compiler

import (
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// seBlock builds conv → relu → squeeze-and-excitation (global average pool, 1×1 conv,
// relu, 1×1 conv, sigmoid, the channel-wise Mul) → a plain per-channel scale → conv,
// with batch 2; also returns the relu's value for tests that read it as a result.
// sameConv adds a k×k convolution of in (cin → cout channels, stride 1, padded to keep
// its extents) with random weights and bias from seed.
func sameConv(t *testing.T, b *graph.Builder, in *graph.Value, cin, cout, k int, seed uint64) *graph.Value {
	t.Helper()
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	p := int64(k / 2)
	a.KernelShape, a.Pads = []int64{int64(k), int64(k)}, []int64{p, p, p, p}
	y, err := b.Op1(graph.OpConv, a, in, b.Const("", f32(seed, cout, cin, k, k)), b.Const("", f32(seed+1, cout)))
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func seBlock(t *testing.T) (*graph.Builder, *graph.Value, *graph.Value) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, 8, 9, 7)...))
	conv := func(in *graph.Value, cin, cout, k int, seed uint64) *graph.Value {
		return sameConv(t, b, in, cin, cout, k, seed)
	}
	op := func(o graph.Op, in ...*graph.Value) *graph.Value {
		y, err := b.Op1(o, nil, in...)
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	r := op(graph.OpRelu, conv(x, 8, 64, 3, 1)) // 64 channels: a multiple of every micro-kernel width
	g := op(graph.OpGlobalAveragePool, r)
	s := op(graph.OpSigmoid, conv(op(graph.OpRelu, conv(g, 64, 16, 1, 3)), 16, 64, 1, 5))
	m := op(graph.OpMul, r, s)
	scaled := op(graph.OpMul, m, b.Const("scale", f32(7, 1, 64, 1, 1)))
	return b, conv(scaled, 64, 32, 1, 9), r
}

// TestSEBlockRunsBlockedWithoutTransforms: compiled with alter-layout, a squeeze-and-
// excitation block between two convolutions runs with no LayoutTransform (the pool, the
// 1×1 convolutions and the channel-wise scales read and write blocked storage) and
// matches the reference; a second result reading the blocked relu costs exactly one
// transform, counted with its bytes.
func TestSEBlockRunsBlockedWithoutTransforms(t *testing.T) {
	in := map[string]*tensor.Tensor{"x": f32(11, 2, 8, 9, 7)}
	b, y, _ := seBlock(t)
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiled(t, m, in)
	if res.Stats.LayoutTransforms != 0 || res.Stats.LayoutBytes != 0 {
		t.Fatalf("%d layout transforms (%d bytes), want none; groups %+v", res.Stats.LayoutTransforms, res.Stats.LayoutBytes, res.Stats.Groups)
	}
	b, y, r := seBlock(t)
	m, err = b.Module(y, r)
	if err != nil {
		t.Fatal(err)
	}
	res = checkCompiled(t, m, in)
	if res.Stats.LayoutTransforms != 1 || res.Stats.LayoutBytes != 2*64*9*7*4 {
		t.Fatalf("%d layout transforms (%d bytes), want 1 of the relu (%d bytes)", res.Stats.LayoutTransforms, res.Stats.LayoutBytes, 2*64*9*7*4)
	}
	plain := checkCompiledFor(t, m, in, target.Host(), Options{Recipe: engine.Recipe{PlainLayout: true}})
	if plain.Stats.LayoutTransforms != 0 {
		t.Fatalf("plain layout: %d transforms", plain.Stats.LayoutTransforms)
	}
}

// TestFPNUpsampleRunsBlocked: a feature-pyramid merge (a convolution's output upsampled
// ×2 by nearest Resize, added to a finer convolution's output, then convolved), batch
// 2, runs with no LayoutTransform and matches the reference.
func TestFPNUpsampleRunsBlocked(t *testing.T) {
	b := graph.NewBuilder("main")
	fine := b.Param("fine", graph.TensorType(tensor.Float32, graph.StaticShape(2, 8, 10, 12)...))
	coarse := b.Param("coarse", graph.TensorType(tensor.Float32, graph.StaticShape(2, 8, 5, 6)...))
	conv := func(in *graph.Value, cin, cout int, seed uint64) *graph.Value {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape, a.Pads = []int64{3, 3}, []int64{1, 1, 1, 1}
		y, err := b.Op1(graph.OpConv, a, in, b.Const("", f32(seed, cout, cin, 3, 3)), b.Const("", f32(seed+1, cout)))
		if err != nil {
			t.Fatal(err)
		}
		return y
	}
	ra := graph.OpResize.NewAttrs().(*graph.ResizeAttrs)
	ra.Mode, ra.CoordinateTransformationMode, ra.NearestMode = "nearest", "asymmetric", "floor"
	up, err := b.Op1(graph.OpResize, ra, conv(coarse, 8, 64, 1), nil, b.Const("scales", tensor.MustFromSlice(tensor.Shape{4}, []float32{1, 1, 2, 2})))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := b.Op1(graph.OpAdd, nil, conv(fine, 8, 64, 3), up)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(conv(sum, 64, 16, 5))
	if err != nil {
		t.Fatal(err)
	}
	res := checkCompiled(t, m, map[string]*tensor.Tensor{"fine": f32(21, 2, 8, 10, 12), "coarse": f32(22, 2, 8, 5, 6)})
	if res.Stats.LayoutTransforms != 0 {
		t.Fatalf("%d layout transforms (%d bytes), want none; groups %+v", res.Stats.LayoutTransforms, res.Stats.LayoutBytes, res.Stats.Groups)
	}
}
