package graph

import (
	"errors"
	"fmt"
)

// Sliding windows: the geometry of convolution and pooling windows (ONNX's auto_pad,
// strides, dilations, pads, kernel_shape, ceil_mode), resolved here once for shape
// inference and for every kernel definition. kernels/ref keeps an independent
// implementation on purpose: it is the oracle the compiled kernels are checked against.

// PadMode is how a window's padding is given: ONNX's auto_pad.
type PadMode uint8

const (
	PadExplicit  PadMode = iota // NOTSET (or absent): the pads attribute
	PadValid                    // VALID: no padding
	PadSameUpper                // SAME_UPPER: ceil(in/stride) outputs, the odd padding element at the end
	PadSameLower                // SAME_LOWER: ceil(in/stride) outputs, the odd padding element at the beginning
)

var padModeNames = [...]string{"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"}

// String is the mode's auto_pad value.
func (m PadMode) String() string {
	if int(m) < len(padModeNames) {
		return padModeNames[m]
	}
	return fmt.Sprintf("PadMode(%d)", m)
}

// Same reports the SAME modes, whose padding follows from the input extent.
func (m PadMode) Same() bool { return m == PadSameUpper || m == PadSameLower }

// ParsePadMode reads an auto_pad value; "" is NOTSET.
func ParsePadMode(s string) (PadMode, error) {
	if s == "" {
		return PadExplicit, nil
	}
	for m, name := range padModeNames {
		if s == name {
			return PadMode(m), nil
		}
	}
	return 0, fmt.Errorf("auto_pad %q: want NOTSET, VALID, SAME_UPPER or SAME_LOWER", s)
}

// Window is a sliding window over the spatial axes of an NC... tensor with its
// attributes resolved: one entry per spatial axis, ONNX's defaults filled in (stride
// and dilation 1, padding 0).
type Window struct {
	// Kernel is the window's extent per axis; -1 where it is not known (a symbolic
	// weight extent during shape inference).
	Kernel    []int64
	Strides   []int64
	Dilations []int64
	// PadBegin and PadEnd are the pads attribute. Axis reads them in PadExplicit mode
	// only; a transposed window reads them in every mode but SAME (TransposedWindow).
	PadBegin, PadEnd []int64
	Mode             PadMode
	Ceil             bool // ceil_mode: a last, partial window is kept (pooling)
}

// NewWindow resolves window attributes over len(kernel) spatial axes. Absent lists take
// the defaults; a list of another length than the axes (pads: two per axis, all begins
// then all ends) or an unknown auto_pad is an error. Value ranges are the attributes'
// min tags' business (CheckAttrs).
func NewWindow(kernel, strides, dilations, pads []int64, autoPad string, ceil bool) (Window, error) {
	sp := len(kernel)
	mode, err := ParsePadMode(autoPad)
	if err != nil {
		return Window{}, err
	}
	for _, l := range []struct {
		name string
		v    []int64
		per  int
	}{{"strides", strides, 1}, {"dilations", dilations, 1}, {"pads", pads, 2}} {
		if len(l.v) != 0 && len(l.v) != l.per*sp {
			return Window{}, fmt.Errorf("%s %v: want %d entries for %d spatial axes", l.name, l.v, l.per*sp, sp)
		}
	}
	w := Window{Kernel: kernel, Mode: mode, Ceil: ceil}
	for d := range sp {
		w.Strides = append(w.Strides, AttrOr(strides, d, 1))
		w.Dilations = append(w.Dilations, AttrOr(dilations, d, 1))
		w.PadBegin = append(w.PadBegin, AttrOr(pads, d, 0))
		w.PadEnd = append(w.PadEnd, AttrOr(pads, d+sp, 0))
	}
	return w, nil
}

// ConvWindow is the window of a Conv, ConvInteger or QLinearConv with kernel extents
// kernel (the weight's spatial extents, which kernel_shape must match).
func ConvWindow(a *ConvAttrs, kernel []int64) (Window, error) {
	return NewWindow(kernel, a.Strides, a.Dilations, a.Pads, a.AutoPad, false)
}

