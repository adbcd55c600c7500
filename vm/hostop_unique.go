package vm

import (
	"cmp"
	"fmt"
	"sort"
	"strings"

	"github.com/kilnrt/kiln/tensor"
)

// Unique on the host: the items (elements, or slices along the axis) are hashed by
// their values to find the distinct ones in order of first occurrence, then sorted
// (stably, lexicographically over the item's elements) when sorted is 1. Outputs: the
// unique items, the index of each one's first occurrence, the inverse index of every
// item and the counts.

func checkUnique(a HostAttrs) error {
	if s := a.Int("sorted", 1); s != 0 && s != 1 {
		return fmt.Errorf("sorted is %d, want 0 or 1", s)
	}
	return nil
}

// elemCompare returns a three-way comparison of two elements of t by value.
func elemCompare(t *tensor.Tensor) func(i, j int) int {
	switch d := t.Data.(type) {
	case []string:
		return func(i, j int) int { return strings.Compare(d[i], d[j]) }
	}
	if t.DType.IsInt() {
		v := t.Int64s()
		return func(i, j int) int { return cmp.Compare(v[i], v[j]) }
	}
	v := t.Float64s()
	return func(i, j int) int { return cmp.Compare(v[i], v[j]) }
}

// elemKeys returns a string per item of t (item k is elements k·inner+… of each outer
// block) that is equal exactly for items of equal values (NaN equals nothing, so an
// item holding one is unique; -0 equals 0).
func elemKeys(t *tensor.Tensor, outer, d, inner int) []string {
	keys := make([]string, d)
	var parts []string
	var vals []string
	if s, ok := t.Data.([]string); ok {
		vals = s
	} else if t.DType.IsInt() {
		for _, v := range t.Int64s() {
			vals = append(vals, fmt.Sprint(v))
		}
	} else {
		for _, v := range t.Float64s() {
			if v == 0 {
				v = 0 // -0 equals 0
			}
			vals = append(vals, fmt.Sprint(v))
		}
	}
	for k := 0; k < d; k++ {
		parts = parts[:0]
		for o := 0; o < outer; o++ {
			for i := 0; i < inner; i++ {
				v := vals[(o*d+k)*inner+i]
				if v == "NaN" && !t.DType.IsInt() && t.DType != tensor.String {
					v = fmt.Sprintf("NaN of item %d", k)
				}
				parts = append(parts, v)
			}
		}
		keys[k] = fmt.Sprintf("%q", parts)
	}
	return keys
}

func hostUnique(h *HostCtx, a HostAttrs, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, err := hostInput(in, 0)
	if err != nil {
		return nil, err
	}
	axis := a.Int("axis", absentAxis)
	ax, outer, d, inner := 0, 1, x.Len(), 1
	if axis != absentAxis {
		if ax, err = tensor.NormAxis(axis, len(x.Shape)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInput, err)
		}
		outer, d, inner = x.Shape[:ax].NumElements(), x.Shape[ax], x.Shape[ax+1:].NumElements()
	}
	// the keys (a printed value is at most ~32 bytes), the index arrays
	if err := h.Reserve(int64(x.Len())*40 + int64(d)*48); err != nil {
		return nil, err
	}
	keys := elemKeys(x, outer, d, inner)
	seen := map[string]int{}
	var firsts []int
	var counts []int64
	inverse := make([]int64, d)
	for k, key := range keys {
		u, ok := seen[key]
		if !ok {
			u = len(firsts)
			seen[key] = u
			firsts = append(firsts, k)
			counts = append(counts, 0)
		}
		counts[u]++
		inverse[k] = int64(u)
	}
	order := make([]int, len(firsts))
	for i := range order {
		order[i] = i
	}
	if a.Int("sorted", 1) != 0 {
		c := elemCompare(x)
		item := func(k int) func(yield func(int) bool) { // the elements of item k
			return func(yield func(int) bool) {
				for o := 0; o < outer; o++ {
					for i := 0; i < inner; i++ {
						if !yield((o*d+k)*inner + i) {
							return
						}
					}
				}
			}
		}
		less := func(p, q int) bool {
			var ep []int
			for e := range item(firsts[order[p]]) {
				ep = append(ep, e)
			}
			j := 0
			for e := range item(firsts[order[q]]) {
				if r := c(ep[j], e); r != 0 {
					return r < 0
				}
				j++
			}
			return false
		}
		sort.SliceStable(order, less)
	}
	n := int64(len(order))
	idx, err := h.Alloc(tensor.Int64, n)
	if err != nil {
		return nil, err
	}
	cnt, err := h.Alloc(tensor.Int64, n)
	if err != nil {
		return nil, err
	}
	inv, err := h.Alloc(tensor.Int64, int64(d))
	if err != nil {
		return nil, err
	}
	rank := make([]int64, n)
	iv, cv := idx.Data.([]int64), cnt.Data.([]int64)
	for pos, u := range order {
		rank[u] = int64(pos)
		iv[pos], cv[pos] = int64(firsts[u]), counts[u]
	}
	for k, u := range inverse {
		inv.Data.([]int64)[k] = rank[u]
	}
	var y *tensor.Tensor
	if axis == absentAxis {
		src := make([]int, n)
		for i, f := range iv {
			src[i] = int(f)
		}
		y, err = take(h, x, []int64{n}, src)
	} else {
		shape := int64Shape(x.Shape)
		shape[ax] = n
		src := make([]int, 0, outer*int(n)*inner)
		for o := 0; o < outer; o++ {
			for _, f := range iv {
				for i := 0; i < inner; i++ {
					src = append(src, (o*d+int(f))*inner+i)
				}
			}
		}
		y, err = take(h, x, shape, src)
	}
	if err != nil {
		return nil, err
	}
	return []*tensor.Tensor{y, idx, inv, cnt}, nil
}
