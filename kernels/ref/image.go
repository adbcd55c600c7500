package ref

// Image geometry ops: Col2Im (a scatter-add of blocks, in float64), CenterCropPad (a crop
// then a zero pad, any element type) and AffineGrid (in float64).

import (
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func imageKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpCol2Im:        T(imageCol2Im),
		graph.OpCenterCropPad: T(imageCenterCropPad),
		graph.OpAffineGrid:    T(imageAffineGrid),
	}
}

// intList reads a 1-D integer input.
func intList(t *tensor.Tensor, what string) ([]int64, error) {
	if !t.DType.IsInt() || len(t.Shape) != 1 {
		return nil, Badf("%s is %v%v, want a 1-D integer tensor", what, t.DType, t.Shape)
	}
	return t.Int64s(), nil
}

// orDefault is v, or n copies of def when v is absent.
func orDefault(v []int64, n int, def int64, what string) ([]int, error) {
	out := make([]int, n)
	if v == nil {
		for i := range out {
			out[i] = int(def)
		}
		return out, nil
	}
	if len(v) != n {
		return nil, Badf("%d %s for %d values", len(v), what, n)
	}
	for i, x := range v {
		out[i] = int(x)
	}
	return out, nil
}

// outputOf allocates the float64 values of an output shape, refusing a size past int64.
func outputOf(dt tensor.DType, shape tensor.Shape) ([]float64, error) {
	n, _, err := tensor.CheckedSize(dt, shape)
	if err != nil {
		return nil, Badf("output %v: %v", shape, err)
	}
	return make([]float64, n), nil
}

// imageCol2Im adds every column of each block back at its place in the image: block
// position l (row-major over the positions per axis) and offset k within the block
// (row-major over block_shape) land at l·stride + k·dilation − pad_begin on each axis,
// and nothing lands in the padding.
func imageCol2Im(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.Col2ImAttrs](n)
	x := in[0]
	if len(x.Shape) != 3 {
		return nil, Badf("input %v, want [N, C·∏block_shape, L]", x.Shape)
	}
	image, err := intList(in[1], "image_shape")
	if err != nil {
		return nil, err
	}
	block, err := intList(in[2], "block_shape")
	if err != nil {
		return nil, err
	}
	r := len(image)
	if r == 0 || len(block) != r {
		return nil, Badf("image_shape %v and block_shape %v", image, block)
	}
	dil, err := orDefault(a.Dilations, r, 1, "dilations")
	if err != nil {
		return nil, err
	}
	stride, err := orDefault(a.Strides, r, 1, "strides")
	if err != nil {
		return nil, err
	}
	pads, err := orDefault(a.Pads, 2*r, 0, "pads")
	if err != nil {
		return nil, err
	}
	positions := make(tensor.Shape, r) // block positions per axis
	blockSize, count := 1, 1
	for d := range r {
		if image[d] < 1 || block[d] < 1 || block[d] > int64(x.Shape[1]) || image[d] > graph.MaxAttrExtent {
			return nil, Badf("image_shape %v, block_shape %v for input %v", image, block, x.Shape)
		}
		span := dil[d]*(int(block[d])-1) + 1
		padded := int(image[d]) + pads[d] + pads[r+d]
		if span > padded {
			return nil, Badf("axis %d: a block spans %d, the padded image %d", d, span, padded)
		}
		positions[d] = (padded-span)/stride[d] + 1
		blockSize *= int(block[d]) // each ≤ the channel extent: the product is checked below
		count *= positions[d]
		if blockSize > x.Shape[1] || count > x.Shape[2] {
			return nil, Badf("input %v for block_shape %v and %v block positions", x.Shape, block, positions)
		}
	}
	if x.Shape[1]%blockSize != 0 || count != x.Shape[2] {
		return nil, Badf("input %v: want [N, C·%d, %d]", x.Shape, blockSize, count)
	}
	c := x.Shape[1] / blockSize
	shape := tensor.Shape{x.Shape[0], c}
	for _, v := range image {
		shape = append(shape, int(v))
	}
	out, err := outputOf(x.DType, shape)
	if err != nil {
		return nil, err
	}
	imgStrides := shape[2:].Strides()
	imgSize := shape[2:].NumElements()
	blockShape := make(tensor.Shape, r)
	for d, v := range block {
		blockShape[d] = int(v)
	}
	v := x.Float64s()
	for b := 0; b < x.Shape[0]*c; b++ { // image b of the output: instance b/c, channel b%c
		forEachIndex(blockShape, func(k int, off []int) {
			col := v[((b/c)*x.Shape[1]+(b%c)*blockSize+k)*count:]
			forEachIndex(positions, func(l int, pos []int) {
				at := 0
				for d := range r {
					p := pos[d]*stride[d] + off[d]*dil[d] - pads[d]
					if p < 0 || p >= int(image[d]) {
						return
					}
					at += p * imgStrides[d]
				}
				out[b*imgSize+at] += col[l]
			})
		})
	}
	return one(tensor.FromFloat64s(x.DType, shape, out)), nil
}

