package graph

import (
	"fmt"
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Image geometry ops: Col2Im (opset 18), CenterCropPad (opset 18) and AffineGrid
// (opset 20). Their shape inputs (Col2Im's image_shape and block_shape, CenterCropPad's
// shape, AffineGrid's size) give static output extents when they are constants;
// otherwise the extents they set are fresh symbols.

// Col2ImAttrs as in ONNX; absent lists mean dilations and strides of 1 and no padding.
type Col2ImAttrs struct {
	Dilations []int64 `attr:"dilations" min:"1"`
	Pads      []int64 `attr:"pads" min:"0"`
	Strides   []int64 `attr:"strides" min:"1"`
}

// CenterCropPadAttrs as in ONNX; nil Axes means every axis.
type CenterCropPadAttrs struct {
	Axes []int64 `attr:"axes"`
}

// AffineGridAttrs as in ONNX: with AlignCorners, -1 and 1 are the centers of the end
// pixels, without it their outer edges.
type AffineGridAttrs struct {
	AlignCorners int64 `attr:"align_corners"`
}

func imageOps() []OpInfo {
	return []OpInfo{
		{Op: OpCol2Im, MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[Col2ImAttrs](), Pattern: Opaque, Infer: inferCol2Im},
		{Op: OpCenterCropPad, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[CenterCropPadAttrs](), Pattern: Injective, Infer: inferCenterCropPad},
		{Op: OpAffineGrid, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[AffineGridAttrs](), Pattern: Opaque, Infer: inferAffineGrid},
	}
}

// Col2ImWindow is Col2Im's geometry over its spatial axes: the image and block extents,
// the attributes with their defaults applied, and the number of block positions along
// each axis (the input's L is their product).
type Col2ImWindow struct {
	Image, Block, Dilations, Strides, PadBegin, PadEnd, Blocks []int64
}

// NewCol2ImWindow resolves Col2Im's attributes against the values of image_shape and
// block_shape (untrusted: each extent in [1, MaxAttrExtent]; every block must fit the
// padded image at least once).
func NewCol2ImWindow(a *Col2ImAttrs, image, block []int64) (Col2ImWindow, error) {
	r := len(image)
	if r == 0 || len(block) != r {
		return Col2ImWindow{}, fmt.Errorf("image_shape %v and block_shape %v: want one extent per spatial axis of each", image, block)
	}
	orDefault := func(v []int64, n int, fill int64, what string) ([]int64, error) {
		if v == nil {
			out := make([]int64, n)
			for i := range out {
				out[i] = fill
			}
			return out, nil
		}
		if len(v) != n {
			return nil, fmt.Errorf("%d %s for %d spatial axes", len(v), what, r)
		}
		return v, nil
	}
	w := Col2ImWindow{Image: image, Block: block, Blocks: make([]int64, r)}
	var err error
	if w.Dilations, err = orDefault(a.Dilations, r, 1, "dilations"); err != nil {
		return w, err
	}
	if w.Strides, err = orDefault(a.Strides, r, 1, "strides"); err != nil {
		return w, err
	}
	pads, err := orDefault(a.Pads, 2*r, 0, "pads")
	if err != nil {
		return w, err
	}
	w.PadBegin, w.PadEnd = pads[:r], pads[r:]
	for d := range r {
		for _, v := range []int64{image[d], block[d]} {
			if v < 1 || v > MaxAttrExtent {
				return w, fmt.Errorf("image_shape %v, block_shape %v: extents must be in [1, %d]", image, block, int64(MaxAttrExtent))
			}
		}
		// every term is at most MaxAttrExtent² in size: no overflow
		span := w.Dilations[d]*(block[d]-1) + 1
		padded := image[d] + w.PadBegin[d] + w.PadEnd[d]
		if span > padded {
			return w, fmt.Errorf("axis %d: a block spans %d, the padded image %d", d, span, padded)
		}
		w.Blocks[d] = (padded-span)/w.Strides[d] + 1
	}
	return w, nil
}

// BlockCount is the number of block positions, L; ok is false when it overflows.
func (w Col2ImWindow) BlockCount() (int64, bool) { return product64(w.Blocks) }

// BlockSize is the number of elements of a block, ∏block_shape (the input's channel
// extent is C times it); ok is false when it overflows.
func (w Col2ImWindow) BlockSize() (int64, bool) { return product64(w.Block) }

func product64(v []int64) (int64, bool) {
	p := int64(1)
	for _, x := range v {
		var ok bool
		if p, ok = tensor.SignedMul(p, x); !ok {
			return 0, false
		}
	}
	return p, true
}

func inferCol2Im(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if len(x.Shape) != 3 {
		return nil, Inferf(n, "input %v: want [N, C·∏block_shape, L]", x)
	}
	image, okI := ConstInt64s(n, 1)
	block, okB := ConstInt64s(n, 2)
	r, ok := staticLen(n, 1)
	if okI {
		r, ok = len(image), true
	}
	if !ok {
		return unknownRank(x.DType), nil
	}
	out := append([]Dim{x.Shape[0], ic.Fresh()}, ic.FreshShape(r)...)
	if okI && okB {
		w, err := NewCol2ImWindow(n.Attrs.(*Col2ImAttrs), image, block)
		if err != nil {
			return nil, Inferf(n, "%v", err)
		}
		p, ok := w.BlockSize()
		if !ok {
			return nil, Inferf(n, "the block size %v overflows", block)
		}
		if c, ok := x.Shape[1].Value(); ok && c%p != 0 {
			return nil, Inferf(n, "input %v: %d is not a multiple of the block size %d", x, c, p)
		}
		if c, ok := x.Shape[1].Div(Const(p)); ok {
			out[1] = c
		}
		if l, ok := w.BlockCount(); !ok {
			return nil, Inferf(n, "the block count overflows")
		} else if v, ok := x.Shape[2].Value(); ok && v != l {
			return nil, Inferf(n, "input %v holds %d blocks; image_shape %v, block_shape %v and the attributes make %d", x, v, image, block, l)
		}
	}
	if okI {
		for d, v := range image {
			if v < 0 {
				return nil, Inferf(n, "image_shape %v has a negative extent", image)
			}
			out[2+d] = Const(v)
		}
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

// CenterCropPadAxes resolves CenterCropPad's axes over an input of the given rank
// (negative axes count from the end; a repeated axis is an error).
func CenterCropPadAxes(a *CenterCropPadAttrs, rank int) ([]int, error) {
	if a.Axes == nil {
		out := make([]int, rank)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	seen := map[int]bool{}
	out := make([]int, len(a.Axes))
	for i, v := range a.Axes {
		ax, err := tensor.NormAxis(v, rank)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, fmt.Errorf("axis %d is listed twice in %v", ax, a.Axes)
		}
		seen[ax], out[i] = true, ax
	}
	return out, nil
}

// CenterCropOffset is the input index that output index 0 reads along an axis of
// extent in cropped or padded to out: a crop starts at ⌊(in−out)/2⌋ (an odd difference
// drops the extra element on the right), a pad puts ⌊(out−in)/2⌋ zeros before the
// input (and the extra one after it).
func CenterCropOffset(in, out int64) int64 {
	if out <= in {
		return (in - out) / 2
	}
	return -((out - in) / 2)
}

func inferCenterCropPad(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	axes, err := CenterCropPadAxes(n.Attrs.(*CenterCropPadAttrs), len(x.Shape))
	if err != nil {
		return nil, Inferf(n, "%v", err)
	}
	out := append([]Dim{}, x.Shape...)
	shape, ok := shapeValues(n, 1)
	if !ok {
		if l, ok := staticLen(n, 1); ok && l != len(axes) {
			return nil, Inferf(n, "shape has %d values for %d axes", l, len(axes))
		}
		for _, ax := range axes {
			out[ax] = ic.Fresh()
		}
		return []Type{TensorType(x.DType, out...)}, nil
	}
	if len(shape) != len(axes) {
		return nil, Inferf(n, "shape has %d values for %d axes", len(shape), len(axes))
	}
	for k, ax := range axes {
		if v, ok := shape[k].Value(); ok && v < 0 {
			return nil, Inferf(n, "shape value %d is negative", v)
		}
		out[ax] = shape[k]
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

func inferAffineGrid(ic *InferCtx, n *Node) ([]Type, error) {
	theta, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(theta.DType), err
	}
	if theta.DType != tensor.Undefined && !theta.DType.IsFloat() {
		return nil, Inferf(n, "theta is %v, want a floating-point type", theta.DType)
	}
	if len(theta.Shape) != 3 {
		return nil, Inferf(n, "theta %v: want [N, 2, 3] or [N, 3, 4]", theta)
	}
	size, known := shapeValues(n, 1)
	l := len(size)
	if !known {
		if l, ok = staticLen(n, 1); !ok {
			return unknownRank(theta.DType), nil
		}
	}
	if l != 4 && l != 5 {
		return nil, Inferf(n, "size has %d values, want N, C, H, W or N, C, D, H, W", l)
	}
	r := l - 2
	rows, ok1 := theta.Shape[1].Value()
	cols, ok2 := theta.Shape[2].Value()
	if (ok1 && rows != int64(r)) || (ok2 && cols != int64(r+1)) {
		return nil, Inferf(n, "theta %v for a %d-D size: want [N, %d, %d]", theta, r, r, r+1)
	}
	out := append([]Dim{theta.Shape[0]}, ic.FreshShape(r)...)
	if known {
		for k, d := range size {
			if v, ok := d.Value(); ok && v < 0 {
				return nil, Inferf(n, "size value %d is negative", v)
			}
			if k >= 2 {
				out[k-1] = d
			}
		}
		a, ok1 := size[0].Value()
		b, ok2 := theta.Shape[0].Value()
		if ok1 && ok2 && a != b {
			return nil, Inferf(n, "size's N is %d, theta's %d", a, b)
		}
		if ok1 {
			out[0] = size[0]
		}
	}
	return []Type{TensorType(theta.DType, append(out, Const(int64(r)))...)}, nil
}
