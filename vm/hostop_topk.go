package vm

import (
	"fmt"
	"math"
	"sort"

	"github.com/kilnrt/kiln/tensor"
)

// TopK on the host, for a k known only at run time (a constant k has a kernel): per row
// along the axis, the positions sorted stably by value (decreasing for largest,
// increasing otherwise; NaN ranks above every number, as in the kernel), the first k
// kept. k must be a one-element integer tensor in [0, extent of the axis]: anything else
// is an ErrInput.

func hostTopK(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	kt, err := hostInput(in, 1)
	if err != nil {
		return nil, err
	}
	if kt.Len() != 1 || !kt.DType.IsInt() {
		return nil, fmt.Errorf("%w: K is %v%v, want one integer", ErrInput, kt.DType, kt.Shape)
	}
	if !x.DType.IsNumeric() {
		return nil, fmt.Errorf("%w: TopK of %v", ErrInput, x.DType)
	}
	ax, err := tensor.NormAxis(a.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	d := x.Shape[ax]
	k := kt.Int64s()[0]
	if k < 0 || k > int64(d) {
		return nil, fmt.Errorf("%w: K=%d for an axis of extent %d", ErrInput, k, d)
	}
	largest := a.Int("largest", 1) != 0
	outer, inner := x.Shape[:ax].NumElements(), x.Shape[ax+1:].NumElements()
	shape := int64Shape(x.Shape)
	shape[ax] = k
	if err := h.Reserve(int64(x.Len())*8 + int64(d)*8); err != nil {
		return nil, err
	}
	idx, err := h.Alloc(tensor.Int64, shape...)
	if err != nil {
		return nil, err
	}
	if err := h.Reserve(int64(idx.Len()) * 8); err != nil {
		return nil, err
	}
	var at func(i int) float64
	var cmpInt func(i, j int) int
	if x.DType.IsInt() {
		v := x.Int64s()
		cmpInt = func(i, j int) int {
			switch {
			case v[i] < v[j]:
				return -1
			case v[i] > v[j]:
				return 1
			}
			return 0
		}
	} else {
		v := x.Float64s()
		at = func(i int) float64 { return v[i] }
	}
	// before reports whether element i ranks before element j
	before := func(i, j int) bool {
		if cmpInt != nil {
			c := cmpInt(i, j)
			return largest && c > 0 || !largest && c < 0
		}
		vi, vj := at(i), at(j)
		ni, nj := math.IsNaN(vi), math.IsNaN(vj)
		switch {
		case ni || nj:
			return largest && ni && !nj || !largest && nj && !ni
		case largest:
			return vi > vj
		}
		return vi < vj
	}
	iv := idx.Data.([]int64)
	src := make([]int, len(iv))
	order := make([]int, d)
	kk := int(k)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for j := range order {
				order[j] = (o*d+j)*inner + i
			}
			sort.SliceStable(order, func(p, q int) bool { return before(order[p], order[q]) })
			for j := 0; j < kk; j++ {
				pos := (o*kk+j)*inner + i
				src[pos] = order[j]
				iv[pos] = int64((order[j] / inner) % d)
			}
		}
	}
	vals, err := take(h, x, shape, src)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{vals, idx}, nil
}
