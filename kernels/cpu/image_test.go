package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// intVec is a 1-D int64 tensor of v.
func intVec(v ...int64) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{len(v)}, v) }

// TestGroupNormalizationMatchesReference: groups of one channel (InstanceNormalization),
// of all of them (one group), and between; rank 2, 3 and 4 with odd extents; float64
// with each stash type, float16 (in float32); an opset-18 model's scale and bias are
// per channel by the time they reach the kernel (the loader spreads them), so both
// opsets run this one definition.
func TestGroupNormalizationMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	f32t := int64(tensor.Float32)
	cases := []struct {
		shape  []int
		groups int64
		dt     tensor.DType
		stash  int64
	}{
		{[]int{2, 6, 5}, 3, tensor.Float32, f32t},
		{[]int{1, 9, 7}, 3, tensor.Float32, f32t},
		{[]int{2, 6, 3, 3}, 6, tensor.Float32, f32t},
		{[]int{2, 6, 3, 3}, 1, tensor.Float32, f32t},
		{[]int{3, 8}, 4, tensor.Float32, f32t},
		{[]int{1, 4, 3, 5}, 2, tensor.Float64, int64(tensor.Float64)},
		{[]int{1, 4, 3, 5}, 2, tensor.Float64, f32t},
		{[]int{2, 4, 11}, 2, tensor.Float16, f32t},
	}
	for i, c := range cases {
		ch := c.shape[1]
		x := f32(uint64(10+i), c.shape...).Cast(c.dt)
		// the values of one group differ by more than their rounding to float16
		scale, bias := f32(uint64(20+i), ch).Cast(c.dt), f32(uint64(30+i), ch).Cast(c.dt)
		a := &graph.GroupNormAttrs{NumGroups: c.groups, Epsilon: 1e-5, StashType: c.stash}
		nt.CheckNode(t, l, graph.OpGroupNormalization, a, 1, nt.In(x), nt.In(scale), nt.C(bias))
	}
}

// TestGroupNormalizationRefusesIndivisibleChannels: inference refuses 6 channels in 4
// groups, naming the node.
func TestGroupNormalizationRefusesIndivisibleChannels(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 6, 5)...))
	p := b.Param("p", graph.TensorType(tensor.Float32, graph.StaticShape(6)...))
	_, err := b.NodeNamed(graph.OpGroupNormalization, "gn7", &graph.GroupNormAttrs{NumGroups: 4, StashType: 1}, []string{"y"}, x, p, p)
	if !errors.Is(err, graph.ErrInfer) || !strings.Contains(err.Error(), "gn7") || !strings.Contains(err.Error(), "num_groups=4") {
		t.Errorf("got %v, want an inference error naming gn7 and num_groups", err)
	}
}

// col2ImInput is a Col2Im input for c channels of image over block with attrs a.
func col2ImInput(t *testing.T, seed uint64, dt tensor.DType, n, c int, image, block []int64, a *graph.Col2ImAttrs) *tensor.Tensor {
	t.Helper()
	w, err := graph.NewCol2ImWindow(a, image, block)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := w.BlockCount()
	p, _ := w.BlockSize()
	return f32(seed, n, c*int(p), int(l)).Cast(dt)
}

// TestCol2ImMatchesReference: 1-, 2- and 3-D images, overlapping blocks, strides that
// skip pixels, dilations, pads that drop columns, odd extents, a batch of 2 and integer
// elements.
func TestCol2ImMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		image, block []int64
		a            graph.Col2ImAttrs
		n, c         int
		dt           tensor.DType
	}{
		{[]int64{5, 6}, []int64{2, 3}, graph.Col2ImAttrs{}, 1, 2, tensor.Float32},
		{[]int64{7, 5}, []int64{3, 2}, graph.Col2ImAttrs{Strides: []int64{2, 1}, Dilations: []int64{1, 2}, Pads: []int64{1, 0, 0, 1}}, 2, 3, tensor.Float32},
		{[]int64{9, 4}, []int64{2, 2}, graph.Col2ImAttrs{Strides: []int64{3, 2}, Pads: []int64{2, 1, 1, 1}}, 1, 1, tensor.Float64},
		{[]int64{11}, []int64{3}, graph.Col2ImAttrs{Strides: []int64{2}, Dilations: []int64{2}, Pads: []int64{1, 2}}, 2, 2, tensor.Float32},
		{[]int64{3, 4, 5}, []int64{2, 2, 3}, graph.Col2ImAttrs{Strides: []int64{1, 2, 1}, Dilations: []int64{2, 1, 1}, Pads: []int64{0, 1, 1, 1, 0, 0}}, 1, 2, tensor.Float32},
		{[]int64{4, 5}, []int64{2, 2}, graph.Col2ImAttrs{Strides: []int64{2, 2}, Pads: []int64{0, 1, 0, 0}}, 2, 1, tensor.Int32},
	}
	for i, c := range cases {
		x := col2ImInput(t, uint64(40+i), tensor.Float32, c.n, c.c, c.image, c.block, &c.a)
		if c.dt == tensor.Int32 {
			v := x.Float64s()
			for k := range v {
				v[k] *= 100
			}
			x = tensor.FromFloat64s(tensor.Int32, x.Shape, v)
		} else {
			x = x.Cast(c.dt)
		}
		nt.CheckNode(t, l, graph.OpCol2Im, &c.a, 1, nt.In(x), nt.C(intVec(c.image...)), nt.C(intVec(c.block...)))
	}
}

