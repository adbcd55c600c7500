package vm

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kilnrt/kiln/tensor"
)

// TopK on the host, for a k known only at run time (a constant k has a kernel): per row
// along the axis, the k positions that rank first by value (decreasing for largest,
// increasing otherwise; NaN ranks above every number, as in the kernel; equal values by
// position), in that order. k must be a one-element integer tensor in [0, extent of the
// axis]: anything else is an ErrInput. The k first come from a bounded heap (a row's
// d values in O(d log k)), then are sorted: a detector's TopK of 1000 over a level's
// eight million class scores (RetinaNet at 800×800) took a stable sort of the whole row.

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
	switch v := x.Data.(type) {
	case []float32:
		at = func(i int) float64 { return float64(v[i]) }
	case []float64:
		at = func(i int) float64 { return v[i] }
	default:
		if x.DType.IsInt() {
			v := x.Int64s()
			cmpInt = func(i, j int) int { return cmp.Compare(v[i], v[j]) }
		} else {
			v := x.Float64s()
			at = func(i int) float64 { return v[i] }
		}
	}
	// before reports whether element i ranks before element j by value alone
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
	// ranks: the total order, equal values by position (a row's flat indices grow with it)
	ranks := func(i, j int) bool { return before(i, j) || !before(j, i) && i < j }
	iv := idx.Data.([]int64)
	src := make([]int, len(iv))
	row := make([]int, d)
	top := make([]int, 0, k)
	kk := int(k)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for j := range row {
				row[j] = (o*d+j)*inner + i
			}
			top = firstK(top[:0], row, kk, ranks)
			for j, p := range top {
				pos := (o*kk+j)*inner + i
				src[pos] = p
				iv[pos] = int64((p / inner) % d)
			}
		}
	}
	vals, err := take(h, x, shape, src)
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{vals, idx}, nil
}

// firstK appends to dst the k elements of row that rank first under the strict total
// order ranks, in that order. For k under half the row, a heap of the k best so far
// whose root is the worst of them: an element enters only by ranking before the root.
func firstK(dst, row []int, k int, ranks func(a, b int) bool) []int {
	order := func(a, b int) int {
		switch {
		case ranks(a, b):
			return -1
		case ranks(b, a):
			return 1
		}
		return 0
	}
	if k <= 0 {
		return dst
	}
	if 2*k >= len(row) {
		dst = append(dst, row...)
		slices.SortFunc(dst, order)
		return dst[:k]
	}
	h := dst
	for _, c := range row {
		if len(h) < k {
			h = append(h, c)
			for n := len(h) - 1; n > 0; { // up while the parent ranks before the new one
				p := (n - 1) / 2
				if !ranks(h[p], h[n]) {
					break
				}
				h[p], h[n] = h[n], h[p]
				n = p
			}
			continue
		}
		if !ranks(c, h[0]) {
			continue
		}
		h[0] = c
		for n := 0; ; { // down to where no child ranks after it
			w, l, r := n, 2*n+1, 2*n+2
			if l < len(h) && ranks(h[w], h[l]) {
				w = l
			}
			if r < len(h) && ranks(h[w], h[r]) {
				w = r
			}
			if w == n {
				break
			}
			h[n], h[w] = h[w], h[n]
			n = w
		}
	}
	slices.SortFunc(h, order)
	return h
}
