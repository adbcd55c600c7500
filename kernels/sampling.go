package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// GridSample and RoiAlign: gathers at coordinates computed from data, each tap's index
// and weight an expression, computed in the element type as ONNX's reference does
// (float32 for float32 tensors, so a float32-only dialect prints them). Every float
// becomes an index through floatToInt and is clamped into its axis, so a NaN or an
// infinite coordinate reads in bounds.

func samplingComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpGridSample: computeGridSample,
		graph.OpRoiAlign:   computeRoiAlign,
	}
}

func floorF(x loopir.Expr) loopir.Expr { return te.Floor(x) }

// litOf is the constant v in e's float type.
func litOf(e loopir.Expr, v float64) loopir.Expr { return loopir.Float(v, e.DType()) }

// isEven reports whether the integral float f is even: f − 2·⌊f/2⌋ = 0.
func isEven(f loopir.Expr) loopir.Expr {
	return cmpExpr(loopir.EQ, te.Sub(f, te.Mul(litOf(f, 2), floorF(te.Div(f, litOf(f, 2))))), litOf(f, 0))
}

// roundHalfEven is x rounded to the nearest integer, ties to even (C's nearbyint).
func roundHalfEven(x loopir.Expr) loopir.Expr {
	f := floorF(x)
	frac := te.Sub(x, f)
	up := te.Add(f, litOf(x, 1))
	return te.Select(cmpExpr(loopir.GT, frac, litOf(x, 0.5)), up,
		te.Select(cmpExpr(loopir.LT, frac, litOf(x, 0.5)), f, te.Select(isEven(f), f, up)))
}

// roundHalfAway is x rounded to the nearest integer, ties away from zero (C's round).
func roundHalfAway(x loopir.Expr) loopir.Expr {
	return te.Select(cmpExpr(loopir.GE, x, litOf(x, 0)), floorF(te.Add(x, litOf(x, 0.5))), te.Ceil(te.Sub(x, litOf(x, 0.5))))
}

// gridReflect folds x into [lo, hi] as ONNX's reference reflects; a span of 0
// gives lo.
func gridReflect(x, lo, hi loopir.Expr) loopir.Expr {
	span := te.Sub(hi, lo)
	safe := te.Select(cmpExpr(loopir.GT, span, litOf(x, 0)), span, litOf(x, 1))
	fold := func(d loopir.Expr, even, odd func(r loopir.Expr) loopir.Expr) loopir.Expr {
		k := floorF(te.Div(d, safe))
		r := te.Sub(d, te.Mul(k, safe))
		return te.Select(isEven(k), even(r), odd(r))
	}
	fromLo := func(r loopir.Expr) loopir.Expr { return te.Add(lo, r) }
	fromHi := func(r loopir.Expr) loopir.Expr { return te.Sub(hi, r) }
	below := fold(te.Sub(lo, x), fromLo, fromHi)
	above := fold(te.Sub(x, hi), fromHi, fromLo)
	v := te.Select(cmpExpr(loopir.LT, x, lo), below, te.Select(cmpExpr(loopir.GT, x, hi), above, x))
	return te.Select(cmpExpr(loopir.GT, span, litOf(x, 0)), v, lo)
}

// gridAxis is one spatial axis of a GridSample: its extent as an int and a float64
// expression, and its reflection bounds.
type gridAxis struct {
	n, nf, lo, hi loopir.Expr
}

func newGridAxis(n loopir.Expr, align bool, ct tensor.DType) gridAxis {
	nf := asType(ct, n)
	if align {
		return gridAxis{n, nf, litOf(nf, 0), te.Sub(nf, litOf(nf, 1))}
	}
	return gridAxis{n, nf, litOf(nf, -0.5), te.Sub(nf, litOf(nf, 0.5))}
}

