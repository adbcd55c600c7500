package ref

// Shape and data-movement ops: each computes, for every output element, the input element
// it copies, and gathers through take.

import (
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func shapeKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpReshape:         T(shapeReshape),
		graph.OpTranspose:       T(shapeTranspose),
		graph.OpConcat:          T(shapeConcat),
		graph.OpSplit:           T(shapeSplit),
		graph.OpSlice:           T(shapeSlice),
		graph.OpGather:          T(shapeGather),
		graph.OpGatherElements:  T(shapeGatherElements),
		graph.OpGatherND:        T(shapeGatherND),
		graph.OpScatterElements: T(shapeScatterElements),
		graph.OpScatterND:       T(shapeScatterND),
		graph.OpSqueeze:         T(shapeSqueeze),
		graph.OpUnsqueeze:       T(shapeUnsqueeze),
		graph.OpExpand:          T(shapeExpand),
		graph.OpTile:            T(shapeTile),
		graph.OpShape:           T(shapeShape),
		graph.OpSize: T(func(_ *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			return []*tensor.Tensor{tensor.Scalar(int64(in[0].Len()))}, nil
		}),
		graph.OpConstantOfShape: T(shapeConstantOfShape),
		graph.OpRange:           T(shapeRange),
		graph.OpFlatten:         T(shapeFlatten),
	}
}

func one(t *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{t} }

// shapeFromValues checks extents read from a tensor.
func shapeFromValues(v []int64) (tensor.Shape, error) {
	s := make(tensor.Shape, len(v))
	for i, x := range v {
		if x < 0 || x > math.MaxInt32*16 {
			return nil, Badf("invalid extent %d in shape %v", x, v)
		}
		s[i] = int(x)
	}
	if _, err := s.CheckedNumElements(1 << 34); err != nil {
		return nil, Badf("%v", err)
	}
	return s, nil
}

func shapeReshape(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, target := in[0], in[1].Int64s()
	allowZero := attrs[graph.ReshapeAttrs](n).AllowZero != 0
	out := make(tensor.Shape, len(target))
	infer, known := -1, 1
	for i, v := range target {
		switch {
		case v == 0 && !allowZero:
			if i >= len(x.Shape) {
				return nil, Badf("shape entry %d is 0 but the input has rank %d", i, len(x.Shape))
			}
			out[i] = x.Shape[i]
		case v == -1:
			if infer >= 0 {
				return nil, Badf("more than one -1 in shape %v", target)
			}
			infer = i
			continue
		case v < 0:
			return nil, Badf("invalid extent %d in shape %v", v, target)
		default:
			out[i] = int(v)
		}
		known *= out[i]
	}
	if infer >= 0 {
		if known == 0 || x.Len()%known != 0 {
			return nil, Badf("cannot reshape %v to %v", x.Shape, target)
		}
		out[infer] = x.Len() / known
	}
	r, err := x.Reshape(out)
	if err != nil {
		return nil, Badf("%v", err)
	}
	return one(r), nil
}

func shapeTranspose(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	perm := attrs[graph.TransposeAttrs](n).Perm
	if perm == nil {
		for i := r - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	if len(perm) != r {
		return nil, Badf("perm %v for rank %d", perm, r)
	}
	out := make(tensor.Shape, r)
	for i, p := range perm {
		a, err := tensor.NormAxis(p, r)
		if err != nil {
			return nil, Badf("%v", err)
		}
		out[i] = x.Shape[a]
	}
	st := x.Shape.Strides()
	pst := make([]int, r)
	for i, p := range perm {
		a, _ := tensor.NormAxis(p, r)
		pst[i] = st[a]
	}
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) { idx[lin] = linear(ix, pst) })
	return one(take(x, out, idx)), nil
}

