package ref

// NonMaxSuppression, MaxUnpool, Unique, Det, ReverseSequence and the window functions.

import (
	"math"
	"slices"
	"sort"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func extraKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpNonMaxSuppression: T(extraNMS),
		graph.OpMaxUnpool:         T(extraMaxUnpool),
		graph.OpUnique:            T(extraUnique),
		graph.OpDet:               T(extraDet),
		graph.OpReverseSequence:   T(extraReverseSequence),
		graph.OpHannWindow:        T(extraWindow),
		graph.OpHammingWindow:     T(extraWindow),
		graph.OpBlackmanWindow:    T(extraWindow),
	}
}

func extraNMS(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	boxes, scores := in[0], in[1]
	if len(boxes.Shape) != 3 || boxes.Shape[2] != 4 || len(scores.Shape) != 3 ||
		scores.Shape[0] != boxes.Shape[0] || scores.Shape[2] != boxes.Shape[1] {
		return nil, Badf("boxes %v and scores %v do not fit", boxes.Shape, scores.Shape)
	}
	scalar := func(i int, def float64) float64 {
		if i < len(in) && in[i] != nil && in[i].Len() > 0 {
			return in[i].Float64s()[0]
		}
		return def
	}
	// max_output_boxes_per_class is an int64 and read as one: through a float64, its
	// usual "no limit" INT64_MAX rounds up past the int range
	maxOut := int64(0)
	if len(in) > 2 && in[2] != nil && in[2].Len() > 0 {
		if !in[2].DType.IsInt() {
			return nil, Badf("max_output_boxes_per_class is %v, want an integer", in[2].DType)
		}
		maxOut = in[2].Int64s()[0]
	}
	iouTh := scalar(3, 0)
	hasScoreTh := len(in) > 4 && in[4] != nil && in[4].Len() > 0
	scoreTh := scalar(4, 0)
	center := attrs[graph.NMSAttrs](n).CenterPointBox != 0
	bv, sv := boxes.Float64s(), scores.Float64s()
	nb, nc, ns := scores.Shape[0], scores.Shape[1], scores.Shape[2]
	corners := func(b, i int) (y1, x1, y2, x2 float64) {
		p := bv[(b*ns+i)*4 : (b*ns+i)*4+4]
		if center {
			return p[1] - p[3]/2, p[0] - p[2]/2, p[1] + p[3]/2, p[0] + p[2]/2
		}
		return math.Min(p[0], p[2]), math.Min(p[1], p[3]), math.Max(p[0], p[2]), math.Max(p[1], p[3])
	}
	iou := func(b, i, j int) float64 {
		ay1, ax1, ay2, ax2 := corners(b, i)
		by1, bx1, by2, bx2 := corners(b, j)
		ih := math.Max(0, math.Min(ay2, by2)-math.Max(ay1, by1))
		iw := math.Max(0, math.Min(ax2, bx2)-math.Max(ax1, bx1))
		inter := ih * iw
		union := (ay2-ay1)*(ax2-ax1) + (by2-by1)*(bx2-bx1) - inter
		if union <= 0 {
			return 0
		}
		return inter / union
	}
	var sel []int64
	for b := 0; b < nb; b++ {
		for c := 0; c < nc; c++ {
			sc := sv[(b*nc+c)*ns : (b*nc+c+1)*ns]
			var cand []int
			for i := 0; i < ns; i++ {
				if !hasScoreTh || sc[i] > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(p, q int) bool { return sc[cand[p]] > sc[cand[q]] })
			var kept []int
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if iou(b, i, k) > iouTh {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
					sel = append(sel, int64(b), int64(c), int64(i))
				}
			}
		}
	}
	return one(tensor.MustFromSlice(tensor.Shape{len(sel) / 3, 3}, append([]int64{}, sel...))), nil
}

