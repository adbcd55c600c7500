package vm

import (
	"errors"
	"slices"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestSignalHostShapesCheckTheirOperands: STFT's frames and bins from the frame step
// and the frame length (given, the window's, or the signal's), MelWeightMatrix's
// extents from its operands, DFT's transformed axis; a frame longer than the signal, a
// step of 0, a window that disagrees with frame_length, a bin count of 0, a DFT of
// length 0 or over the complex axis are ErrInput.
func TestSignalHostShapesCheckTheirOperands(t *testing.T) {
	for _, c := range []hostShapeCase{
		{"stft with frame_length", shapeSTFT, []*tensor.Tensor{ints(1, 128, 1), scalar(8), scalar(16), scalar(-1), scalar(1)}, []int64{1, 15, 9, 2}},
		{"stft with a window", shapeSTFT, []*tensor.Tensor{ints(2, 37, 2), scalar(5), scalar(-1), scalar(8), scalar(0)}, []int64{2, 6, 8, 2}},
		{"stft over the whole signal", shapeSTFT, []*tensor.Tensor{ints(1, 9, 1), scalar(3), scalar(-1), scalar(-1), scalar(1)}, []int64{1, 1, 5, 2}},
		{"stft frame past the signal", shapeSTFT, []*tensor.Tensor{ints(1, 9, 1), scalar(3), scalar(10), scalar(-1), scalar(1)}, nil},
		{"stft step 0", shapeSTFT, []*tensor.Tensor{ints(1, 9, 1), scalar(0), scalar(4), scalar(-1), scalar(1)}, nil},
		{"stft window against frame_length", shapeSTFT, []*tensor.Tensor{ints(1, 9, 1), scalar(1), scalar(4), scalar(5), scalar(1)}, nil},
		{"stft signal of rank 2", shapeSTFT, []*tensor.Tensor{ints(1, 9), scalar(1), scalar(4), scalar(-1), scalar(1)}, nil},
		{"mel weight matrix", shapeMelWeightMatrix, []*tensor.Tensor{scalar(8), scalar(16), scalar(8192)}, []int64{9, 8}},
		{"dft of a given length, onesided", shapeDFT, []*tensor.Tensor{ints(3, 11, 2), scalar(9), scalar(1), scalar(1)}, []int64{3, 5, 2}},
		{"dft of the signal's length", shapeDFT, []*tensor.Tensor{ints(2, 6, 4, 1), scalar(-1), scalar(2), scalar(0)}, []int64{2, 6, 4, 2}},
		{"dft of length 0", shapeDFT, []*tensor.Tensor{ints(3, 11, 2), scalar(0), scalar(1), scalar(0)}, nil},
		{"dft over the complex axis", shapeDFT, []*tensor.Tensor{ints(3, 11, 2), scalar(4), scalar(2), scalar(0)}, nil},
		{"mel weight matrix of no bins", shapeMelWeightMatrix, []*tensor.Tensor{scalar(0), scalar(16), scalar(8192)}, nil},
	} {
		got, err := c.f(c.args)
		switch {
		case c.want == nil && !errors.Is(err, ErrInput):
			t.Errorf("%s: got %v, %v; want an ErrInput refusal", c.why, got, err)
		case c.want != nil && err != nil:
			t.Errorf("%s: %v", c.why, err)
		case c.want != nil && !slices.Equal(got.Int64s(), c.want):
			t.Errorf("%s: got %v, want %v", c.why, got.Int64s(), c.want)
		}
	}
}