func shapeConcat(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	var parts []*tensor.Tensor
	for _, t := range in {
		if t != nil {
			parts = append(parts, t)
		}
	}
	axis, err := tensor.NormAxis(attrs[graph.AxisAttrs](n).Axis, len(parts[0].Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	out, err := ctlConcat(parts, axis, false)
	if err != nil {
		return nil, err
	}
	return one(out), nil
}

func shapeSplit(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := tensor.NormAxis(attrs[graph.SplitAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	k := len(n.Outputs)
	length := x.Shape[axis]
	var sizes []int
	if len(in) > 1 && in[1] != nil {
		sum := 0
		for _, v := range in[1].Int64s() {
			if v < 0 {
				return nil, Badf("negative split size %d", v)
			}
			sizes = append(sizes, int(v))
			sum += int(v)
		}
		if sum != length || len(sizes) != k {
			return nil, Badf("split sizes %v do not cover extent %d in %d outputs", sizes, length, k)
		}
	} else {
		chunk := (length + k - 1) / k
		for i := 0; i < k; i++ {
			sizes = append(sizes, max(0, min(chunk, length-i*chunk)))
		}
	}
	outs := make([]*tensor.Tensor, k)
	start := 0
	for i, sz := range sizes {
		outs[i] = sliceAxis(x, axis, start, sz, 1)
		start += sz
	}
	return outs, nil
}

// sliceAxis returns count elements along axis starting at start with a step.
func sliceAxis(x *tensor.Tensor, axis, start, count, step int) *tensor.Tensor {
	out := x.Shape.Clone()
	out[axis] = count
	st := x.Shape.Strides()
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			if a == axis {
				v = start + v*step
			}
			off += v * st[a]
		}
		idx[lin] = off
	})
	return take(x, out, idx)
}

func shapeSlice(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	starts, ends := in[1].Int64s(), in[2].Int64s()
	if len(starts) != len(ends) {
		return nil, Badf("%d starts and %d ends", len(starts), len(ends))
	}
	axes := make([]int64, len(starts))
	for i := range axes {
		axes[i] = int64(i)
	}
	if len(in) > 3 && in[3] != nil {
		axes = in[3].Int64s()
	}
	steps := make([]int64, len(starts))
	for i := range steps {
		steps[i] = 1
	}
	if len(in) > 4 && in[4] != nil {
		steps = in[4].Int64s()
	}
	if len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, Badf("starts, ends, axes and steps differ in length")
	}
	begin := make([]int, r)
	step := make([]int, r)
	out := x.Shape.Clone()
	for i := range step {
		step[i] = 1
	}
	for i, a := range axes {
		ax, err := tensor.NormAxis(a, r)
		if err != nil {
			return nil, Badf("%v", err)
		}
		if steps[i] == 0 {
			return nil, Badf("slice step 0")
		}
		d := int64(x.Shape[ax])
		s, e := sliceClamp(starts[i], ends[i], steps[i], d)
		cnt := int64(0)
		if steps[i] > 0 && e > s {
			cnt = (e-s-1)/steps[i] + 1 // e-s+step-1 could overflow
		} else if steps[i] < 0 && s > e {
			cnt = (s-e-1)/-max(steps[i], -math.MaxInt64) + 1
		}
		begin[ax], step[ax], out[ax] = int(s), int(steps[i]), int(cnt)
	}
	st := x.Shape.Strides()
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			off += (begin[a] + v*step[a]) * st[a]
		}
		idx[lin] = off
	})
	return one(take(x, out, idx)), nil
}

func sliceClamp(start, end, step, d int64) (int64, int64) {
	if start < 0 {
		start += d
	}
	if end < 0 {
		end += d
	}
	if step > 0 {
		return max(0, min(start, d)), max(0, min(end, d))
	}
	return max(-1, min(start, d-1)), max(-1, min(end, d-1))
}

