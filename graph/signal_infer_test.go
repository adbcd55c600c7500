package graph

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestSignalOpsInferTheirExtents: DFT's transformed axis (dft_length, onesided), STFT's
// frames and bins from constant operands and fresh symbols from run-time ones,
// MelWeightMatrix's matrix, GridSample's grid extents and RoiAlign's regions; a DFT
// over the complex axis and an unknown GridSample mode are inference errors.
func TestSignalOpsInferTheirExtents(t *testing.T) {
	b := NewBuilder("main")
	i := func(name string, v int64) *Value { return b.Const(name, tensor.Scalar(v)) }
	x := b.Param("x", TensorType(tensor.Float32, Sym("b"), Const(10), Const(7), Const(1)))
	dft := DFTAttrs{Onesided: 1}
	if got := op1(t, b, OpDFT, &dft, x, i("len", 9), i("axis", -2)).Type.String(); got != "f32[b,10,5,2]" {
		t.Errorf("onesided DFT of 9 over axis -2: %s, want f32[b,10,5,2]", got)
	}
	if got := op1(t, b, OpDFT, &DFTAttrs{}, x, nil, i("one", 1)).Type.String(); got != "f32[b,10,7,2]" {
		t.Errorf("DFT over axis 1: %s, want f32[b,10,7,2]", got)
	}
	if _, err := b.Op1(OpDFT, &DFTAttrs{}, x, nil, i("three", 3)); !errors.Is(err, ErrInfer) {
		t.Errorf("DFT over the complex axis: %v, want ErrInfer", err)
	}
	sig := b.Param("sig", TensorType(tensor.Float32, Const(2), Const(128), Const(1)))
	stft := STFTAttrs{Onesided: 1}
	if got := op1(t, b, OpSTFT, &stft, sig, i("step", 8), nil, i("fl", 16)).Type.String(); got != "f32[2,15,9,2]" {
		t.Errorf("STFT of frames of 16 by 8: %s, want f32[2,15,9,2]", got)
	}
	step := b.Param("step_in", TensorType(tensor.Int64))
	if s := op1(t, b, OpSTFT, &stft, sig, step, nil, i("fl2", 16)).Type.Shape; s[1].IsConst() || s[2].String() != "9" {
		t.Errorf("STFT with a run-time step: %v, want fresh frames and 9 bins", s)
	}
	mel := op1(t, b, OpMelWeightMatrix, &MelWeightMatrixAttrs{OutputDatatype: int64(tensor.Float64)},
		i("m", 8), i("d", 16), i("r", 8192), b.Const("lo", tensor.Scalar(float32(0))), b.Const("hi", tensor.Scalar(float32(4096))))
	if got := mel.Type.String(); got != "f64[9,8]" {
		t.Errorf("MelWeightMatrix: %s, want f64[9,8]", got)
	}
	img := b.Param("img", TensorType(tensor.Float32, Sym("n"), Const(3), Const(5), Const(6)))
	grid := b.Param("grid", TensorType(tensor.Float32, Sym("n"), Const(4), Const(7), Const(2)))
	gs := GridSampleAttrs{Mode: "bicubic", PaddingMode: "border"}
	if got := op1(t, b, OpGridSample, &gs, img, grid).Type.String(); got != "f32[n,3,4,7]" {
		t.Errorf("GridSample: %s, want f32[n,3,4,7]", got)
	}
	bad := GridSampleAttrs{Mode: "area", PaddingMode: "zeros"}
	if _, err := b.Op1(OpGridSample, &bad, img, grid); !errors.Is(err, ErrInfer) {
		t.Errorf("GridSample mode area: %v, want ErrInfer", err)
	}
	rois := b.Param("rois", TensorType(tensor.Float32, Sym("r"), Const(4)))
	bi := b.Param("bi", TensorType(tensor.Int64, Sym("r")))
	ra := RoiAlignAttrs{CoordinateTransformationMode: "half_pixel", Mode: "avg", OutputHeight: 2, OutputWidth: 3, SpatialScale: 1}
	if got := op1(t, b, OpRoiAlign, &ra, img, rois, bi).Type.String(); got != "f32[r,3,2,3]" {
		t.Errorf("RoiAlign: %s, want f32[r,3,2,3]", got)
	}
}