// coord is the pixel coordinate of grid value g on the axis, rounded for nearest, then
// (but for cubic, whose taps are padded one by one) moved inside by border (clamped) or
// reflection padding as the reference does.
func (ax gridAxis) coord(g loopir.Expr, align bool, mode graph.GridMode, pad graph.GridPad, spatial int) loopir.Expr {
	var c loopir.Expr
	if align {
		c = te.Mul(te.Div(te.Add(g, litOf(g, 1)), litOf(g, 2)), te.Sub(ax.nf, litOf(g, 1)))
	} else {
		c = te.Div(te.Sub(te.Mul(te.Add(g, litOf(g, 1)), ax.nf), litOf(g, 1)), litOf(g, 2))
	}
	if mode == graph.GridNearest {
		if spatial == 3 {
			c = roundHalfAway(c)
		} else {
			c = roundHalfEven(c)
		}
	}
	if mode == graph.GridCubic {
		// as ONNX Runtime and PyTorch: the 4 taps around the coordinate as it is, each
		// tap moved inside by the padding (tapIndex), not the coordinate first
		return c
	}
	out := loopir.Bin(loopir.Or, cmpExpr(loopir.LT, c, ax.lo), cmpExpr(loopir.GT, c, ax.hi))
	switch pad {
	case graph.GridBorder:
		c = te.Select(out, te.MaxOf(te.MinOf(c, te.Sub(ax.nf, litOf(g, 1))), litOf(g, 0)), c)
	case graph.GridReflection:
		c = te.Select(out, gridReflect(c, ax.lo, ax.hi), c)
	}
	return c
}

// tapIndex maps the integral float index f of a tap to an in-bounds index and whether
// it reads (false: a zero from zeros padding).
func (ax gridAxis) tapIndex(f loopir.Expr, pad graph.GridPad) (loopir.Expr, loopir.Expr) {
	i := floatToInt(f, tensor.Int64)
	switch pad {
	case graph.GridZeros:
		return clampExpr(i, ax.n), inside(i, ax.n)
	case graph.GridReflection:
		i = floatToInt(gridReflect(f, ax.lo, ax.hi), tensor.Int64)
	}
	return clampExpr(i, ax.n), nil
}

// gridTaps are the taps of one axis at coordinate c: their float indices and weights.
func gridTaps(c loopir.Expr, mode graph.GridMode) (idx, w []loopir.Expr) {
	if mode == graph.GridNearest {
		return []loopir.Expr{c}, []loopir.Expr{litOf(c, 1)}
	}
	f := floorF(c)
	t := te.Sub(c, f)
	if mode == graph.GridLinear {
		return []loopir.Expr{f, te.Add(f, litOf(c, 1))}, []loopir.Expr{te.Sub(litOf(c, 1), t), t}
	}
	const a = -0.75
	near := func(s loopir.Expr) loopir.Expr { // ((a+2)s − (a+3))s² + 1
		return te.Add(te.Mul(te.Sub(te.Mul(litOf(c, a+2), s), litOf(c, a+3)), te.Mul(s, s)), litOf(c, 1))
	}
	far := func(s loopir.Expr) loopir.Expr { // ((a·s − 5a)s + 8a)s − 4a
		return te.Sub(te.Mul(te.Add(te.Mul(te.Sub(te.Mul(litOf(c, a), s), litOf(c, 5*a)), s), litOf(c, 8*a)), s), litOf(c, 4*a))
	}
	for k := -1; k <= 2; k++ {
		idx = append(idx, te.Add(f, litOf(c, float64(k))))
	}
	return idx, []loopir.Expr{far(te.Add(t, litOf(c, 1))), near(t), near(te.Sub(litOf(c, 1), t)), far(te.Sub(litOf(c, 2), t))}
}

