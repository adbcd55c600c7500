package graph

import (
	"fmt"
	"reflect"

	"github.com/kilnrt/kiln/tensor"
)

// Signal and sampling ops: DFT, STFT, MelWeightMatrix, GridSample and RoiAlign.
//
// DFT's IR form is DFT-20's: input 1 is dft_length and input 2 the axis (a scalar,
// -2 when absent); the loader moves DFT-17's axis attribute (default 1) to a constant
// input 2. A complex tensor is a real one with a trailing axis of 2 (real, imaginary);
// a real signal has a trailing axis of 1.

// DFTAttrs as in ONNX (DFT-20; the axis is input 2).
type DFTAttrs struct {
	Inverse  int64 `attr:"inverse"`
	Onesided int64 `attr:"onesided"`
}

// STFTAttrs as in ONNX.
type STFTAttrs struct {
	Onesided int64 `attr:"onesided" default:"1"`
}

// MelWeightMatrixAttrs as in ONNX.
type MelWeightMatrixAttrs struct {
	OutputDatatype int64 `attr:"output_datatype" default:"1"`
}

// GridSampleAttrs as in ONNX: GridSample-16's mode names (bilinear, bicubic) and
// GridSample-20's (linear, cubic) are both accepted (ParseGridSample).
type GridSampleAttrs struct {
	AlignCorners int64  `attr:"align_corners"`
	Mode         string `attr:"mode" default:"linear"`
	PaddingMode  string `attr:"padding_mode" default:"zeros"`
}

// RoiAlignAttrs as in ONNX (RoiAlign-16; the loader gives RoiAlign-10, which has no
// coordinate_transformation_mode, output_half_pixel).
type RoiAlignAttrs struct {
	CoordinateTransformationMode string  `attr:"coordinate_transformation_mode" default:"half_pixel"`
	Mode                         string  `attr:"mode" default:"avg"`
	OutputHeight                 int64   `attr:"output_height" default:"1" min:"1"`
	OutputWidth                  int64   `attr:"output_width" default:"1" min:"1"`
	SamplingRatio                int64   `attr:"sampling_ratio" min:"0"`
	SpatialScale                 float32 `attr:"spatial_scale" default:"1"`
}

