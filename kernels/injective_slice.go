package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Slicing and joining along axes: Slice, Concat, Split.

// sliceBounds clamps a start and end along an axis of extent d as ONNX Slice does:
// negative values count from the end; for a positive step both land in [0, d], for a
// negative step in [-1, d-1]. It returns the start and the element count.
func sliceBounds(start, end, step, d int64) (begin, count int64) {
	if start < 0 {
		start += d
	}
	if end < 0 {
		end += d
	}
	if step > 0 {
		start, end = max(0, min(start, d)), max(0, min(end, d))
		if end > start {
			count = (end - start + step - 1) / step
		}
	} else {
		start, end = max(-1, min(start, d-1)), max(-1, min(end, d-1))
		if start > end {
			count = (start - end - step - 1) / -step
		}
	}
	return start, count
}

// sliceBoundsSym is sliceBounds in expressions, for a symbolic extent d or bounds known
// only over the symbols: the same clamps, evaluated at run time, so that every element
// of the window lies in [0, d) whatever the values (0 and 1 included).
func sliceBoundsSym(start, end loopir.Expr, step int64, d loopir.Expr) (begin, count loopir.Expr) {
	if step > 0 {
		begin, end = clampInto(start, d, i64(0), d), clampInto(end, d, i64(0), d)
		if c, ok := begin.(*loopir.IntImm); ok && c.V == 0 && step == 1 {
			return begin, end // end >= 0 already
		}
		return begin, loopir.Bin(loopir.Max, div(add(sub(end, begin), i64(step-1)), i64(step)), i64(0))
	}
	last := sub(d, i64(1))
	begin, end = clampInto(start, d, i64(-1), last), clampInto(end, d, i64(-1), last)
	return begin, loopir.Bin(loopir.Max, div(add(sub(begin, end), i64(-step-1)), i64(-step)), i64(0))
}

// clampInto is an ONNX slice bound v along an extent d (a negative v counts from the
// end) clamped into [lo, hi]; lo is 0 or -1, hi is d or d-1.
func clampInto(v, d, lo, hi loopir.Expr) loopir.Expr {
	nonNeg := false
	switch c := v.(type) {
	case *loopir.IntImm:
		if c.V < 0 {
			v = add(v, d)
		} else {
			nonNeg = true
		}
	default:
		if nonNeg = isNonNegative(v); !nonNeg {
			v = te.Select(loopir.Bin(loopir.LT, v, i64(0)), add(v, d), v)
		}
	}
	v = loopir.Bin(loopir.Min, v, hi)
	if c, ok := v.(*loopir.IntImm); ok && c.V == 0 && nonNeg {
		return v
	}
	if l, ok := lo.(*loopir.IntImm); ok && l.V == 0 && nonNeg {
		return v // min of two non-negative values
	}
	return loopir.Bin(loopir.Max, v, lo)
}

// computeSlice takes x[begin + i*step] along the sliced axes; axes and steps
// constants, starts and ends constants or known over the symbols (a kiln.ShapeExpr),
// else runtimeSlice.
// Over static extents with constant bounds the window is resolved at compile time;
// otherwise sliceBoundsSym clamps it at run time.
func computeSlice(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	starts, ok1 := knownInts(n, in, 1)
	ends, ok2 := knownInts(n, in, 2)
	_, ok3 := ConstInts(in, 3)
	_, ok4 := ConstInts(in, 4)
	if !ok1 || !ok2 || (len(in) > 3 && in[3].Present() && !ok3) || (len(in) > 4 && in[4].Present() && !ok4) {
		return runtimeSlice(n, in)
	}
	if len(starts) != len(ends) {
		return nil, Unsupported("Slice with %d starts and %d ends", len(starts), len(ends))
	}
	axes := make([]int64, len(starts))
	for k := range axes {
		axes[k] = int64(k)
	}
	if len(in) > 3 && in[3].Present() {
		v, ok := ConstInts(in, 3)
		if !ok {
			return nil, Unsupported("Slice with run-time axes")
		}
		axes = v
	}
	steps := make([]int64, len(starts))
	for k := range steps {
		steps[k] = 1
	}
	if len(in) > 4 && in[4].Present() {
		v, ok := ConstInts(in, 4)
		if !ok {
			return nil, Unsupported("Slice with run-time steps")
		}
		steps = v
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, Unsupported("Slice: starts, ends, axes and steps differ in length")
	}
	shape := append([]loopir.Expr{}, x.Shape...)
	begin, step := make([]loopir.Expr, r), make([]int64, r)
	for k := range step {
		begin[k], step[k] = i64(0), 1
	}
	seen := make([]bool, r)
	for k, a := range axes {
		ax, err := NormAxis(a, r)
		if err != nil {
			return nil, err
		}
		if seen[ax] {
			return nil, Unsupported("Slice axis %d given twice", ax)
		}
		seen[ax] = true
		if steps[k] == 0 {
			return nil, Unsupported("Slice step 0")
		}
		d, ok := x.Shape[ax].(*loopir.IntImm)
		st, ok1 := starts[k].(*loopir.IntImm)
		en, ok2 := ends[k].(*loopir.IntImm)
		if ok && ok1 && ok2 {
			b, cnt := sliceBounds(st.V, en.V, steps[k], d.V)
			begin[ax], step[ax], shape[ax] = i64(b), steps[k], i64(cnt)
			continue
		}
		begin[ax], shape[ax] = sliceBoundsSym(starts[k], ends[k], steps[k], x.Shape[ax])
		step[ax] = steps[k]
	}
	out := injCopy("slice", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, r)
		for a := range src {
			src[a] = add(begin[a], mul(i[a], i64(step[a])))
		}
		return src
	})
	return []*te.Tensor{out}, nil
}