// computeGridSample is GridSample over the spatial axes of X [N, C, D1..Dr] (r at most
// 3): out[n, c, o...] = Σ over the taps (1 nearest, 2 per axis linear, 4 per axis cubic)
// of the product of their weights times X at their indices (zero outside with zeros
// padding, clamped with border, reflected with reflection). The pixel coordinates are a
// stage of their own ([N, O1..Or, r], axis order; the grid lists them reversed).
func computeGridSample(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.GridSampleAttrs](n)
	mode, pad, err := graph.ParseGridSample(a)
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	x, grid := in[0].T, in[1].T
	sp := len(x.Shape) - 2
	if !plainFloat(x.DT) || !plainFloat(grid.DT) || sp < 1 || sp > 3 || len(grid.Shape) != sp+2 {
		return nil, Unsupported("GridSample of %v%v on a %v grid of rank %d (1 to 3 spatial axes)", x.DT, x.Shape, grid.DT, len(grid.Shape))
	}
	align := a.AlignCorners != 0
	ct := x.DT // the reference's precision: coordinates in the element type
	axes := make([]gridAxis, sp)
	for k := range axes {
		axes[k] = newGridAxis(x.Shape[2+k], align, ct)
	}
	shape, err := genShape(n, in, x.DT)
	if err != nil {
		return nil, err
	}
	coordShape := append(append([]loopir.Expr{}, grid.Shape[:sp+1]...), i64(int64(sp)))
	coords := te.Compute("grid_coords", coordShape, func(i []loopir.Expr) loopir.Expr {
		k := i[sp+1]
		idx := append(append([]loopir.Expr{}, i[:sp+1]...), sub(i64(int64(sp-1)), k))
		g := asType(ct, grid.At(idx...))
		v := axes[sp-1].coord(g, align, mode, pad, sp)
		for a := sp - 2; a >= 0; a-- {
			v = te.Select(cmpExpr(loopir.EQ, k, i64(int64(a))), axes[a].coord(g, align, mode, pad, sp), v)
		}
		return v
	})
	acc := te.Compute("grid_sample_sum", shape, func(i []loopir.Expr) loopir.Expr {
		idx := make([][]loopir.Expr, sp)
		w := make([][]loopir.Expr, sp)
		for k := range sp {
			at := append(append([]loopir.Expr{i[0]}, i[2:]...), i64(int64(k)))
			idx[k], w[k] = gridTaps(coords.At(at...), mode)
		}
		zero := loopir.Float(0, ct)
		// Σ over one tap per axis, recursively: weight product, indices and read guard
		var sum func(k int, wt loopir.Expr, at []loopir.Expr, ok loopir.Expr) loopir.Expr
		sum = func(k int, wt loopir.Expr, at []loopir.Expr, ok loopir.Expr) loopir.Expr {
			if k == sp {
				v := te.Mul(wt, asType(ct, x.At(append([]loopir.Expr{i[0], i[1]}, at...)...)))
				if ok != nil {
					v = te.Select(ok, v, zero)
				}
				return v
			}
			var s loopir.Expr = zero
			for p := range idx[k] {
				ix, in := axes[k].tapIndex(idx[k][p], pad)
				guard := ok
				if in != nil {
					guard = in
					if ok != nil {
						guard = bothExpr(ok, in)
					}
				}
				s = te.Add(s, sum(k+1, te.Mul(wt, w[k][p]), append(append([]loopir.Expr{}, at...), ix), guard))
			}
			return s
		}
		return sum(0, loopir.Float(1, ct), nil, nil)
	})
	out := te.Compute("grid_sample", shape, func(i []loopir.Expr) loopir.Expr { return asType(x.DT, acc.At(i...)) })
	return []*te.Tensor{out}, nil
}