// TestCenterCropPadMatchesReference: crops and pads by odd and even differences on every
// axis or on the listed ones (negative included), an axis left as it is, float, int,
// bool and float16 elements.
func TestCenterCropPadMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		shape []int
		want  []int64
		axes  []int64
		dt    tensor.DType
	}{
		{[]int{5, 6}, []int64{3, 9}, nil, tensor.Float32}, // crop by 2, pad by 3
		{[]int{6, 5}, []int64{3, 8}, nil, tensor.Float32}, // crop by 3, pad by 3
		{[]int{2, 7, 4}, []int64{4, 7}, []int64{1, -1}, tensor.Float32},
		{[]int{3, 4, 5}, []int64{3, 4, 5}, nil, tensor.Float32},
		{[]int{3, 8}, []int64{1}, []int64{1}, tensor.Int64},
		{[]int{4, 3}, []int64{7, 2}, nil, tensor.Bool},
		{[]int{2, 3, 9}, []int64{6, 4}, []int64{0, 2}, tensor.Float16},
	}
	for i, c := range cases {
		x := f32(uint64(50+i), c.shape...)
		switch c.dt {
		case tensor.Int64:
			v := x.Float64s()
			for k := range v {
				v[k] *= 1000
			}
			x = tensor.FromFloat64s(tensor.Int64, x.Shape, v)
		case tensor.Bool:
			x = tensor.FromFloat64s(tensor.Bool, x.Shape, x.Float64s()) // nonzero is true
		default:
			x = x.Cast(c.dt)
		}
		nt.CheckNode(t, l, graph.OpCenterCropPad, &graph.CenterCropPadAttrs{Axes: c.axes}, 1, nt.In(x), nt.C(intVec(c.want...)))
	}
}

// TestAffineGridMatchesReference: 2-D and 3-D grids, with and without align_corners,
// odd extents and an axis of one pixel, float32 and float64.
func TestAffineGridMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, align := range []int64{0, 1} {
		a := &graph.AffineGridAttrs{AlignCorners: align}
		for i, size := range [][]int64{{2, 3, 4, 5}, {1, 1, 1, 7}, {2, 1, 3, 4, 5}, {1, 2, 1, 5, 3}} {
			r := len(size) - 2
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
				theta := f32(uint64(60+i), int(size[0]), r, r+1).Cast(dt)
				nt.CheckNode(t, l, graph.OpAffineGrid, a, 1, nt.In(theta), nt.C(intVec(size...)))
			}
		}
	}
}

// TestImageOpsRefuseShapesComputedAtRunTime: the compiled engine needs Col2Im's
// image_shape and block_shape, CenterCropPad's shape and AffineGrid's size as
// constants, and says so naming the op.
func TestImageOpsRefuseShapesComputedAtRunTime(t *testing.T) {
	l := Strategies(kernels.Default())
	cases := []struct {
		op    graph.Op
		attrs any
		args  []nt.Arg
	}{
		{graph.OpCol2Im, &graph.Col2ImAttrs{}, []nt.Arg{nt.In(f32(1, 1, 4, 4)), nt.In(intVec(3, 3)), nt.C(intVec(2, 2))}},
		{graph.OpCol2Im, &graph.Col2ImAttrs{}, []nt.Arg{nt.In(f32(1, 1, 4, 4)), nt.C(intVec(3, 3)), nt.In(intVec(2, 2))}},
		{graph.OpCenterCropPad, &graph.CenterCropPadAttrs{}, []nt.Arg{nt.In(f32(2, 3, 4)), nt.In(intVec(2, 2))}},
		{graph.OpAffineGrid, &graph.AffineGridAttrs{}, []nt.Arg{nt.In(f32(3, 1, 2, 3)), nt.In(intVec(1, 1, 4, 4))}},
	}
	for _, c := range cases {
		err := nt.LowerErr(t, l, c.op, c.attrs, 1, c.args...)
		if !errors.Is(err, kernels.ErrNoKernel) || !strings.Contains(err.Error(), c.op.String()) || !strings.Contains(err.Error(), "constant") {
			t.Errorf("%v with a run-time shape: %v, want a refusal naming the op", c.op, err)
		}
	}
}

// TestImageOpsOverSymbolicExtents: one kernel serves every batch (and GroupNormalization
// every spatial extent; CenterCropPad every extent of an axis it leaves alone).
func TestImageOpsOverSymbolicExtents(t *testing.T) {
	l := Strategies(kernels.Default())
	binds := []map[string]int64{{"n": 1, "h": 3}, {"n": 3, "h": 1}, {"n": 2, "h": 7}}
	gn := &graph.GroupNormAttrs{NumGroups: 3, Epsilon: 1e-5, StashType: int64(tensor.Float32)}
	nt.CheckSymbolic(t, l, graph.OpGroupNormalization, gn, 1, []nt.SymArg{nt.Sym(tensor.Float32, "n", "6", "h", "2"),
		nt.SymC(f32(71, 6)), nt.SymC(f32(72, 6))}, binds...)
	c2i := &graph.Col2ImAttrs{Strides: []int64{2, 1}, Pads: []int64{1, 0, 0, 1}}
	nt.CheckSymbolic(t, l, graph.OpCol2Im, c2i, 1, []nt.SymArg{nt.Sym(tensor.Float32, "n", "12", "9"),
		nt.SymC(intVec(5, 4)), nt.SymC(intVec(2, 3))}, binds...)
	nt.CheckSymbolic(t, l, graph.OpCenterCropPad, &graph.CenterCropPadAttrs{Axes: []int64{1, 2}}, 1,
		[]nt.SymArg{nt.Sym(tensor.Float32, "n", "7", "4", "h"), nt.SymC(intVec(4, 7))}, binds...)
}