func signalOps() []OpInfo {
	return []OpInfo{
		{Op: OpDFT, MinIn: 1, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[DFTAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferDFT},
		{Op: OpSTFT, MinIn: 2, MaxIn: 4, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[STFTAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferSTFT},
		{Op: OpMelWeightMatrix, MinIn: 5, MaxIn: 5, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[MelWeightMatrixAttrs](), Pattern: Opaque, Flags: DataDependent, Infer: inferMelWeightMatrix},
		{Op: OpGridSample, MinIn: 2, MaxIn: 2, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[GridSampleAttrs](), Pattern: Opaque, Infer: inferGridSample},
		{Op: OpRoiAlign, MinIn: 3, MaxIn: 3, MinOut: 1, MaxOut: 1, Attrs: reflect.TypeFor[RoiAlignAttrs](), Pattern: Opaque, Infer: inferRoiAlign},
	}
}

// signalScalar returns the value of a constant (or Known) integer scalar input.
func signalScalar(n *Node, i int) (int64, bool) {
	v, ok := ConstInt64s(n, i)
	if !ok || len(v) != 1 {
		return 0, false
	}
	return v[0], true
}

// DFTAxis resolves DFT's axis over an input of the given rank: the constant input 2
// (-2 when absent), negative counting from the end, in [0, rank-2]. ok is false when
// the axis is a run-time value.
func DFTAxis(n *Node, rank int) (axis int, ok bool, err error) {
	a := int64(-2)
	if n.Input(2) != nil {
		if a, ok = signalScalar(n, 2); !ok {
			return 0, false, nil
		}
	}
	ax, err := normDFTAxis(a, rank)
	if err != nil {
		return 0, false, Inferf(n, "%v", err)
	}
	return ax, true, nil
}

// normDFTAxis maps a DFT axis into [0, rank-2]: the trailing axis holds the real and
// imaginary parts and is never transformed.
func normDFTAxis(a int64, rank int) (int, error) {
	if a < 0 {
		a += int64(rank)
	}
	if rank < 2 || a < 0 || a > int64(rank)-2 {
		return 0, fmt.Errorf("DFT axis %d out of range for rank %d (the last axis holds the complex parts)", a, rank)
	}
	return int(a), nil
}

// dftBins is the number of output bins of a DFT of length n: n, or n/2+1 when onesided.
func dftBins(n int64, onesided bool) int64 {
	if onesided {
		return n/2 + 1
	}
	return n
}

func complexLast(n *Node, x Type) error {
	if v, ok := x.Shape[len(x.Shape)-1].Value(); ok && v != 1 && v != 2 {
		return Inferf(n, "the last axis of %v must be 1 (real) or 2 (complex)", x)
	}
	return nil
}

func inferDFT(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if !x.DType.IsFloat() || len(x.Shape) < 2 {
		return nil, Inferf(n, "input %v: want a float tensor of rank >= 2", x)
	}
	if err := complexLast(n, x); err != nil {
		return nil, err
	}
	a := n.Attrs.(*DFTAttrs)
	out := append([]Dim{}, x.Shape...)
	out[len(out)-1] = Const(2)
	axis, ok, err := DFTAxis(n, len(x.Shape))
	if err != nil {
		return nil, err
	}
	if !ok {
		return []Type{TensorType(x.DType, append(ic.FreshShape(len(x.Shape)-1), Const(2))...)}, nil
	}
	length := x.Shape[axis]
	if n.Input(1) != nil {
		l, ok := signalScalar(n, 1)
		switch {
		case !ok:
			length = ic.Fresh()
		case l < 1:
			return nil, Inferf(n, "dft_length %d", l)
		default:
			length = Const(l)
		}
	}
	out[axis] = length
	if a.Onesided != 0 {
		if l, ok := length.Value(); ok {
			out[axis] = Const(dftBins(l, true))
		} else {
			out[axis] = ic.Fresh()
		}
	}
	return []Type{TensorType(x.DType, out...)}, nil
}

// stftGeometry is an STFT's frame length, frame count and bins for a signal of length
// l (frame_length, else the window's length, else l).
func stftGeometry(l, step, frameLength int64, onesided bool) (frames, bins int64, err error) {
	if step < 1 || frameLength < 1 || frameLength > l {
		return 0, 0, fmt.Errorf("STFT frame_step %d and frame_length %d over a signal of %d", step, frameLength, l)
	}
	return (l-frameLength)/step + 1, dftBins(frameLength, onesided), nil
}

func inferSTFT(ic *InferCtx, n *Node) ([]Type, error) {
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if !x.DType.IsFloat() || len(x.Shape) != 3 {
		return nil, Inferf(n, "signal %v: want a float tensor [batch, length, 1 or 2]", x)
	}
	if err := complexLast(n, x); err != nil {
		return nil, err
	}
	fl, flOK := int64(0), false
	if n.Input(3) != nil {
		fl, flOK = signalScalar(n, 3)
	} else if w, ok := InType(n, 2); ok && w.Kind == KindTensor && !w.UnknownRank && len(w.Shape) == 1 {
		fl, flOK = w.Shape[0].Value()
	} else if n.Input(2) == nil {
		fl, flOK = x.Shape[1].Value()
	}
	step, stepOK := signalScalar(n, 1)
	l, lOK := x.Shape[1].Value()
	frames, bins := ic.Fresh(), ic.Fresh()
	if flOK {
		bins = Const(dftBins(fl, n.Attrs.(*STFTAttrs).Onesided != 0))
	}
	if flOK && stepOK && lOK {
		f, _, err := stftGeometry(l, step, fl, false)
		if err != nil {
			return nil, Inferf(n, "%v", err)
		}
		frames = Const(f)
	}
	return []Type{TensorType(x.DType, x.Shape[0], frames, bins, Const(2))}, nil
}

func inferMelWeightMatrix(ic *InferCtx, n *Node) ([]Type, error) {
	dt := tensor.DType(n.Attrs.(*MelWeightMatrixAttrs).OutputDatatype)
	if !dt.Valid() || !dt.IsNumeric() {
		return nil, Inferf(n, "output_datatype %d", dt)
	}
	rows, cols := ic.Fresh(), ic.Fresh()
	if d, ok := signalScalar(n, 1); ok {
		rows = Const(d/2 + 1)
	}
	if m, ok := signalScalar(n, 0); ok {
		cols = Const(m)
	}
	return []Type{TensorType(dt, rows, cols)}, nil
}

// GridMode is GridSample's interpolation.
type GridMode uint8

const (
	GridLinear GridMode = iota
	GridNearest
	GridCubic
)

// GridPad is GridSample's padding_mode.
type GridPad uint8

const (
	GridZeros GridPad = iota
	GridBorder
	GridReflection
)

// ParseGridSample reads GridSample's mode and padding_mode.
func ParseGridSample(a *GridSampleAttrs) (GridMode, GridPad, error) {
	modes := map[string]GridMode{"linear": GridLinear, "bilinear": GridLinear, "nearest": GridNearest, "cubic": GridCubic, "bicubic": GridCubic}
	pads := map[string]GridPad{"zeros": GridZeros, "border": GridBorder, "reflection": GridReflection}
	m, ok := modes[a.Mode]
	if !ok {
		return 0, 0, fmt.Errorf("GridSample mode %q", a.Mode)
	}
	p, ok := pads[a.PaddingMode]
	if !ok {
		return 0, 0, fmt.Errorf("GridSample padding_mode %q", a.PaddingMode)
	}
	return m, p, nil
}

func inferGridSample(ic *InferCtx, n *Node) ([]Type, error) {
	if _, _, err := ParseGridSample(n.Attrs.(*GridSampleAttrs)); err != nil {
		return nil, Inferf(n, "%v", err)
	}
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	g, ok, err := ranked(n, 1)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	sp := len(x.Shape) - 2
	if sp < 1 || len(g.Shape) != sp+2 {
		return nil, Inferf(n, "X %v and grid %v: want [N, C, D1..Dr] and [N, O1..Or, r]", x, g)
	}
	if v, ok := g.Shape[sp+1].Value(); ok && v != int64(sp) {
		return nil, Inferf(n, "grid %v: last axis must be %d", g, sp)
	}
	return []Type{TensorType(x.DType, append([]Dim{x.Shape[0], x.Shape[1]}, g.Shape[1:sp+1]...)...)}, nil
}

// RoiHalfPixel reads RoiAlign's coordinate_transformation_mode: true for half_pixel,
// false for output_half_pixel.
func RoiHalfPixel(a *RoiAlignAttrs) (bool, error) {
	switch a.CoordinateTransformationMode {
	case "half_pixel":
		return true, nil
	case "output_half_pixel":
		return false, nil
	}
	return false, fmt.Errorf("RoiAlign coordinate_transformation_mode %q", a.CoordinateTransformationMode)
}

func inferRoiAlign(_ *InferCtx, n *Node) ([]Type, error) {
	a := n.Attrs.(*RoiAlignAttrs)
	if _, err := RoiHalfPixel(a); err != nil {
		return nil, Inferf(n, "%v", err)
	}
	if a.Mode != "avg" && a.Mode != "max" {
		return nil, Inferf(n, "RoiAlign mode %q", a.Mode)
	}
	x, ok, err := ranked(n, 0)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	r, ok, err := ranked(n, 1)
	if err != nil || !ok {
		return unknownRank(x.DType), err
	}
	if len(x.Shape) != 4 || len(r.Shape) != 2 {
		return nil, Inferf(n, "X %v and rois %v: want [N, C, H, W] and [R, 4]", x, r)
	}
	return []Type{TensorType(x.DType, r.Shape[0], x.Shape[1], Const(a.OutputHeight), Const(a.OutputWidth))}, nil
}
