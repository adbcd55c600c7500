package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// Host shape functions of the signal ops whose extents come from scalar operands.
const (
	// BuiltinShapeSTFT(in, frame_step, frame_length, window_length, onesided): STFT's
	// output shape [batch, frames, bins, 2] for a signal of shape in; frame_length and
	// window_length are -1 when absent (the frame length is then the window's, else the
	// signal's), and both given must agree.
	BuiltinShapeSTFT = "shape.stft"
	// BuiltinShapeMelWeightMatrix(num_mel_bins, dft_length, sample_rate): the matrix's
	// shape [dft_length/2+1, num_mel_bins]; each operand must be at least 1.
	BuiltinShapeMelWeightMatrix = "shape.melweightmatrix"
	// BuiltinShapeDFT(in, dft_length, axis, onesided): DFT's output shape, in with the
	// transformed axis dft_length long (in[axis] when dft_length is -1; n/2+1 when
	// onesided) and a last axis of 2; the length must be at least 1.
	BuiltinShapeDFT = "shape.dft"
)

func shapeSTFT(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeSTFT
	in, err := shapeArgs(name, args, 5, 5)
	if err != nil {
		return nil, err
	}
	var v [4]int64
	for i := range v {
		if v[i], err = int64Scalar(name, args, i+1); err != nil {
			return nil, err
		}
	}
	step, fl, wl, onesided := v[0], v[1], v[2], v[3]
	if len(in) != 3 {
		return nil, fmt.Errorf("%w: %s: signal of rank %d, want [batch, length, 1 or 2]", ErrInput, name, len(in))
	}
	switch {
	case fl >= 0 && wl >= 0 && fl != wl:
		return nil, fmt.Errorf("%w: %s: frame_length %d and a window of %d", ErrInput, name, fl, wl)
	case fl < 0 && wl >= 0:
		fl = wl
	case fl < 0:
		fl = in[1]
	}
	if step < 1 || fl < 1 || fl > in[1] {
		return nil, fmt.Errorf("%w: %s: frame_step %d and frame_length %d over a signal of %d", ErrInput, name, step, fl, in[1])
	}
	bins := fl
	if onesided != 0 {
		bins = fl/2 + 1
	}
	return shapeResult(name, []int64{in[0], (in[1]-fl)/step + 1, bins, 2})
}

func shapeMelWeightMatrix(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeMelWeightMatrix
	if len(args) != 3 {
		return nil, fmt.Errorf("%s takes 3 arguments, got %d", name, len(args))
	}
	var v [3]int64
	for i := range v {
		x, err := int64Scalar(name, args, i)
		if err != nil {
			return nil, err
		}
		if x < 1 || x > maxExtent {
			return nil, fmt.Errorf("%w: %s: operand %d is %d", ErrInput, name, i, x)
		}
		v[i] = x
	}
	return shapeResult(name, []int64{v[1]/2 + 1, v[0]})
}

func shapeDFT(args []*tensor.Tensor) (*tensor.Tensor, error) {
	const name = BuiltinShapeDFT
	in, err := shapeArgs(name, args, 4, 4)
	if err != nil {
		return nil, err
	}
	var v [3]int64
	for i := range v {
		if v[i], err = int64Scalar(name, args, i+1); err != nil {
			return nil, err
		}
	}
	length, axis, onesided := v[0], v[1], v[2]
	if axis < 0 || axis > int64(len(in))-2 {
		return nil, fmt.Errorf("%w: %s: axis %d of a rank-%d input", ErrInput, name, axis, len(in))
	}
	if length == -1 {
		length = in[axis]
	}
	if length < 1 {
		return nil, fmt.Errorf("%w: %s: dft_length %d", ErrInput, name, length)
	}
	out := append([]int64{}, in...)
	out[axis], out[len(out)-1] = length, 2
	if onesided != 0 {
		out[axis] = length/2 + 1
	}
	return shapeResult(name, out)
}
