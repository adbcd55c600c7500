package ref

// Reductions, ArgMax/ArgMin, CumSum and TopK. Values are accumulated in float64 for
// floats and in int64 for integers; the output keeps the input dtype.

import (
	"math"
	"sort"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func reduceKernels() map[graph.Op]Kernel {
	k := map[graph.Op]Kernel{
		graph.OpArgMax: T(reduceArg),
		graph.OpArgMin: T(reduceArg),
		graph.OpCumSum: T(reduceCumSum),
		graph.OpTopK:   T(reduceTopK),
	}
	for op := range reducers {
		k[op] = T(reduceOp)
	}
	return k
}

// reducer: init value, accumulate step, and a final map (count = reduced elements).
type reducer struct {
	init   float64
	step   func(acc, v float64) float64
	finish func(acc float64, count int) float64
}

func id(acc float64, _ int) float64 { return acc }

var reducers = map[graph.Op]reducer{
	graph.OpReduceSum:  {0, func(a, v float64) float64 { return a + v }, id},
	graph.OpReduceMean: {0, func(a, v float64) float64 { return a + v }, func(a float64, n int) float64 { return a / float64(n) }},
	graph.OpReduceMax: {math.Inf(-1), func(a, v float64) float64 {
		if math.IsNaN(v) || math.IsNaN(a) {
			return math.NaN()
		}
		return math.Max(a, v)
	}, id},
	graph.OpReduceMin: {math.Inf(1), func(a, v float64) float64 {
		if math.IsNaN(v) || math.IsNaN(a) {
			return math.NaN()
		}
		return math.Min(a, v)
	}, id},
	graph.OpReduceProd:      {1, func(a, v float64) float64 { return a * v }, id},
	graph.OpReduceL1:        {0, func(a, v float64) float64 { return a + math.Abs(v) }, id},
	graph.OpReduceL2:        {0, func(a, v float64) float64 { return a + v*v }, func(a float64, _ int) float64 { return math.Sqrt(a) }},
	graph.OpReduceLogSum:    {0, func(a, v float64) float64 { return a + v }, func(a float64, _ int) float64 { return math.Log(a) }},
	graph.OpReduceSumSquare: {0, func(a, v float64) float64 { return a + v*v }, id},
	graph.OpReduceLogSumExp: {}, // computed with a max shift, see reduceOp
}

// reduceGroups maps each input element to its output position for the reduced axes.
func reduceGroups(shape tensor.Shape, red []bool, keep bool) (tensor.Shape, []int) {
	var out, outKeep tensor.Shape
	for i, d := range shape {
		if red[i] {
			outKeep = append(outKeep, 1)
			if keep {
				out = append(out, 1)
			}
		} else {
			outKeep = append(outKeep, d)
			out = append(out, d)
		}
	}
	ost := outKeep.Strides()
	pos := make([]int, shape.NumElements())
	forEachIndex(shape, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			if !red[a] {
				off += v * ost[a]
			}
		}
		pos[lin] = off
	})
	if out == nil {
		out = tensor.Shape{}
	}
	return out, pos
}

func reduceOp(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ReduceAttrs](n)
	x := in[0]
	var axes []int64
	given := len(in) > 1 && in[1] != nil
	if given {
		axes = in[1].Int64s()
	}
	red, err := graph.ReduceAxes(len(x.Shape), axes, given, a.NoopWithEmptyAxes != 0)
	if err != nil {
		return nil, Badf("%v", err)
	}
	if red == nil {
		return one(x), nil
	}
	out, pos := reduceGroups(x.Shape, red, a.KeepDims != 0)
	size := out.NumElements()
	counts := make([]int, size)
	for _, p := range pos {
		counts[p]++
	}
	if x.DType.IsInt() && (n.Op == graph.OpReduceSum || n.Op == graph.OpReduceProd || n.Op == graph.OpReduceMax || n.Op == graph.OpReduceMin) {
		return one(tensor.FromInt64s(x.DType, out, reduceInts(n.Op, x, pos, size, counts))), nil
	}
	v := x.Float64s()
	acc := make([]float64, size)
	if n.Op == graph.OpReduceLogSumExp {
		mx := make([]float64, size)
		for i := range mx {
			mx[i] = math.Inf(-1)
		}
		for i, p := range pos {
			mx[p] = math.Max(mx[p], v[i])
		}
		for i, p := range pos {
			acc[p] += math.Exp(v[i] - mx[p])
		}
		for i := range acc {
			if math.IsInf(mx[i], -1) {
				acc[i] = math.Inf(-1)
			} else {
				acc[i] = mx[i] + math.Log(acc[i])
			}
		}
		return one(tensor.FromFloat64s(x.DType, out, acc)), nil
	}
	r := reducers[n.Op]
	for i := range acc {
		acc[i] = r.init
	}
	for i, p := range pos {
		acc[p] = r.step(acc[p], v[i])
	}
	for i := range acc {
		acc[i] = r.finish(acc[i], counts[i])
	}
	return one(tensor.FromFloat64s(x.DType, out, acc)), nil
}

