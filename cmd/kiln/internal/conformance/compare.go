package conformance

import (
	"fmt"
	"math"
	"reflect"

	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// Tolerance for float comparisons: |got-want| <= Atol + Rtol*|want|.
type Tolerance struct{ Atol, Rtol float64 }

// Mismatch describes the first failing comparison of an output.
type Mismatch struct {
	Reason string
	MaxErr float64
}

// compareValue compares an evaluator value with decoded expected data.
func compareValue(got ref.Value, want *onnx.Data, tol Tolerance) *Mismatch {
	switch {
	case want.Tensor != nil:
		t, ok := got.(*tensor.Tensor)
		if !ok {
			return &Mismatch{Reason: fmt.Sprintf("got %s, want a tensor", ref.Describe(got))}
		}
		return compareTensor(t, want.Tensor, tol)
	case want.Sequence != nil:
		s, ok := got.(*ref.Sequence)
		if !ok {
			return &Mismatch{Reason: fmt.Sprintf("got %s, want a sequence", ref.Describe(got))}
		}
		if len(s.Items) != len(want.Sequence.Items) {
			return &Mismatch{Reason: fmt.Sprintf("sequence length %d, want %d", len(s.Items), len(want.Sequence.Items))}
		}
		for i := range s.Items {
			if m := compareTensor(s.Items[i], want.Sequence.Items[i], tol); m != nil {
				m.Reason = fmt.Sprintf("sequence element %d: %s", i, m.Reason)
				return m
			}
		}
		return nil
	case want.Optional != nil:
		o, ok := got.(*ref.Optional)
		if !ok {
			if want.Optional.Value == nil {
				return &Mismatch{Reason: fmt.Sprintf("got %s, want an empty optional", ref.Describe(got))}
			}
			return compareValue(got, want.Optional.Value, tol)
		}
		if (o.V == nil) != (want.Optional.Value == nil) {
			return &Mismatch{Reason: fmt.Sprintf("optional presence: got %s", ref.Describe(o))}
		}
		if o.V == nil {
			return nil
		}
		return compareValue(o.V, want.Optional.Value, tol)
	}
	return &Mismatch{Reason: "expected data is empty"}
}

func compareTensor(got, want *tensor.Tensor, tol Tolerance) *Mismatch {
	if got.DType != want.DType {
		return &Mismatch{Reason: fmt.Sprintf("dtype %v, want %v", got.DType, want.DType)}
	}
	if !got.Shape.Equal(want.Shape) {
		return &Mismatch{Reason: fmt.Sprintf("shape %v, want %v", got.Shape, want.Shape)}
	}
	if !got.DType.IsFloat() && got.DType != tensor.Complex64 && got.DType != tensor.Complex128 {
		gv, wv := reflect.ValueOf(got.Data), reflect.ValueOf(want.Data)
		for i := 0; i < gv.Len(); i++ {
			if gv.Index(i).Interface() != wv.Index(i).Interface() {
				return &Mismatch{Reason: fmt.Sprintf("at index %d: got %v want %v", i, gv.Index(i).Interface(), wv.Index(i).Interface()), MaxErr: math.Inf(1)}
			}
		}
		return nil
	}
	var g, w []float64
	if c, ok := got.Data.([]complex64); ok {
		g, w = complexParts64(c), complexParts64(want.Data.([]complex64))
	} else if c, ok := got.Data.([]complex128); ok {
		g, w = complexParts128(c), complexParts128(want.Data.([]complex128))
	} else {
		g, w = got.Float64s(), want.Float64s()
	}
	worst, worstAt, maxErr := -1.0, -1, 0.0
	for i := range g {
		a, b := g[i], w[i]
		if math.IsNaN(b) {
			if !math.IsNaN(a) {
				return &Mismatch{Reason: fmt.Sprintf("at index %d: got %v want NaN", i, a), MaxErr: math.Inf(1)}
			}
			continue
		}
		if math.IsInf(b, 0) || math.IsInf(a, 0) || math.IsNaN(a) {
			if a != b {
				return &Mismatch{Reason: fmt.Sprintf("at index %d: got %v want %v", i, a, b), MaxErr: math.Inf(1)}
			}
			continue
		}
		d := math.Abs(a - b)
		maxErr = max(maxErr, d)
		if excess := d - (tol.Atol + tol.Rtol*math.Abs(b)); excess > 0 && excess > worst {
			worst, worstAt = excess, i
		}
	}
	if worstAt >= 0 {
		return &Mismatch{Reason: fmt.Sprintf("max abs err %.3g; worst at index %d: got %.7g want %.7g", maxErr, worstAt, g[worstAt], w[worstAt]), MaxErr: maxErr}
	}
	return nil
}

func complexParts64(c []complex64) []float64 {
	out := make([]float64, 0, 2*len(c))
	for _, x := range c {
		out = append(out, float64(real(x)), float64(imag(x)))
	}
	return out
}

func complexParts128(c []complex128) []float64 {
	out := make([]float64, 0, 2*len(c))
	for _, x := range c {
		out = append(out, real(x), imag(x))
	}
	return out
}