func shapeGather(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ind := in[0], in[1]
	axis, err := tensor.NormAxis(attrs[graph.GatherAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	iv := ind.Int64s()
	d := x.Shape[axis]
	for i, v := range iv {
		if v < 0 {
			v += int64(d)
		}
		if v < 0 || v >= int64(d) {
			return nil, Badf("index %d out of range for axis %d of extent %d", iv[i], axis, d)
		}
		iv[i] = v
	}
	outer := x.Shape[:axis].NumElements()
	inner := x.Shape[axis+1:].NumElements()
	out := append(append(append(tensor.Shape{}, x.Shape[:axis]...), ind.Shape...), x.Shape[axis+1:]...)
	idx := make([]int, 0, out.NumElements())
	for o := 0; o < outer; o++ {
		for _, v := range iv {
			base := (o*d + int(v)) * inner
			for k := 0; k < inner; k++ {
				idx = append(idx, base+k)
			}
		}
	}
	return one(take(x, out, idx)), nil
}

func shapeGatherElements(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ind := in[0], in[1]
	if len(ind.Shape) != len(x.Shape) {
		return nil, Badf("indices rank %d, data rank %d", len(ind.Shape), len(x.Shape))
	}
	axis, err := tensor.NormAxis(attrs[graph.GatherAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	iv := ind.Int64s()
	st := x.Shape.Strides()
	idx := make([]int, len(iv))
	var bad error
	forEachIndex(ind.Shape, func(lin int, ix []int) {
		v := iv[lin]
		if v < 0 {
			v += int64(x.Shape[axis])
		}
		if v < 0 || v >= int64(x.Shape[axis]) {
			bad = Badf("index %d out of range", iv[lin])
			return
		}
		off := 0
		for a, p := range ix {
			if a == axis {
				p = int(v)
			}
			off += p * st[a]
		}
		idx[lin] = off
	})
	if bad != nil {
		return nil, bad
	}
	return one(take(x, ind.Shape, idx)), nil
}

func shapeGatherND(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ind := in[0], in[1]
	b := int(attrs[graph.GatherNDAttrs](n).BatchDims)
	q := len(ind.Shape)
	if q == 0 || b < 0 || b >= q {
		return nil, Badf("bad indices shape %v for batch_dims %d", ind.Shape, b)
	}
	k := ind.Shape[q-1]
	if b+k > len(x.Shape) {
		return nil, Badf("indices address %d dims of a rank-%d tensor", b+k, len(x.Shape))
	}
	out := append(append(tensor.Shape{}, ind.Shape[:q-1]...), x.Shape[b+k:]...)
	inner := x.Shape[b+k:].NumElements()
	st := x.Shape.Strides()
	iv := ind.Int64s()
	tuples := ind.Shape[:q-1].NumElements()
	perBatch := ind.Shape[b : q-1].NumElements()
	idx := make([]int, 0, out.NumElements())
	for t := 0; t < tuples; t++ {
		batch := t / max(perBatch, 1)
		off := 0
		// batch dims index the data's leading dims
		rem := batch
		for a := b - 1; a >= 0; a-- {
			off += (rem % x.Shape[a]) * st[a]
			rem /= x.Shape[a]
		}
		for j := 0; j < k; j++ {
			v := iv[t*k+j]
			d := int64(x.Shape[b+j])
			if v < 0 {
				v += d
			}
			if v < 0 || v >= d {
				return nil, Badf("index %d out of range for extent %d", iv[t*k+j], d)
			}
			off += int(v) * st[b+j]
		}
		for e := 0; e < inner; e++ {
			idx = append(idx, off+e)
		}
	}
	return one(take(x, out, idx)), nil
}

// scatterCombine applies a reduction to float64 or int64 values.
func scatterCombine(red string) (func(a, b float64) float64, error) {
	switch red {
	case "none", "":
		return func(_, b float64) float64 { return b }, nil
	case "add":
		return func(a, b float64) float64 { return a + b }, nil
	case "mul":
		return func(a, b float64) float64 { return a * b }, nil
	case "max":
		return math.Max, nil
	case "min":
		return math.Min, nil
	}
	return nil, Badf("unknown reduction %q", red)
}

func shapeScatterElements(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ScatterElementsAttrs](n)
	x, ind, upd := in[0], in[1], in[2]
	axis, err := tensor.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	if !ind.Shape.Equal(upd.Shape) || len(ind.Shape) != len(x.Shape) {
		return nil, Badf("indices %v and updates %v must match in shape and rank", ind.Shape, upd.Shape)
	}
	comb, err := scatterCombine(a.Reduction)
	if err != nil {
		return nil, err
	}
	vals, uv, iv := x.Float64s(), upd.Float64s(), ind.Int64s()
	st := x.Shape.Strides()
	var bad error
	forEachIndex(ind.Shape, func(lin int, ix []int) {
		v := iv[lin]
		if v < 0 {
			v += int64(x.Shape[axis])
		}
		if v < 0 || v >= int64(x.Shape[axis]) {
			bad = Badf("index %d out of range", iv[lin])
			return
		}
		off := 0
		for d, p := range ix {
			if d == axis {
				p = int(v)
			}
			off += p * st[d]
		}
		vals[off] = comb(vals[off], uv[lin])
	})
	if bad != nil {
		return nil, bad
	}
	if x.DType.IsInt() {
		return one(tensor.FromInt64s(x.DType, x.Shape, scatterInts(vals))), nil
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, vals)), nil
}

func scatterInts(v []float64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func shapeScatterND(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, ind, upd := in[0], in[1], in[2]
	comb, err := scatterCombine(attrs[graph.ScatterNDAttrs](n).Reduction)
	if err != nil {
		return nil, err
	}
	q := len(ind.Shape)
	if q == 0 {
		return nil, Badf("indices must have rank >= 1")
	}
	k := ind.Shape[q-1]
	if k > len(x.Shape) {
		return nil, Badf("indices address %d dims of a rank-%d tensor", k, len(x.Shape))
	}
	inner := x.Shape[k:].NumElements()
	tuples := ind.Shape[:q-1].NumElements()
	if upd.Len() != tuples*inner {
		return nil, Badf("updates %v do not match indices %v", upd.Shape, ind.Shape)
	}
	vals, uv, iv := x.Float64s(), upd.Float64s(), ind.Int64s()
	st := x.Shape.Strides()
	for t := 0; t < tuples; t++ {
		off := 0
		for j := 0; j < k; j++ {
			v := iv[t*k+j]
			d := int64(x.Shape[j])
			if v < 0 {
				v += d
			}
			if v < 0 || v >= d {
				return nil, Badf("index %d out of range for extent %d", iv[t*k+j], d)
			}
			off += int(v) * st[j]
		}
		for e := 0; e < inner; e++ {
			vals[off+e] = comb(vals[off+e], uv[t*inner+e])
		}
	}
	if x.DType.IsInt() {
		return one(tensor.FromInt64s(x.DType, x.Shape, scatterInts(vals))), nil
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape, vals)), nil
}

func shapeSqueeze(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	drop := map[int]bool{}
	if len(in) > 1 && in[1] != nil {
		for _, a := range in[1].Int64s() {
			ax, err := tensor.NormAxis(a, len(x.Shape))
			if err != nil {
				return nil, Badf("%v", err)
			}
			if x.Shape[ax] != 1 {
				return nil, Badf("cannot squeeze axis %d of extent %d", ax, x.Shape[ax])
			}
			drop[ax] = true
		}
	} else {
		for i, d := range x.Shape {
			drop[i] = d == 1
		}
	}
	var out tensor.Shape
	for i, d := range x.Shape {
		if !drop[i] {
			out = append(out, d)
		}
	}
	r, err := x.Reshape(out)
	if err != nil {
		return nil, Badf("%v", err)
	}
	return one(r), nil
}

func shapeUnsqueeze(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, axes := in[0], in[1].Int64s()
	r := len(x.Shape) + len(axes)
	ins := map[int]bool{}
	for _, a := range axes {
		ax, err := tensor.NormAxis(a, r)
		if err != nil || ins[ax] {
			return nil, Badf("bad axes %v for output rank %d", axes, r)
		}
		ins[ax] = true
	}
	out := make(tensor.Shape, 0, r)
	k := 0
	for i := 0; i < r; i++ {
		if ins[i] {
			out = append(out, 1)
		} else {
			out = append(out, x.Shape[k])
			k++
		}
	}
	res, err := x.Reshape(out)
	if err != nil {
		return nil, Badf("%v", err)
	}
	return one(res), nil
}

func shapeExpand(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	target, err := shapeFromValues(in[1].Int64s())
	if err != nil {
		return nil, err
	}
	out, err := tensor.BroadcastShapes(in[0].Shape, target)
	if err != nil {
		return nil, Badf("%v", err)
	}
	return one(take(in[0], out, broadcastIndex(out, in[0].Shape))), nil
}

func shapeTile(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, reps := in[0], in[1].Int64s()
	if len(reps) != len(x.Shape) {
		return nil, Badf("%d repeats for rank %d", len(reps), len(x.Shape))
	}
	out := make(tensor.Shape, len(reps))
	for i, r := range reps {
		if r < 0 {
			return nil, Badf("negative repeat %d", r)
		}
		out[i] = x.Shape[i] * int(r)
	}
	if _, err := out.CheckedNumElements(1 << 34); err != nil {
		return nil, Badf("%v", err)
	}
	st := x.Shape.Strides()
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			off += (v % x.Shape[a]) * st[a]
		}
		idx[lin] = off
	})
	return one(take(x, out, idx)), nil
}

