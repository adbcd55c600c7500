package ref

// More data-movement ops: Pad, Trilu, OneHot, DepthToSpace/SpaceToDepth, Compress,
// EyeLike, NonZero.

import (
	"reflect"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

func shapeMoreKernels() map[graph.Op]Kernel {
	return map[graph.Op]Kernel{
		graph.OpPad:          T(shapePad),
		graph.OpTrilu:        T(shapeTrilu),
		graph.OpOneHot:       T(shapeOneHot),
		graph.OpDepthToSpace: T(shapeDepthToSpace),
		graph.OpSpaceToDepth: T(shapeSpaceToDepth),
		graph.OpCompress:     T(shapeCompress),
		graph.OpEyeLike:      T(shapeEyeLike),
		graph.OpNonZero:      T(shapeNonZero),
	}
}

func shapePad(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	mode := attrs[graph.PadAttrs](n).Mode
	x := in[0]
	r := len(x.Shape)
	pads := in[1].Int64s()
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if len(in) > 3 && in[3] != nil {
		axes = axes[:0]
		for _, a := range in[3].Int64s() {
			ax, err := tensor.NormAxis(a, r)
			if err != nil {
				return nil, Badf("%v", err)
			}
			axes = append(axes, ax)
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, Badf("%d pads for %d axes", len(pads), len(axes))
	}
	begin, end := make([]int, r), make([]int, r)
	for i, ax := range axes {
		begin[ax], end[ax] = int(pads[i]), int(pads[i+len(axes)])
	}
	out := make(tensor.Shape, r)
	for i := range out {
		out[i] = x.Shape[i] + begin[i] + end[i]
		if out[i] < 0 {
			return nil, Badf("pads %v make a negative extent", pads)
		}
		if (mode == "reflect" || mode == "edge") && x.Shape[i] == 0 && out[i] > 0 {
			return nil, Badf("%s padding of an empty axis", mode)
		}
		if mode == "wrap" && x.Shape[i]-max(-begin[i], 0)-max(-end[i], 0) <= 0 && out[i] > 0 {
			return nil, Badf("wrap padding of axis %d cropped to nothing", i)
		}
	}
	// constant value: input 2, else zero; build a 1-element source to point padding at
	fill := tensor.New(x.DType, tensor.Shape{1})
	if len(in) > 2 && in[2] != nil && in[2].Len() > 0 {
		reflect.ValueOf(fill.Data).Index(0).Set(reflect.ValueOf(in[2].Cast(x.DType).Data).Index(0))
	}
	src := x
	combined := tensor.New(x.DType, tensor.Shape{x.Len() + 1})
	reflect.Copy(reflect.ValueOf(combined.Data), reflect.ValueOf(src.Data))
	reflect.ValueOf(combined.Data).Index(x.Len()).Set(reflect.ValueOf(fill.Data).Index(0))
	st := x.Shape.Strides()
	idx := make([]int, out.NumElements())
	var bad error
	forEachIndex(out, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			p := v - begin[a]
			d := x.Shape[a]
			if mode == "wrap" {
				// a ring of the part the negative pads keep, from its first element
				lo := max(-begin[a], 0)
				kept := d - lo - max(-end[a], 0)
				p = lo + ((v-max(begin[a], 0))%kept+kept)%kept
			}
			if p < 0 || p >= d {
				switch mode {
				case "constant":
					idx[lin] = x.Len()
					return
				case "edge":
					p = max(0, min(p, d-1))
				case "reflect":
					if d == 1 {
						p = 0
						break
					}
					period := 2 * (d - 1)
					p = ((p % period) + period) % period
					if p >= d {
						p = period - p
					}
				default:
					bad = Badf("unknown pad mode %q", mode)
					return
				}
			}
			off += p * st[a]
		}
		idx[lin] = off
	})
	if bad != nil {
		return nil, bad
	}
	return one(take(combined, out, idx)), nil
}

func shapeTrilu(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	if len(x.Shape) < 2 {
		return nil, Badf("Trilu needs rank >= 2")
	}
	k := int64(0)
	if len(in) > 1 && in[1] != nil {
		k = in[1].Int64s()[0]
	}
	upper := attrs[graph.TriluAttrs](n).Upper != 0
	rows, cols := x.Shape[len(x.Shape)-2], x.Shape[len(x.Shape)-1]
	zero := tensor.New(x.DType, tensor.Shape{1})
	combined := tensor.New(x.DType, tensor.Shape{x.Len() + 1})
	reflect.Copy(reflect.ValueOf(combined.Data), reflect.ValueOf(x.Data))
	reflect.ValueOf(combined.Data).Index(x.Len()).Set(reflect.ValueOf(zero.Data).Index(0))
	idx := make([]int, x.Len())
	for i := range idx {
		c := int64(i % cols)
		r := int64((i / cols) % rows)
		keep := c-r >= k
		if !upper {
			keep = c-r <= k
		}
		if keep {
			idx[i] = i
		} else {
			idx[i] = x.Len()
		}
	}
	return one(take(combined, x.Shape, idx)), nil
}

