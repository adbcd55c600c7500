package compiler

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// signalOperandsModule: an STFT whose frame step and frame length are inputs, one with
// a window input and a step input, a MelWeightMatrix of input operands, and DFTs
// (onesided and inverse) of a dft_length input; every output extent is known only at
// run time.
func signalOperandsModule(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	scalar := func(name string, dt tensor.DType) *graph.Value { return b.Param(name, graph.TensorType(dt)) }
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(2), graph.Sym("l"), graph.Const(1)))
	step, length := scalar("step", tensor.Int64), scalar("length", tensor.Int64)
	win := b.Param("window", graph.TensorType(tensor.Float32, graph.Const(6)))
	mel, dft, rate := scalar("mel", tensor.Int32), scalar("dft", tensor.Int32), scalar("rate", tensor.Int32)
	lo, hi := scalar("lo", tensor.Float32), scalar("hi", tensor.Float32)
	s1, err := b.Op1(graph.OpSTFT, graph.OpSTFT.NewAttrs(), x, step, nil, length)
	if err != nil {
		t.Fatal(err)
	}
	two := graph.OpSTFT.NewAttrs().(*graph.STFTAttrs)
	two.Onesided = 0
	s2, err := b.Op1(graph.OpSTFT, two, x, step, win)
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.Op1(graph.OpMelWeightMatrix, graph.OpMelWeightMatrix.NewAttrs(), mel, dft, rate, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	z := b.Param("z", graph.TensorType(tensor.Float32, graph.Const(3), graph.Const(11), graph.Const(2)))
	dftLen := scalar("dft_length", tensor.Int64)
	axis := b.Const("axis", tensor.Scalar(int64(1)))
	d1, err := b.Op1(graph.OpDFT, &graph.DFTAttrs{Onesided: 1}, z, dftLen, axis)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := b.Op1(graph.OpDFT, &graph.DFTAttrs{Inverse: 1}, z, dftLen, axis)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(s1, s2, w, d1, d2)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func signalOperands(seed uint64, l int, step, length int64, mel, dft, rate int32, lo, hi float32, dftLength int64) []*tensor.Tensor {
	return []*tensor.Tensor{f32(seed, 2, l, 1), tensor.Scalar(step), tensor.Scalar(length), f32(seed+1, 6),
		tensor.Scalar(mel), tensor.Scalar(dft), tensor.Scalar(rate), tensor.Scalar(lo), tensor.Scalar(hi),
		f32(seed+2, 3, 11, 2), tensor.Scalar(dftLength)}
}

// TestRuntimeSignalOperandsMatchReference: STFT frame steps and lengths,
// MelWeightMatrix operands and DFT lengths given as inputs compile once and match the
// reference for several values (odd frame lengths, a frame as long as the signal, a
// DFT length equal to, below and above the signal's); a frame past the signal, a step
// of 0, a matrix of no bins and a DFT of length 0 are ErrInput.
func TestRuntimeSignalOperandsMatchReference(t *testing.T) {
	runs := [][]*tensor.Tensor{
		signalOperands(1, 40, 4, 16, 8, 16, 8192, 0, 4096, 11),
		signalOperands(2, 23, 3, 7, 5, 31, 8000, 100, 3000, 7),
		signalOperands(3, 9, 1, 9, 12, 64, 16000, 20, 8000, 16),
	}
	for _, noFusion := range []bool{false, true} {
		t.Run(map[bool]string{false: "fused", true: "unfused"}[noFusion], func(t *testing.T) {
			machine, _ := checkSymbolic(t, signalOperandsModule(t), target.Host(), Options{Recipe: engine.Recipe{NoFusion: noFusion}}, runs)
			for _, bad := range []struct {
				why string
				in  []*tensor.Tensor
			}{
				{"a frame past the signal", signalOperands(4, 12, 2, 13, 8, 16, 8192, 0, 4096, 11)},
				{"a step of 0", signalOperands(4, 12, 0, 4, 8, 16, 8192, 0, 4096, 11)},
				{"a matrix of no mel bins", signalOperands(4, 12, 2, 4, 0, 16, 8192, 0, 4096, 11)},
				{"a dft_length of 0", signalOperands(4, 12, 2, 4, 8, 16, 8192, 0, 4096, 0)},
			} {
				if _, err := machine.Run(context.Background(), bad.in); !errors.Is(err, vm.ErrInput) {
					t.Errorf("%s: got %v, want ErrInput", bad.why, err)
				}
			}
		})
	}
}