func extraMaxUnpool(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.MaxUnpoolAttrs](n)
	x, ind := in[0], in[1]
	if !x.Shape.Equal(ind.Shape) || len(x.Shape) < 3 {
		return nil, Badf("X %v and I %v must have equal shapes of rank >= 3", x.Shape, ind.Shape)
	}
	sp := len(x.Shape) - 2
	// indices address the default unpooled shape; an explicit output_shape only adds
	// room, so each index is re-raveled into it
	def := x.Shape.Clone()
	for i := 0; i < sp; i++ {
		def[2+i] = (x.Shape[2+i]-1)*int(graph.AttrOr(a.Strides, i, 1)) + int(a.KernelShape[i]) -
			int(graph.AttrOr(a.Pads, i, 0)) - int(graph.AttrOr(a.Pads, i+sp, 0))
	}
	out := def
	if len(in) > 2 && in[2] != nil {
		s, err := shapeFromValues(in[2].Int64s())
		if err != nil {
			return nil, err
		}
		if len(s) != len(def) {
			return nil, Badf("output_shape %v for rank %d", s, len(def))
		}
		out = s
	}
	defInner, outInner := def[2:].NumElements(), out[2:].NumElements()
	outStr := out[2:].Strides()
	coord := make([]int, sp)
	res := make([]float64, out.NumElements())
	xv, iv := x.Float64s(), ind.Int64s()
	for i, p := range iv {
		if p < 0 || p >= int64(def.NumElements()) {
			return nil, Badf("index %d out of range for %v", p, def)
		}
		plane, within := int(p)/defInner, int(p)%defInner
		unravel(within, def[2:], coord)
		off := plane * outInner
		for k, c := range coord {
			if c >= out[2+k] {
				return nil, Badf("index %d falls outside output_shape %v", p, out)
			}
			off += c * outStr[k]
		}
		res[off] = xv[i]
	}
	return one(tensor.FromFloat64s(x.DType, out, res)), nil
}

func extraUnique(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.UniqueAttrs](n)
	x := in[0]
	v := x.Float64s()
	// slices along the axis (or single elements when flattening) are the items compared
	axis, outer, d, inner := 0, 1, x.Len(), 1
	if a.Axis != graph.AbsentInt {
		ax, err := tensor.NormAxis(a.Axis, len(x.Shape))
		if err != nil {
			return nil, Badf("%v", err)
		}
		axis, outer, d, inner = ax, x.Shape[:ax].NumElements(), x.Shape[ax], x.Shape[ax+1:].NumElements()
	}
	item := func(k int) []float64 {
		s := make([]float64, 0, outer*inner)
		for o := 0; o < outer; o++ {
			s = append(s, v[(o*d+k)*inner:(o*d+k+1)*inner]...)
		}
		return s
	}
	var firsts []int
	var inverse []int64
	var counts []int64
	for k := 0; k < d; k++ {
		it := item(k)
		found := -1
		for u, f := range firsts {
			if slices.Equal(item(f), it) {
				found = u
				break
			}
		}
		if found < 0 {
			firsts = append(firsts, k)
			counts = append(counts, 0)
			found = len(firsts) - 1
		}
		counts[found]++
		inverse = append(inverse, int64(found))
	}
	order := make([]int, len(firsts))
	for i := range order {
		order[i] = i
	}
	if a.Sorted != 0 {
		sort.SliceStable(order, func(p, q int) bool { return slices.Compare(item(firsts[order[p]]), item(firsts[order[q]])) < 0 })
	}
	rank := make([]int64, len(order))
	for newPos, u := range order {
		rank[u] = int64(newPos)
	}
	idx := make([]int64, len(order))
	cnt := make([]int64, len(order))
	for newPos, u := range order {
		idx[newPos], cnt[newPos] = int64(firsts[u]), counts[u]
	}
	for i := range inverse {
		inverse[i] = rank[inverse[i]]
	}
	var y *tensor.Tensor
	if a.Axis == graph.AbsentInt {
		src := make([]int, len(idx))
		for i, f := range idx {
			src[i] = int(f)
		}
		y = take(x, tensor.Shape{len(src)}, src)
	} else {
		shape := x.Shape.Clone()
		shape[axis] = len(idx)
		src := make([]int, 0, shape.NumElements())
		for o := 0; o < outer; o++ {
			for _, f := range idx {
				for i := 0; i < inner; i++ {
					src = append(src, (o*d+int(f))*inner+i)
				}
			}
		}
		y = take(x, shape, src)
	}
	outs := []*tensor.Tensor{y,
		tensor.MustFromSlice(tensor.Shape{len(idx)}, idx),
		tensor.MustFromSlice(tensor.Shape{len(inverse)}, inverse),
		tensor.MustFromSlice(tensor.Shape{len(cnt)}, cnt)}
	return outs[:len(n.Outputs)], nil
}