// PoolWindow is the window of a MaxPool, AveragePool or LpPool.
func PoolWindow(a *PoolAttrs) (Window, error) {
	return NewWindow(a.KernelShape, a.Strides, a.Dilations, a.Pads, a.AutoPad, a.CeilMode != 0)
}

// Rank is the number of spatial axes.
func (w Window) Rank() int { return len(w.Kernel) }

// Span is the input extent one window covers along axis d: dilation·(kernel-1) + 1.
func (w Window) Span(d int) int64 { return w.Dilations[d]*(w.Kernel[d]-1) + 1 }

// StaticPads is the padding of axis d when it does not depend on the input extent:
// the pads attribute (PadExplicit) or none (PadValid); ok is false in the SAME modes.
func (w Window) StaticPads(d int) (begin, end int64, ok bool) {
	switch w.Mode {
	case PadExplicit:
		return w.PadBegin[d], w.PadEnd[d], true
	case PadValid:
		return 0, 0, true
	}
	return 0, 0, false
}

// WindowAxis is one spatial axis of a window resolved over an input extent: the output
// extent and the padding the windows see before the first and after the last input
// element.
type WindowAxis struct {
	Out, PadBegin, PadEnd int64
}

// Axis resolves axis d over the input extent in (w.Kernel[d] known, strides and
// dilations positive). SAME gives ceil(in/stride) outputs and pads the difference, its
// odd element at the end (upper) or the beginning (lower); VALID pads nothing; NOTSET
// pads as the attribute says. A window that does not fit gives no output. With Ceil
// (explicit padding only) a last partial window is kept if it starts inside the input
// or its begin padding.
func (w Window) Axis(d int, in int64) WindowAxis {
	s, span := w.Strides[d], w.Span(d)
	switch w.Mode {
	case PadSameUpper, PadSameLower:
		o := (in + s - 1) / s
		total := max(0, (o-1)*s+span-in)
		pb := total / 2
		if w.Mode == PadSameLower {
			pb = total - total/2
		}
		return WindowAxis{Out: o, PadBegin: pb, PadEnd: total - pb}
	case PadValid:
		if in < span {
			return WindowAxis{}
		}
		return WindowAxis{Out: (in-span)/s + 1}
	}
	pb, pe := w.PadBegin[d], w.PadEnd[d]
	a := WindowAxis{PadBegin: pb, PadEnd: pe}
	num := in + pb + pe - span
	switch {
	case num < 0:
	case w.Ceil:
		a.Out = (num+s-1)/s + 1
		if (a.Out-1)*s >= in+pb { // the last window must start inside the input or its begin pad
			a.Out--
		}
	default:
		a.Out = num/s + 1
	}
	return a
}

// OutDim is the output extent of axis d over an input extent that may be symbolic: an
// expression of the input's where the stride divides evenly, a derived symbol
// (InferCtx.Derived: floor division by the stride) for SAME and for other strides, and
// a fresh symbol where it is neither (an unknown kernel extent, ceil_mode's partial
// windows). A symbolic extent is taken to fit the window.
func (w Window) OutDim(ic *InferCtx, d int, in Dim) Dim {
	if w.Kernel[d] < 0 {
		return ic.Fresh()
	}
	if v, ok := in.Value(); ok {
		return Const(w.Axis(d, v).Out)
	}
	s := w.Strides[d]
	pb, pe, ok := w.StaticPads(d)
	if !ok { // SAME: ceil(in/stride)
		if s == 1 {
			return in
		}
		return ic.Derived(in.Add(Const(s-1)), s, 0)
	}
	num := in.Add(Const(pb + pe - w.Span(d)))
	q, ok := num, true
	if s != 1 {
		q, ok = num.Div(Const(s))
	}
	if !ok {
		if w.Ceil {
			return ic.Fresh()
		}
		return ic.Derived(num, s, 1)
	}
	out := q.Add(Const(1))
	// the division is exact, so ceil_mode keeps no partial window; the last one starts
	// past the input and its begin pad exactly when the end pad covers a whole window
	if w.Ceil && w.Mode == PadExplicit && pe >= w.Span(d) {
		out = q
	}
	return out
}

