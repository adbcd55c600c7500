package vm

import (
	"math/bits"
	"slices"
)

// planOverlapLimit is how many placed tensors live at the same time as the one being
// placed PlanMemory looks at one by one for a gap; beyond it the tensor goes above them
// all. Real models stay far below it; a graph with hundreds of thousands of tensors
// alive together would otherwise cost a scan of all of them per tensor.
const planOverlapLimit = 256

// planIndex keeps the tensors placed so far (by index into iv) so that PlanMemory's
// questions cost O(log n) each, plus O(log n) per overlapping tensor listed:
//   - how many placed tensors overlap [Start, End] in time: those starting at or before
//     End, less those ending before Start (Fenwick trees over the ranks of starts and
//     of ends);
//   - which they are: a max tree of the placed tensors' ends over the tensors in order
//     of start, descended where some end reaches Start;
//   - how high they reach: a tree over time points holding, per point, the highest end
//     of a placed tensor live there (range raise, range max).
type planIndex struct {
	iv     []Interval
	starts []int // all starts, sorted
	ends   []int // all ends, sorted
	order  []int // tensors by start
	rank   []int // each tensor's place in order
	nStart fenwick
	nEnd   fenwick
	reach  []int // max tree over order: the end of each placed tensor, -1 elsewhere
	size   int   // leaves of reach
	times  []int // distinct time points, sorted
	top    []int64
	tag    []int64
}

func newPlanIndex(iv []Interval) *planIndex {
	n := len(iv)
	x := &planIndex{iv: iv, starts: make([]int, n), ends: make([]int, n), order: make([]int, n), rank: make([]int, n)}
	for i, v := range iv {
		x.starts[i], x.ends[i], x.order[i] = v.Start, v.End, i
		x.times = append(x.times, v.Start, v.End)
	}
	slices.Sort(x.starts)
	slices.Sort(x.ends)
	slices.SortFunc(x.order, func(a, b int) int { return iv[a].Start - iv[b].Start })
	for r, i := range x.order {
		x.rank[i] = r
	}
	x.nStart, x.nEnd = make(fenwick, n+1), make(fenwick, n+1)
	x.size = 1 << bits.Len(uint(max(n-1, 1)))
	x.reach = make([]int, 2*x.size)
	for i := range x.reach {
		x.reach[i] = -1
	}
	slices.Sort(x.times)
	x.times = slices.Compact(x.times)
	x.top = make([]int64, 4*len(x.times))
	x.tag = make([]int64, 4*len(x.times))
	return x
}

// place records tensor i at [off, off+size).
func (x *planIndex) place(i int, off, size int64) {
	v := x.iv[i]
	x.nStart.add(lowerBound(x.starts, v.Start))
	x.nEnd.add(lowerBound(x.ends, v.End))
	k := x.size + x.rank[i]
	x.reach[k] = v.End
	for k /= 2; k > 0; k /= 2 {
		x.reach[k] = max(x.reach[2*k], x.reach[2*k+1])
	}
	x.raise(1, 0, len(x.times)-1, x.timeOf(v.Start), x.timeOf(v.End), off+size)
}

// overlapping returns how many placed tensors share a time point with tensor i.
func (x *planIndex) overlapping(i int) int {
	v := x.iv[i]
	before := upperBound(x.starts, v.End) // tensors starting at or before End
	ended := lowerBound(x.ends, v.Start)  // tensors ending before Start
	return x.nStart.sum(before) - x.nEnd.sum(ended)
}

// each calls fn with every placed tensor that shares a time point with tensor i.
func (x *planIndex) each(i int, fn func(j int)) {
	v := x.iv[i]
	x.walk(1, 0, x.size, upperBound(x.starts, v.End), v.Start, fn)
}

// walk visits the placed tensors among order[lo:hi) (node k) of rank below limit whose
// end is at or after start.
func (x *planIndex) walk(k, lo, hi, limit, start int, fn func(j int)) {
	if lo >= limit || x.reach[k] < start {
		return
	}
	if hi-lo == 1 {
		fn(x.order[lo])
		return
	}
	mid := (lo + hi) / 2
	x.walk(2*k, lo, mid, limit, start, fn)
	x.walk(2*k+1, mid, hi, limit, start, fn)
}

// highest returns the highest end of a placed tensor live during tensor i (0: none).
func (x *planIndex) highest(i int) int64 {
	v := x.iv[i]
	return x.maxOf(1, 0, len(x.times)-1, x.timeOf(v.Start), x.timeOf(v.End))
}

func (x *planIndex) timeOf(t int) int { return lowerBound(x.times, t) }

// raise lifts every time point of [l, r] to at least h (node k covers [lo, hi]).
func (x *planIndex) raise(k, lo, hi, l, r int, h int64) {
	if r < lo || hi < l {
		return
	}
	x.top[k] = max(x.top[k], h)
	if l <= lo && hi <= r {
		x.tag[k] = max(x.tag[k], h)
		return
	}
	mid := (lo + hi) / 2
	x.raise(2*k, lo, mid, l, r, h)
	x.raise(2*k+1, mid+1, hi, l, r, h)
}

// maxOf is the highest point of [l, r] (node k covers [lo, hi]).
func (x *planIndex) maxOf(k, lo, hi, l, r int) int64 {
	if r < lo || hi < l {
		return 0
	}
	if l <= lo && hi <= r {
		return x.top[k]
	}
	mid := (lo + hi) / 2
	return max(x.tag[k], x.maxOf(2*k, lo, mid, l, r), x.maxOf(2*k+1, mid+1, hi, l, r))
}

// fenwick counts marked positions (1-based inside).
type fenwick []int

func (f fenwick) add(i int) {
	for i++; i < len(f); i += i & -i {
		f[i]++
	}
}

// sum counts the marks at positions below i.
func (f fenwick) sum(i int) int {
	s := 0
	for ; i > 0; i -= i & -i {
		s += f[i]
	}
	return s
}

// lowerBound is the number of elements of sorted s below v; upperBound of those at or
// below v.
func lowerBound(s []int, v int) int {
	i, _ := slices.BinarySearch(s, v)
	return i
}

func upperBound(s []int, v int) int {
	i, _ := slices.BinarySearch(s, v+1)
	return i
}