// computeConcat joins inputs along axis in one computation: nested Selects pick the
// source by the offset along the axis, each branch reading at a clamped index.
func computeConcat(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	var parts []*te.Tensor
	for _, x := range in {
		if x.Present() {
			parts = append(parts, x.T)
		}
	}
	if len(parts) == 0 {
		return nil, Unsupported("Concat without inputs")
	}
	r := len(parts[0].Shape)
	axis, err := NormAxis(attrs[graph.AxisAttrs](n).Axis, r)
	if err != nil {
		return nil, err
	}
	offsets := make([]loopir.Expr, len(parts))
	total := loopir.Expr(i64(0))
	var nonEmpty []int
	for k, p := range parts {
		if len(p.Shape) != r {
			return nil, Unsupported("Concat of ranks %d and %d", r, len(p.Shape))
		}
		if p.DT != parts[0].DT {
			return nil, Unsupported("Concat of %v and %v", parts[0].DT, p.DT)
		}
		offsets[k] = total
		total = add(total, p.Shape[axis])
		if !injEmpty(p) {
			nonEmpty = append(nonEmpty, k)
		}
	}
	shape := append([]loopir.Expr{}, parts[0].Shape...)
	shape[axis] = total
	out := te.Compute("concat", shape, func(i []loopir.Expr) loopir.Expr {
		if len(nonEmpty) == 0 { // the output is empty too: nothing is read
			return lit(0, parts[0].At(zeros(r)...))
		}
		first, last := nonEmpty[0], nonEmpty[len(nonEmpty)-1]
		read := func(k int) loopir.Expr {
			// the first part needs no lower bound and the last no upper bound: the
			// output index cannot leave them on that side
			p := sub(i[axis], offsets[k])
			ext := parts[k].Shape[axis]
			if _, static := ext.(*loopir.IntImm); !static && k != last {
				// a symbolic part may be empty at run time: min then max keeps the
				// index (of a read the Select discards) at 0 or above
				return parts[k].At(replaceAt(i, axis, injClamp(p, ext))...)
			}
			if k != first {
				p = loopir.Bin(loopir.Max, p, i64(0))
			}
			if k != last {
				p = loopir.Bin(loopir.Min, p, sub(ext, i64(1)))
			}
			src := append([]loopir.Expr{}, i...)
			src[axis] = p
			return parts[k].At(src...)
		}
		v := read(last)
		for j := len(nonEmpty) - 2; j >= 0; j-- {
			k := nonEmpty[j]
			v = te.Select(loopir.Bin(loopir.LT, i[axis], offsets[k+1]), read(k), v)
		}
		return v
	})
	return []*te.Tensor{out}, nil
}

// computeSplit cuts x along axis into one output per node output: sizes from the
// constant input 1, or equal parts of ceil(extent/outputs) with a shorter last part.
func computeSplit(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	axis, err := NormAxis(attrs[graph.SplitAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	if len(in) > 1 && in[1].Present() {
		if _, ok := ConstInts(in, 1); !ok {
			return runtimeSplit(n, in, axis)
		}
	}
	d, ok := x.Shape[axis].(*loopir.IntImm)
	if !ok {
		return nil, Unsupported("Split of symbolic axis %d", axis)
	}
	k := int64(len(n.Outputs))
	var sizes []int64
	if len(in) > 1 && in[1].Present() {
		v, _ := ConstInts(in, 1)
		sum := int64(0)
		for _, s := range v {
			if s < 0 {
				return nil, Unsupported("Split size %d", s)
			}
			sum += s
		}
		if sum != d.V || int64(len(v)) != k {
			return nil, Unsupported("Split sizes %v for extent %d and %d outputs", v, d.V, k)
		}
		sizes = v
	} else {
		chunk := (d.V + k - 1) / k
		for j := int64(0); j < k; j++ {
			sizes = append(sizes, max(0, min(chunk, d.V-j*chunk)))
		}
	}
	outs := make([]*te.Tensor, len(sizes))
	start := int64(0)
	for j, s := range sizes {
		shape := append([]loopir.Expr{}, x.Shape...)
		shape[axis] = i64(s)
		off := start
		outs[j] = injCopy(fmt.Sprintf("split%d", j), x, shape, func(i []loopir.Expr) []loopir.Expr {
			src := append([]loopir.Expr{}, i...)
			src[axis] = add(i[axis], i64(off))
			return src
		})
		start += s
	}
	return outs, nil
}

// runtimeSplit cuts x along axis by sizes known at run time: each output's extent on
// axis is its type's (bound on the host from the sizes, which it checks add up to x's
// extent), and each part starts where the previous ones end.
func runtimeSplit(n *graph.Node, in []Input, axis int) ([]*te.Tensor, error) {
	x := in[0].T
	outs := make([]*te.Tensor, len(n.Outputs))
	var start loopir.Expr = i64(0)
	for j := range n.Outputs {
		shape, ok := outputShape(n, j, in, x)
		if !ok || len(shape) != len(x.Shape) {
			return nil, Unsupported("Split with run-time sizes and no output type of the input's rank")
		}
		off := start
		outs[j] = injCopy(fmt.Sprintf("split%d", j), x, shape, func(i []loopir.Expr) []loopir.Expr {
			src := append([]loopir.Expr{}, i...)
			src[axis] = add(i[axis], off)
			return src
		})
		start = add(start, shape[axis])
	}
	return outs, nil
}