// computeRoiAlign is RoiAlign with a fixed sampling_ratio: per output bin the average
// (or the largest) of sampling_ratio² bilinear samples of X[batch_indices[r], c], a
// sample more than a pixel outside the image reading 0 and one inside clamped to it.
// An adaptive grid (sampling_ratio 0: ⌈roi extent / output extent⌉ samples, a count
// that depends on the data) has no kernel.
func computeRoiAlign(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.RoiAlignAttrs](n)
	half, err := graph.RoiHalfPixel(a)
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	if a.SamplingRatio < 1 {
		return nil, Unsupported("RoiAlign with an adaptive sampling grid (sampling_ratio 0)")
	}
	if a.Mode != "avg" && a.Mode != "max" {
		return nil, Unsupported("RoiAlign mode %q", a.Mode)
	}
	x, rois, bi := in[0].T, in[1].T, in[2].T
	if !plainFloat(x.DT) || !plainFloat(rois.DT) || !bi.DT.IsInt() || len(x.Shape) != 4 || len(rois.Shape) != 2 || len(bi.Shape) != 1 {
		return nil, Unsupported("RoiAlign of %v%v, rois %v%v, batch_indices %v%v", x.DT, x.Shape, rois.DT, rois.Shape, bi.DT, bi.Shape)
	}
	shape, err := genShape(n, in, x.DT)
	if err != nil {
		return nil, err
	}
	ct := x.DT // the sampling arithmetic in the element type, as the reference's
	fc := func(v float64) loopir.Expr { return loopir.Float(v, ct) }
	h, w := x.Shape[2], x.Shape[3]
	g := a.SamplingRatio
	ry, rx := te.RAxis("roi_iy", i64(g)), te.RAxis("roi_ix", i64(g))
	scale := fc(float64(a.SpatialScale))
	offset := fc(0)
	if half {
		offset = fc(0.5)
	}
	box := func(r loopir.Expr, k int64) loopir.Expr {
		return te.Sub(te.Mul(asType(ct, rois.At(r, i64(k))), scale), offset)
	}
	// the samples along one axis (y: rois columns 1 and 3 over the output's rows; x: 0
	// and 2 over its columns) are stages [R, bins, sampling_ratio] of their own — the
	// low and high corners, the fraction past the low one, and whether the sample lies
	// more than a pixel outside — so that a schedule can compute them once per region
	// rather than once per channel (the generic rule inlines them back)
	axis := func(name string, first, bins int64, n loopir.Expr) (lo, hi, frac, out *te.Tensor) {
		nf := asType(ct, n)
		at := func(i []loopir.Expr) loopir.Expr {
			start := box(i[0], first)
			ext := te.Sub(box(i[0], first+2), start)
			if !half {
				ext = te.MaxOf(ext, fc(1))
			}
			bin := te.Div(ext, fc(float64(bins)))
			sub := te.Div(te.Mul(te.Add(asType(ct, i[2]), fc(0.5)), bin), fc(float64(g)))
			return te.Add(te.Add(start, te.Mul(asType(ct, i[1]), bin)), sub)
		}
		// the bilinear read: a clamped low corner, the high one past it unless at the edge
		clamped := func(i []loopir.Expr) (c, edge loopir.Expr) {
			c = te.MaxOf(at(i), fc(0))
			last := te.Sub(nf, fc(1))
			edge = cmpExpr(loopir.GE, floorF(c), last)
			return te.Select(edge, last, c), edge
		}
		ext := []loopir.Expr{rois.Shape[0], i64(bins), i64(g)}
		lo = te.Compute(name+"_lo", ext, func(i []loopir.Expr) loopir.Expr {
			c, _ := clamped(i)
			return clampExpr(floatToInt(floorF(c), tensor.Int64), n)
		})
		hi = te.Compute(name+"_hi", ext, func(i []loopir.Expr) loopir.Expr {
			_, edge := clamped(i)
			return clampExpr(add(lo.At(i...), te.Select(edge, i64(0), i64(1))), n)
		})
		frac = te.Compute(name+"_frac", ext, func(i []loopir.Expr) loopir.Expr {
			c, _ := clamped(i)
			return te.Sub(c, floorF(c))
		})
		out = te.Compute(name+"_out", ext, func(i []loopir.Expr) loopir.Expr {
			p := at(i)
			return te.Select(loopir.Bin(loopir.Or, cmpExpr(loopir.LT, p, fc(-1)), cmpExpr(loopir.GT, p, nf)), i64(1), i64(0))
		})
		return lo, hi, frac, out
	}
	yl, yh, ly, yo := axis("roi_y", 1, a.OutputHeight, h)
	xl, xh, lx, xo := axis("roi_x", 0, a.OutputWidth, w)
	acc := te.Compute("roi_align_sum", shape, func(i []loopir.Expr) loopir.Expr {
		r := i[0]
		b := asType(tensor.Int64, bi.At(r))
		b = te.CheckedIndex(te.Select(cmpExpr(loopir.LT, b, i64(0)), x.Shape[0], b), x.Shape[0])
		y, xx := []loopir.Expr{r, i[2], ry.Var}, []loopir.Expr{r, i[3], rx.Var}
		outside := cmpExpr(loopir.NE, add(yo.At(y...), xo.At(xx...)), i64(0))
		fy, fx := ly.At(y...), lx.At(xx...)
		hy, hx := te.Sub(fc(1), fy), te.Sub(fc(1), fx)
		read := func(yy, xv *te.Tensor) loopir.Expr { return asType(ct, x.At(b, i[1], yy.At(y...), xv.At(xx...))) }
		c := []loopir.Expr{te.Mul(te.Mul(hy, hx), read(yl, xl)), te.Mul(te.Mul(hy, fx), read(yl, xh)),
			te.Mul(te.Mul(fy, hx), read(yh, xl)), te.Mul(te.Mul(fy, fx), read(yh, xh))}
		if a.Mode == "max" {
			return te.Max(te.Select(outside, fc(0), te.MaxOf(te.MaxOf(c[0], c[1]), te.MaxOf(c[2], c[3]))), ry, rx)
		}
		return te.Sum(te.Select(outside, fc(0), te.Add(te.Add(c[0], c[1]), te.Add(c[2], c[3]))), ry, rx)
	})
	count := fc(1)
	if a.Mode != "max" {
		count = fc(float64(g * g))
	}
	out := te.Compute("roi_align", shape, func(i []loopir.Expr) loopir.Expr { return asType(x.DT, te.Div(acc.At(i...), count)) })
	return []*te.Tensor{out}, nil
}