func shapeOneHot(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	ind, vals := in[0], in[2]
	if in[1].Len() != 1 || vals.Len() != 2 {
		return nil, Badf("OneHot needs a scalar depth and two values")
	}
	depth := int(in[1].Float64s()[0])
	if depth < 0 {
		return nil, Badf("depth %d", depth)
	}
	r := len(ind.Shape) + 1
	axis, err := tensor.NormAxis(attrs[graph.OneHotAttrs](n).Axis, r)
	if err != nil {
		return nil, Badf("%v", err)
	}
	out := append(append(append(tensor.Shape{}, ind.Shape[:axis]...), depth), ind.Shape[axis:]...)
	iv := ind.Float64s()
	inner := ind.Shape[axis:].NumElements()
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		// position in indices: drop the depth axis
		o := lin / (depth * inner)
		rest := lin % inner
		v := int(iv[o*inner+rest])
		if v < 0 {
			v += depth
		}
		if ix[axis] == v {
			idx[lin] = 1
		}
	})
	return one(take(vals, out, idx)), nil
}

func shapeDepthToSpace(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.DepthToSpaceAttrs](n)
	x := in[0]
	b := int(a.BlockSize)
	if len(x.Shape) != 4 || b <= 0 || x.Shape[1]%(b*b) != 0 {
		return nil, Badf("DepthToSpace of %v with blocksize %d", x.Shape, b)
	}
	N, C, H, W := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oc := C / (b * b)
	out := tensor.Shape{N, oc, H * b, W * b}
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		nn, c, y, xx := ix[0], ix[1], ix[2], ix[3]
		by, bx := y%b, xx%b
		var ic int
		if a.Mode == "CRD" {
			ic = c*b*b + by*b + bx
		} else {
			ic = (by*b+bx)*oc + c
		}
		idx[lin] = ((nn*C+ic)*H+y/b)*W + xx/b
	})
	return one(take(x, out, idx)), nil
}

func shapeSpaceToDepth(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	b := int(attrs[graph.SpaceToDepthAttrs](n).BlockSize)
	if len(x.Shape) != 4 || b <= 0 || x.Shape[2]%b != 0 || x.Shape[3]%b != 0 {
		return nil, Badf("SpaceToDepth of %v with blocksize %d", x.Shape, b)
	}
	N, C, H, W := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	out := tensor.Shape{N, C * b * b, H / b, W / b}
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		nn, oc, y, xx := ix[0], ix[1], ix[2], ix[3]
		blk, c := oc/C, oc%C
		by, bx := blk/b, blk%b
		idx[lin] = ((nn*C+c)*H+y*b+by)*W + xx*b + bx
	})
	return one(take(x, out, idx)), nil
}

func shapeCompress(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x, cond := in[0], in[1]
	cv := cond.Float64s()
	axis := attrs[graph.CompressAttrs](n).Axis
	if axis == graph.AbsentInt {
		var idx []int
		for i := 0; i < min(len(cv), x.Len()); i++ {
			if cv[i] != 0 {
				idx = append(idx, i)
			}
		}
		return one(take(x, tensor.Shape{len(idx)}, idx)), nil
	}
	ax, err := tensor.NormAxis(axis, len(x.Shape))
	if err != nil {
		return nil, Badf("%v", err)
	}
	var keep []int
	for i := 0; i < min(len(cv), x.Shape[ax]); i++ {
		if cv[i] != 0 {
			keep = append(keep, i)
		}
	}
	out := x.Shape.Clone()
	out[ax] = len(keep)
	st := x.Shape.Strides()
	idx := make([]int, out.NumElements())
	forEachIndex(out, func(lin int, ix []int) {
		off := 0
		for a, v := range ix {
			if a == ax {
				v = keep[v]
			}
			off += v * st[a]
		}
		idx[lin] = off
	})
	return one(take(x, out, idx)), nil
}

func shapeEyeLike(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	a := attrs[graph.EyeLikeAttrs](n)
	x := in[0]
	if len(x.Shape) != 2 {
		return nil, Badf("EyeLike needs a matrix, got %v", x.Shape)
	}
	dt := x.DType
	if a.DType != 0 {
		dt = tensor.DType(a.DType)
	}
	v := make([]float64, x.Len())
	for r := 0; r < x.Shape[0]; r++ {
		c := r + int(a.K)
		if c >= 0 && c < x.Shape[1] {
			v[r*x.Shape[1]+c] = 1
		}
	}
	return one(tensor.FromFloat64s(dt, x.Shape, v)), nil
}

func shapeNonZero(n *graph.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
	x := in[0]
	v := x.Float64s()
	r := len(x.Shape)
	var hits [][]int
	forEachIndex(x.Shape, func(lin int, ix []int) {
		if v[lin] != 0 {
			hits = append(hits, append([]int{}, ix...))
		}
	})
	if r == 0 {
		cnt := 0
		if len(v) == 1 && v[0] != 0 {
			cnt = 1
		}
		return one(tensor.New(tensor.Int64, tensor.Shape{0, cnt})), nil
	}
	out := make([]int64, r*len(hits))
	for k, h := range hits {
		for d := 0; d < r; d++ {
			out[d*len(hits)+k] = int64(h[d])
		}
	}
	return one(tensor.MustFromSlice(tensor.Shape{r, len(hits)}, out)), nil
}