// TransposedWindow is a ConvTranspose's window: the window of the convolution it
// transposes plus output_padding and output_shape.
type TransposedWindow struct {
	Window
	OutputPadding []int64 // per axis, 0 where absent
	// OutputShape is the requested spatial output extents: output_shape when it has one
	// entry per spatial axis, else nil (one naming N and C too is ignored, as the
	// reference does; the kernel definitions refuse it).
	OutputShape []int64
}

// ConvTransposeWindow is the window of a ConvTranspose with kernel extents kernel (the
// weight's spatial extents; -1 where unknown). output_padding holds one entry per
// spatial axis when present.
func ConvTransposeWindow(a *ConvTransposeAttrs, kernel []int64) (TransposedWindow, error) {
	w, err := NewWindow(kernel, a.Strides, a.Dilations, a.Pads, a.AutoPad, false)
	if err != nil {
		return TransposedWindow{}, err
	}
	sp := len(kernel)
	if len(a.OutputPadding) != 0 && len(a.OutputPadding) != sp {
		return TransposedWindow{}, fmt.Errorf("output_padding %v: want %d entries for %d spatial axes", a.OutputPadding, sp, sp)
	}
	t := TransposedWindow{Window: w}
	if len(a.OutputShape) == sp {
		t.OutputShape = a.OutputShape
	}
	for d := range sp {
		t.OutputPadding = append(t.OutputPadding, AttrOr(a.OutputPadding, d, 0))
	}
	return t, nil
}

// ErrOddPadding is returned by TransposedWindow.Axis for an output_shape with auto_pad
// NOTSET whose total padding is odd: ONNX puts the odd element at the beginning, the
// reference evaluator at the end, and kiln picks neither.
var ErrOddPadding = errors.New("odd total padding")

// Axis resolves axis d of a transposed convolution over the input extent in. The full
// extent is stride·(in-1) + output_padding + dilation·(kernel-1) + 1. With output_shape
// or a SAME mode the output has the requested extent (in·stride for SAME) and the
// difference is padding, split in halves with the odd element at the end (SAME_UPPER)
// or the beginning (SAME_LOWER); an odd total with output_shape and no SAME mode is
// ErrOddPadding. Otherwise the pads attribute is cut from the full extent (VALID too).
func (t TransposedWindow) Axis(d int, in int64) (WindowAxis, error) {
	s := t.Strides[d]
	full := s*(in-1) + t.OutputPadding[d] + (t.Kernel[d]-1)*t.Dilations[d] + 1
	if t.OutputShape == nil && !t.Mode.Same() {
		pb, pe := t.PadBegin[d], t.PadEnd[d]
		return WindowAxis{Out: full - pb - pe, PadBegin: pb, PadEnd: pe}, nil
	}
	o := in * s
	if t.OutputShape != nil {
		o = t.OutputShape[d]
	}
	total := max(0, full-o)
	pb := total / 2
	switch {
	case t.Mode == PadSameLower:
		pb = total - total/2
	case t.Mode != PadSameUpper && total%2 == 1:
		return WindowAxis{}, fmt.Errorf("output_shape %v with %w %d on axis %d", t.OutputShape, ErrOddPadding, total, d)
	}
	return WindowAxis{Out: o, PadBegin: pb, PadEnd: total - pb}, nil
}

// OutDim is the output extent of axis d over an input extent that may be symbolic: the
// output_shape entry when there is one, else a fresh symbol unless the input and kernel
// extents are known.
func (t TransposedWindow) OutDim(ic *InferCtx, d int, in Dim) Dim {
	if t.OutputShape != nil {
		return Const(t.OutputShape[d])
	}
	v, ok := in.Value()
	if !ok || t.Kernel[d] < 0 {
		return ic.Fresh()
	}
	a, err := t.Axis(d, v)
	if err != nil {
		panic("BUG: a transposed window without output_shape has no odd padding to refuse: " + err.Error())
	}
	return Const(a.Out)
}