func shapeShape(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ShapeAttrs](n)
	r := int64(len(in[0].Shape))
	start, end := a.Start, a.End
	if end == graph.AbsentInt {
		end = r
	}
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = max(0, min(start, r)), max(0, min(end, r))
	var dims []int64
	for i := start; i < end; i++ {
		dims = append(dims, int64(in[0].Shape[i]))
	}
	return one(tensor.MustFromSlice(tensor.Shape{len(dims)}, append([]int64{}, dims...))), nil
}

func shapeConstantOfShape(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	shape, err := shapeFromValues(in[0].Int64s())
	if err != nil {
		return nil, err
	}
	v := attrs[graph.ConstantOfShapeAttrs](n).Value
	if v == nil {
		return one(tensor.New(tensor.Float32, shape)), nil
	}
	if v.Len() != 1 {
		return nil, Badf("value attribute has %d elements, want 1", v.Len())
	}
	return one(take(v, shape, make([]int, shape.NumElements()))), nil
}

func shapeRange(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	for i, t := range in {
		if t.Len() != 1 {
			return nil, Badf("Range input %d has %d elements, want 1", i, t.Len())
		}
	}
	dt := in[0].DType
	if dt.IsInt() {
		s, l, d := in[0].Int64s()[0], in[1].Int64s()[0], in[2].Int64s()[0]
		if d == 0 {
			return nil, Badf("Range delta 0")
		}
		cnt := max(0, (l-s+d-sign(d))/d)
		if cnt > 1<<31 {
			return nil, Badf("Range of %d elements", cnt)
		}
		v := make([]int64, cnt)
		for i := range v {
			v[i] = s + int64(i)*d
		}
		return one(tensor.FromInt64s(dt, tensor.Shape{len(v)}, v)), nil
	}
	s, l, d := in[0].Float64s()[0], in[1].Float64s()[0], in[2].Float64s()[0]
	if d == 0 {
		return nil, Badf("Range delta 0")
	}
	cnt := int64(max(0, math.Ceil((l-s)/d)))
	if cnt > 1<<31 {
		return nil, Badf("Range of %d elements", cnt)
	}
	v := make([]float64, cnt)
	for i := range v {
		v[i] = s + float64(i)*d
	}
	return one(tensor.FromFloat64s(dt, tensor.Shape{len(v)}, v)), nil
}

func sign(x int64) int64 {
	if x < 0 {
		return -1
	}
	return 1
}

func shapeFlatten(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	axis, err := graph.FlattenAxis(attrs[graph.FlattenAttrs](n).Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	out, _ := x.Reshape(tensor.Shape{x.Shape[:axis].NumElements(), x.Shape[axis:].NumElements()})
	return one(out), nil
}