func extraDet(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	if r < 2 || x.Shape[r-1] != x.Shape[r-2] {
		return nil, Badf("Det needs square matrices, got %v", x.Shape)
	}
	m := x.Shape[r-1]
	v := x.Float64s()
	batch := x.Shape[:r-2].NumElements()
	out := make([]float64, batch)
	for b := 0; b < batch; b++ {
		a := append([]float64{}, v[b*m*m:(b+1)*m*m]...)
		det := 1.0
		for c := 0; c < m; c++ {
			p := c
			for i := c + 1; i < m; i++ {
				if math.Abs(a[i*m+c]) > math.Abs(a[p*m+c]) {
					p = i
				}
			}
			if a[p*m+c] == 0 {
				det = 0
				break
			}
			if p != c {
				for j := 0; j < m; j++ {
					a[p*m+j], a[c*m+j] = a[c*m+j], a[p*m+j]
				}
				det = -det
			}
			det *= a[c*m+c]
			for i := c + 1; i < m; i++ {
				f := a[i*m+c] / a[c*m+c]
				for j := c; j < m; j++ {
					a[i*m+j] -= f * a[c*m+j]
				}
			}
		}
		out[b] = det
	}
	return one(tensor.FromFloat64s(x.DType, x.Shape[:r-2], out)), nil
}

func extraReverseSequence(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.ReverseSequenceAttrs](n)
	x := in[0]
	ta, err := tensor.NormAxis(a.TimeAxis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	ba, err := tensor.NormAxis(a.BatchAxis, len(x.Shape))
	if err != nil || ba == ta {
		return nil, Badf("bad batch_axis %d / time_axis %d", a.BatchAxis, a.TimeAxis)
	}
	lens := in[1].Int64s()
	if len(lens) != x.Shape[ba] {
		return nil, Badf("%d sequence lengths for batch %d", len(lens), x.Shape[ba])
	}
	st := x.Shape.Strides()
	idx := make([]int, x.Len())
	var bad error
	forEachIndex(x.Shape, func(lin int, ix []int) {
		l := int(lens[ix[ba]])
		if l < 0 || l > x.Shape[ta] {
			bad = Badf("sequence length %d out of range", l)
			return
		}
		t := ix[ta]
		src := lin
		if t < l {
			src = lin + (l-1-2*t)*st[ta]
		}
		idx[lin] = src
	})
	if bad != nil {
		return nil, bad
	}
	return one(take(x, x.Shape, idx)), nil
}

func extraWindow(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.WindowAttrs](n)
	if in[0].Len() != 1 {
		return nil, Badf("window size must be a scalar")
	}
	size := int(in[0].Int64s()[0])
	if size < 0 || size > 1<<24 {
		return nil, Badf("window size %d", size)
	}
	den := float64(size)
	if a.Periodic == 0 {
		den = float64(size - 1)
	}
	v := make([]float64, size)
	for i := range v {
		x := 2 * math.Pi * float64(i) / den
		switch n.Op {
		case graph.OpHannWindow:
			v[i] = 0.5 - 0.5*math.Cos(x)
		case graph.OpHammingWindow:
			v[i] = 25.0/46 - (1-25.0/46)*math.Cos(x)
		default:
			v[i] = 0.42 - 0.5*math.Cos(x) + 0.08*math.Cos(2*x)
		}
	}
	return one(tensor.FromFloat64s(tensor.DType(a.OutputDatatype), tensor.Shape{size}, v)), nil
}