func reduceInts(op graph.Op, x *tensor.Tensor, pos []int, size int, counts []int) []int64 {
	v := x.Int64s()
	acc := make([]int64, size)
	for i := range acc {
		switch op {
		case graph.OpReduceProd:
			acc[i] = 1
		case graph.OpReduceMax:
			acc[i] = math.MinInt64
		case graph.OpReduceMin:
			acc[i] = math.MaxInt64
		}
	}
	for i, p := range pos {
		switch op {
		case graph.OpReduceSum:
			acc[p] += v[i]
		case graph.OpReduceProd:
			acc[p] *= v[i]
		case graph.OpReduceMax:
			acc[p] = max(acc[p], v[i])
		case graph.OpReduceMin:
			acc[p] = min(acc[p], v[i])
		}
	}
	return acc
}

func reduceArg(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ArgAttrs](n)
	x := in[0]
	ax, err := tensor.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	if x.Shape[ax] == 0 {
		return nil, Badf("%v over an empty axis", n.Op)
	}
	red := make([]bool, len(x.Shape))
	red[ax] = true
	out, pos := reduceGroups(x.Shape, red, a.KeepDims != 0)
	v := x.Float64s()
	size := out.NumElements()
	best := make([]float64, size)
	at := make([]int64, size)
	seen := make([]bool, size)
	inner := x.Shape[ax+1:].NumElements()
	isMax := n.Op == graph.OpArgMax
	for i, p := range pos {
		k := int64((i / inner) % x.Shape[ax])
		// NaN is the best of all, as in numpy's argmax and argmin
		nan, bestNaN := math.IsNaN(v[i]), math.IsNaN(best[p])
		better := !seen[p] || (isMax && v[i] > best[p]) || (!isMax && v[i] < best[p]) ||
			(nan && !bestNaN) || (a.SelectLastIndex != 0 && (v[i] == best[p] || nan && bestNaN))
		if better {
			best[p], at[p], seen[p] = v[i], k, true
		}
	}
	return one(tensor.MustFromSlice(out, at)), nil
}

func reduceCumSum(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.CumSumAttrs](n)
	x := in[0]
	if in[1].Len() != 1 {
		return nil, Badf("CumSum axis must have one element")
	}
	ax, err := tensor.NormAxis(in[1].Int64s()[0], len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	outer, d, inner := x.Shape[:ax].NumElements(), x.Shape[ax], x.Shape[ax+1:].NumElements()
	if x.DType.IsInt() {
		v := x.Int64s()
		cumulate(v, outer, d, inner, a.Exclusive != 0, a.Reverse != 0)
		return one(tensor.FromInt64s(x.DType, x.Shape, v)), nil
	}
	v := x.Float64s()
	cumulate(v, outer, d, inner, a.Exclusive != 0, a.Reverse != 0)
	return one(tensor.FromFloat64s(x.DType, x.Shape, v)), nil
}

// cumulate replaces v by its running sums along the middle axis of (outer, d, inner);
// exclusive sums leave out the element itself.
func cumulate[T int64 | float64](v []T, outer, d, inner int, exclusive, reverse bool) {
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			var acc T
			for s := 0; s < d; s++ {
				k := s
				if reverse {
					k = d - 1 - s
				}
				idx := (o*d+k)*inner + i
				x := v[idx]
				if exclusive {
					v[idx] = acc
					acc += x
				} else {
					acc += x
					v[idx] = acc
				}
			}
		}
	}
}

func reduceTopK(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.TopKAttrs](n)
	x := in[0]
	if in[1].Len() != 1 {
		return nil, Badf("K must have one element")
	}
	k := int(in[1].Int64s()[0])
	ax, err := tensor.NormAxis(a.Axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	d := x.Shape[ax]
	if k < 0 || k > d {
		return nil, Badf("K=%d for an axis of extent %d", k, d)
	}
	outer, inner := x.Shape[:ax].NumElements(), x.Shape[ax+1:].NumElements()
	out := x.Shape.Clone()
	out[ax] = k
	v := x.Float64s()
	srcIdx := make([]int, 0, out.NumElements())
	pos := make([]int64, out.NumElements())
	order := make([]int, d)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			for j := range order {
				order[j] = j
			}
			at := func(j int) float64 { return v[(o*d+j)*inner+i] }
			sort.SliceStable(order, func(p, q int) bool {
				vp, vq := at(order[p]), at(order[q])
				if a.Largest != 0 {
					return vp > vq
				}
				return vp < vq
			})
			for j := 0; j < k; j++ {
				outPos := (o*k+j)*inner + i
				pos[outPos] = int64(order[j])
			}
		}
	}
	for o := 0; o < outer; o++ {
		for j := 0; j < k; j++ {
			for i := 0; i < inner; i++ {
				srcIdx = append(srcIdx, (o*d+int(pos[(o*k+j)*inner+i]))*inner+i)
			}
		}
	}
	return []*tensor.Tensor{take(x, out, srcIdx), tensor.MustFromSlice(out, pos)}, nil
}
