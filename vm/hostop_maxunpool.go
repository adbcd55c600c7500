package vm

import (
	"fmt"

	"github.com/kilnrt/kiln/tensor"
)

// MaxUnpool on the host, for an output_shape known only at run time (without one the op
// has a kernel): the indices address the default unpooled shape (from kernel_shape,
// strides and pads); each is re-raveled into output_shape, which must keep X's batch
// and channel extents. An index outside the default shape or one that falls outside
// output_shape, and an output_shape of another rank, are an ErrInput; the output's size
// is counted against the call's limits before it is allocated.

func checkMaxUnpool(a HostAttrs) error {
	ks := a.Ints("kernel_shape")
	if len(ks) == 0 {
		return fmt.Errorf("kernel_shape is missing")
	}
	for _, at := range []struct {
		name string
		n    int
		min  int64
	}{{"kernel_shape", len(ks), 1}, {"strides", len(ks), 1}, {"pads", 2 * len(ks), 0}} {
		v := a.Ints(at.name)
		if v == nil {
			continue
		}
		if len(v) != at.n {
			return fmt.Errorf("%s has %d values, want %d", at.name, len(v), at.n)
		}
		for _, e := range v {
			if e < at.min || e > maxExtent {
				return fmt.Errorf("%s %v: %d is out of range", at.name, v, e)
			}
		}
	}
	return nil
}

func hostMaxUnpool(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	ind, err := hostInput(in, 1)
	if err != nil {
		return nil, err
	}
	ks, strides, pads := a.Ints("kernel_shape"), a.Ints("strides"), a.Ints("pads")
	sp := len(ks)
	if !x.Shape.Equal(ind.Shape) || len(x.Shape) != sp+2 || !ind.DType.IsInt() {
		return nil, fmt.Errorf("%w: X %v and I %v%v must have equal shapes of rank %d, I of integers", ErrInput, x.Shape, ind.DType, ind.Shape, sp+2)
	}
	def := int64Shape(x.Shape)
	for i := 0; i < sp; i++ {
		s, pb, pe := int64(1), int64(0), int64(0)
		if strides != nil {
			s = strides[i]
		}
		if pads != nil {
			pb, pe = pads[i], pads[i+sp]
		}
		def[2+i] = (def[2+i]-1)*s + ks[i] - pb - pe // attributes checked at load: no overflow
		if def[2+i] < 0 {
			return nil, fmt.Errorf("%w: the unpooled extent of axis %d is %d", ErrInput, 2+i, def[2+i])
		}
	}
	if _, _, err := tensor.CheckedSize(x.DType, def); err != nil {
		return nil, fmt.Errorf("%w: the unpooled shape %v: %w", ErrInput, def, err)
	}
	out := def
	if len(in) > 2 && in[2] != nil {
		os, err := intsArg("output_shape", in, 2)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		if len(os) != len(def) || os[0] != def[0] || os[1] != def[1] {
			return nil, fmt.Errorf("%w: output_shape %v does not fit X %v (rank %d, equal batch and channels)", ErrInput, os, x.Shape, len(def))
		}
		out = os
	}
	y, err := h.Alloc(x.DType, out...)
	if err != nil {
		return nil, err
	}
	defTotal := elements(def)
	defInner, outInner := elements(def[2:]), elements(out[2:])
	from, ok1 := x.NativeBytes()
	to, ok2 := y.NativeBytes()
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: MaxUnpool of %v", ErrInput, x.DType)
	}
	es := int64(x.DType.Size())
	for i, p := range ind.Int64s() {
		if p < 0 || p >= defTotal {
			return nil, fmt.Errorf("%w: index %d out of range for the unpooled shape %v", ErrInput, p, def)
		}
		plane, within := p/defInner, p%defInner
		off := plane * outInner
		stride := outInner
		for k := 2; k < len(def); k++ {
			inner := elements(def[k+1:])
			c := within / inner
			within %= inner
			stride /= max(out[k], 1)
			if c >= out[k] {
				return nil, fmt.Errorf("%w: index %d falls outside output_shape %v", ErrInput, p, out)
			}
			off += c * stride
		}
		copy(to[off*es:(off+1)*es], from[int64(i)*es:(int64(i)+1)*es])
	}
	return []*tensor.Tensor{y}, nil
}
