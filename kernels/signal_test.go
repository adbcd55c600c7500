package kernels_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

func int64Scalar(v int64) *tensor.Tensor { return tensor.Scalar(v) }

// TestDFTMatchesReferenceOnOddAndPaddedLengths compares the DFT definition with the
// reference evaluator on random real and complex signals of odd and even lengths, over
// an inner and an outer axis (negative too), with dft_length truncating and
// zero-padding the signal, onesided and inverse.
func TestDFTMatchesReferenceOnOddAndPaddedLengths(t *testing.T) {
	l := genericLowerer()
	type dftCase struct {
		shape             []int
		axis              int64
		length            int64 // 0: absent
		inverse, onesided int64
	}
	cases := []dftCase{
		{shape: []int{2, 7, 3, 1}, axis: 1},
		{shape: []int{2, 7, 3, 2}, axis: 1, inverse: 1},
		{shape: []int{1, 4, 9, 2}, axis: -2},
		{shape: []int{1, 4, 9, 1}, axis: 2, onesided: 1},
		{shape: []int{3, 11, 2}, axis: 1, length: 6},
		{shape: []int{3, 5, 2}, axis: 1, length: 13, onesided: 1},
		{shape: []int{2, 6, 1}, axis: -2, length: 9, inverse: 1},
		{shape: []int{2, 8, 2}, axis: 1, inverse: 1, onesided: 1},
	}
	for k, c := range cases {
		t.Run(fmt.Sprintf("%v/axis%d/len%d/inv%d/one%d", c.shape, c.axis, c.length, c.inverse, c.onesided), func(t *testing.T) {
			a := graph.OpDFT.NewAttrs().(*graph.DFTAttrs)
			a.Inverse, a.Onesided = c.inverse, c.onesided
			length := nt.None
			if c.length != 0 {
				length = nt.C(int64Scalar(c.length))
			}
			nt.CheckNode(t, l, graph.OpDFT, a, 1, nt.In(randomF32(uint64(k+1), c.shape...)), length, nt.C(int64Scalar(c.axis)))
		})
	}
}

// TestDFTWithRunTimeAxisHasNoKernel: an axis read at run time is refused with
// ErrNoKernel, never guessed.
func TestDFTWithRunTimeAxisHasNoKernel(t *testing.T) {
	err := nt.LowerErr(t, genericLowerer(), graph.OpDFT, graph.OpDFT.NewAttrs(), 1,
		nt.In(randomF32(1, 2, 5, 1)), nt.None, nt.In(int64Scalar(1)))
	if !errors.Is(err, kernels.ErrNoKernel) {
		t.Fatalf("lowering DFT with a run-time axis: %v, want ErrNoKernel", err)
	}
}

// TestSTFTMatchesReferenceWithWindowsAndComplexSignals compares the STFT definition
// with the reference evaluator: real and complex signals, a window, an odd frame
// length, a frame length without a window, onesided on and off.
func TestSTFTMatchesReferenceWithWindowsAndComplexSignals(t *testing.T) {
	l := genericLowerer()
	type stftCase struct {
		shape    []int
		step     int64
		window   int   // 0: none
		length   int64 // 0: absent
		onesided int64
	}
	cases := []stftCase{
		{shape: []int{2, 37, 1}, step: 5, window: 8, onesided: 1},
		{shape: []int{1, 40, 2}, step: 3, window: 9, onesided: 0},
		{shape: []int{2, 30, 1}, step: 4, length: 7, onesided: 1},
		{shape: []int{1, 21, 2}, step: 2, window: 5, length: 5, onesided: 0},
		{shape: []int{1, 12, 1}, step: 1, onesided: 1},
	}
	for k, c := range cases {
		t.Run(fmt.Sprintf("%v/step%d/window%d/len%d/one%d", c.shape, c.step, c.window, c.length, c.onesided), func(t *testing.T) {
			a := graph.OpSTFT.NewAttrs().(*graph.STFTAttrs)
			a.Onesided = c.onesided
			args := []nt.Arg{nt.In(randomF32(uint64(k+10), c.shape...)), nt.C(int64Scalar(c.step)), nt.None, nt.None}
			if c.window != 0 {
				args[2] = nt.In(randomF32(uint64(k+20), c.window))
			}
			if c.length != 0 {
				args[3] = nt.C(int64Scalar(c.length))
			}
			nt.CheckNode(t, l, graph.OpSTFT, a, 1, args...)
		})
	}
}

// TestMelWeightMatrixMatchesReference compares the MelWeightMatrix definition with the
// reference evaluator for several bin counts, DFT lengths, rates and edges (a lower
// edge above 0, an upper edge below the Nyquist frequency), in float32 and float64.
func TestMelWeightMatrixMatchesReference(t *testing.T) {
	l := genericLowerer()
	type melCase struct {
		mel, dft, rate int32
		lower, upper   float32
		dt             tensor.DType
	}
	cases := []melCase{
		{8, 16, 8192, 0, 4096, tensor.Float32},
		{10, 64, 16000, 20, 8000, tensor.Float32},
		{5, 31, 8000, 100, 3000, tensor.Float64},
		{40, 512, 22050, 0, 11025, tensor.Float32},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d/%d/%d/%g-%g/%v", c.mel, c.dft, c.rate, c.lower, c.upper, c.dt), func(t *testing.T) {
			a := graph.OpMelWeightMatrix.NewAttrs().(*graph.MelWeightMatrixAttrs)
			a.OutputDatatype = int64(c.dt)
			nt.CheckNode(t, l, graph.OpMelWeightMatrix, a, 1,
				nt.C(tensor.Scalar(c.mel)), nt.C(tensor.Scalar(c.dft)), nt.C(tensor.Scalar(c.rate)),
				nt.C(tensor.Scalar(c.lower)), nt.C(tensor.Scalar(c.upper)))
		})
	}
}