// imageCenterCropPad crops each listed axis to its centered window, then pads it with
// zeros to center the input, as ONNX's function does: a window starts at ⌊(in−out)/2⌋,
// and a pad's odd element goes after the input.
func imageCenterCropPad(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axes, err := graph.CenterCropPadAxes(attrs[graph.CenterCropPadAttrs](n), len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	want, err := intList(in[1], "shape")
	if err != nil {
		return nil, err
	}
	if len(want) != len(axes) {
		return nil, Badf("shape %v for %d axes", want, len(axes))
	}
	shape := append(tensor.Shape{}, x.Shape...)
	cropStart := make([]int, len(shape)) // the input index of the window's first element
	padBefore := make([]int, len(shape)) // zeros before the (cropped) input
	for k, ax := range axes {
		w, d := want[k], int64(x.Shape[ax])
		switch {
		case w < 0 || w > graph.MaxAttrExtent:
			return nil, Badf("shape %v", want)
		case w < d:
			cropStart[ax] = int(d-w) / 2
		case w > d:
			padBefore[ax] = int(w-d) / 2
		}
		shape[ax] = int(w)
	}
	if _, _, err := tensor.CheckedSize(x.DType, shape); err != nil {
		return nil, Badf("output %v: %v", shape, err)
	}
	// a zero after the input's elements is what padding reads
	src := tensor.New(x.DType, tensor.Shape{x.Len() + 1})
	reflect.Copy(reflect.ValueOf(src.Data), reflect.ValueOf(x.Data))
	st := x.Shape.Strides()
	idx := make([]int, shape.NumElements())
	forEachIndex(shape, func(lin int, ix []int) {
		off := 0
		for a, o := range ix {
			p := o - padBefore[a] + cropStart[a]
			if o < padBefore[a] || p >= x.Shape[a] {
				idx[lin] = x.Len()
				return
			}
			off += p * st[a]
		}
		idx[lin] = off
	})
	return one(take(src, shape, idx)), nil
}

// gridCoord is the normalized coordinate of pixel i of s along an axis: the pixel
// centers from -1 to 1 with align_corners, from -1+1/s to 1-1/s without. One pixel is
// at 0 either way, as in PyTorch's affine_grid, which AffineGrid's definition names.
// With align_corners ONNX's formula divides by zero there (its reference evaluator
// answers -1, ONNX Runtime 1).
func gridCoord(i, s int, align bool) float64 {
	switch {
	case s <= 1:
		return 0
	case align:
		return -1 + 2*float64(i)/float64(s-1)
	}
	return (2*float64(i)+1)/float64(s) - 1
}

// imageAffineGrid maps each output pixel's normalized position (x along the last axis,
// then y, then z, and 1) through its instance's affine matrix.
func imageAffineGrid(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	theta := in[0]
	size, err := intList(in[1], "size")
	if err != nil {
		return nil, err
	}
	r := len(size) - 2
	if (r != 2 && r != 3) || len(theta.Shape) != 3 || theta.Shape[1] != r || theta.Shape[2] != r+1 || int64(theta.Shape[0]) != size[0] {
		return nil, Badf("theta %v and size %v: want [N, 2, 3] and N, C, H, W or [N, 3, 4] and N, C, D, H, W", theta.Shape, size)
	}
	shape := tensor.Shape{theta.Shape[0]}
	for _, v := range size[2:] {
		if v < 0 || v > graph.MaxAttrExtent {
			return nil, Badf("size %v", size)
		}
		shape = append(shape, int(v))
	}
	align := attrs[graph.AffineGridAttrs](n).AlignCorners != 0
	out, err := outputOf(theta.DType, append(shape, r))
	if err != nil {
		return nil, err
	}
	th := theta.Float64s()
	p := make([]float64, r+1)
	forEachIndex(shape, func(lin int, ix []int) {
		for k := range r { // component k runs along spatial axis r-1-k
			p[k] = gridCoord(ix[r-k], shape[r-k], align)
		}
		p[r] = 1
		m := th[ix[0]*r*(r+1):]
		for j := range r {
			s := 0.0
			for k, v := range p {
				s += m[j*(r+1)+k] * v
			}
			out[lin*r+j] = s
		}
	})
	return one(tensor.FromFloat64s(theta.DType, append(shape, r), out)), nil
}
