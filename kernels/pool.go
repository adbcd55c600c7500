package kernels

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// poolComputes: windowed pooling over any number of spatial axes.
func poolComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{
		graph.OpMaxPool:     computePool,
		graph.OpAveragePool: computePool,
		graph.OpLpPool:      computePool,
	}
}

// PoolWindow is the geometry of a pooling window along the spatial axes of an NC...
// input, as ONNX defines it (explicit or automatic padding, ceil mode).
type PoolWindow struct {
	In, Kernel, Out  []int64
	Stride, Dilation []int64
	PadBegin, PadEnd []int64 // the padding the windows see
	CountEnd         []int64 // the end padding that count_include_pad counts
	// InExpr and OutExpr are the extents of the symbolic axes (nil entries on static
	// ones; In, Out and the pads there are the resolution over one window's span, whose
	// pads any extent shares): newPoolWindowSym.
	InExpr, OutExpr []loopir.Expr
}

// NewPoolWindow is the geometry of the pooling window w over spatial extents in;
// graph.Window.Axis defines it.
func NewPoolWindow(in []int64, w graph.Window) (PoolWindow, error) {
	p := PoolWindow{In: in, Kernel: w.Kernel}
	for d := range in {
		if s, dil, k := w.Strides[d], w.Dilations[d], w.Kernel[d]; s <= 0 || dil <= 0 || k <= 0 {
			return PoolWindow{}, Unsupported("pooling with stride %d, dilation %d, kernel %d", s, dil, k)
		}
		a := w.Axis(d, in[d])
		p.Out = append(p.Out, a.Out)
		p.Stride = append(p.Stride, w.Strides[d])
		p.Dilation = append(p.Dilation, w.Dilations[d])
		p.PadBegin = append(p.PadBegin, a.PadBegin)
		p.PadEnd = append(p.PadEnd, a.PadEnd)
		p.CountEnd = append(p.CountEnd, w.PadEnd[d])
	}
	return p, nil
}

// newPoolWindowSym is NewPoolWindow over spatial extents that may be symbolic: on a
// symbolic axis, explicit or VALID padding without ceil_mode, or SAME or ceil_mode with
// stride 1 (and an end pad shorter than the window), pad as over any extent and give
// max(0, floor((in + pads - span) / stride) + 1) outputs; every read there is guarded.
func newPoolWindowSym(in []loopir.Expr, gw graph.Window) (PoolWindow, error) {
	for d, e := range in {
		_, static := e.(*loopir.IntImm)
		s := gw.Strides[d]
		if !static && (gw.Mode.Same() && s != 1 || gw.Ceil && (s != 1 || gw.PadEnd[d] >= gw.Span(d))) {
			return PoolWindow{}, Unsupported("pooling with auto_pad %s, ceil_mode %v and stride %d over a symbolic extent", gw.Mode, gw.Ceil, s)
		}
	}
	static := make([]int64, len(in))
	for d, e := range in {
		if c, ok := e.(*loopir.IntImm); ok {
			static[d] = c.V
		} else { // any extent: the padding of this axis does not depend on it
			static[d] = gw.Span(d)
		}
	}
	w, err := NewPoolWindow(static, gw)
	if err != nil {
		return PoolWindow{}, err
	}
	w.InExpr, w.OutExpr = make([]loopir.Expr, len(in)), make([]loopir.Expr, len(in))
	for d, e := range in {
		if _, ok := e.(*loopir.IntImm); ok {
			continue
		}
		num := add(e, i64(w.PadBegin[d]+w.PadEnd[d]-gw.Span(d)))
		w.InExpr[d] = e
		w.OutExpr[d] = loopir.Bin(loopir.Max, add(div(num, i64(w.Stride[d])), i64(1)), i64(0))
	}
	return w, nil
}

// symbolic reports a spatial axis whose extent is symbolic.
func (w PoolWindow) symbolic(d int) bool { return d < len(w.InExpr) && w.InExpr[d] != nil }

// inExt and outExt are axis d's input and output extents.
func (w PoolWindow) inExt(d int) loopir.Expr {
	if w.symbolic(d) {
		return w.InExpr[d]
	}
	return i64(w.In[d])
}

func (w PoolWindow) outExt(d int) loopir.Expr {
	if w.symbolic(d) {
		return w.OutExpr[d]
	}
	return i64(w.Out[d])
}

// Guarded reports whether some window along spatial axis d reaches outside the input
// (on a symbolic axis: may reach).
func (w PoolWindow) Guarded(d int) bool {
	return w.symbolic(d) || w.PadBegin[d] > 0 || (w.Out[d]-1)*w.Stride[d]+(w.Kernel[d]-1)*w.Dilation[d] >= w.In[d]
}

// start is where output position o's window begins along axis d (in input coordinates).
func (w PoolWindow) start(d int, o loopir.Expr) loopir.Expr {
	return sub(mul(o, i64(w.Stride[d])), i64(w.PadBegin[d]))
}

// Pos is the input coordinate along axis d of tap k of output position o.
func (w PoolWindow) Pos(d int, o, k loopir.Expr) loopir.Expr {
	return add(w.start(d, o), mul(k, i64(w.Dilation[d])))
}

// Taps counts the taps of output position o along axis d whose input coordinate lies in
// [lo, hi), in closed form.
func (w PoolWindow) Taps(d int, o, lo, hi loopir.Expr) loopir.Expr {
	st, dil, k := w.start(d, o), i64(w.Dilation[d]), w.Kernel[d]
	first := loopir.Bin(loopir.Max, i64(0), div(add(sub(lo, st), i64(w.Dilation[d]-1)), dil))
	last := loopir.Bin(loopir.Min, i64(k-1), div(sub(sub(hi, i64(1)), st), dil))
	return loopir.Bin(loopir.Max, i64(0), add(sub(last, first), i64(1)))
}

// read reads x at the taps rk of output index i: the value and whether it lies
// inside the input (nil when no window leaves it).
func (w PoolWindow) read(x *te.Tensor, i []loopir.Expr, rk []loopir.Expr) (loopir.Expr, loopir.Expr) {
	idx := []loopir.Expr{i[0], i[1]}
	var ok loopir.Expr
	for d := range w.In {
		p := w.Pos(d, i[2+d], rk[d])
		if w.Guarded(d) {
			c := inside(p, w.inExt(d))
			if ok == nil {
				ok = c
			} else {
				ok = loopir.Bin(loopir.And, ok, c)
			}
			p = loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, p, sub(w.inExt(d), i64(1))), i64(0))
		}
		idx = append(idx, p)
	}
	return x.At(idx...), ok
}

func computePool(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.PoolAttrs](n)
	x := in[0].T
	// MaxPool compares only, so integers pool as floats do (padding taps are the
	// type's least value); the others divide or take powers
	maxOnly := n.Op == graph.OpMaxPool && len(n.Outputs) == 1
	if !plainFloat(x.DT) && !(maxOnly && x.DT.IsInt()) {
		return nil, Unsupported("%v on %v", n.Op, x.DT)
	}
	if len(x.Shape) < 3 || len(a.KernelShape) != len(x.Shape)-2 {
		return nil, Unsupported("%v with kernel_shape %v on rank %d", n.Op, a.KernelShape, len(x.Shape))
	}
	gw, err := graph.PoolWindow(a)
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	var w PoolWindow
	if ext, err := staticFrom(x, 2); err == nil {
		if w, err = NewPoolWindow(ext, gw); err != nil {
			return nil, err
		}
		if shape, ok := n.Outputs[0].Type.ConstShape(); ok && len(shape) == len(x.Shape) {
			for d, o := range w.Out {
				if int64(shape[2+d]) != o {
					return nil, Unsupported("%v: the graph infers output extent %d on spatial axis %d, the window gives %d", n.Op, shape[2+d], d, o)
				}
			}
		}
	} else if w, err = newPoolWindowSym(x.Shape[2:], gw); err != nil {
		return nil, err
	}
	outShape := []loopir.Expr{x.Shape[0], x.Shape[1]}
	for d := range w.Out {
		outShape = append(outShape, w.outExt(d))
	}
	if n.Op == graph.OpMaxPool && len(n.Outputs) > 1 {
		y, idx, err := maxPoolIndices(x, w, outShape, a.StorageOrder != 0)
		return []*te.Tensor{y, idx}, err
	}
	var rv []loopir.IterVar
	var rk []loopir.Expr
	for d, k := range w.Kernel {
		ax := te.RAxis(fmt.Sprintf("k%d", d), i64(k))
		rv, rk = append(rv, ax), append(rk, ax.Var)
	}
	dt := x.DT
	guard := func(v, ok loopir.Expr, pad float64) loopir.Expr {
		if ok == nil {
			return v
		}
		return te.Select(ok, v, loopir.Float(pad, dt))
	}
	switch n.Op {
	case graph.OpMaxPool:
		return []*te.Tensor{te.Compute("maxpool", outShape, func(i []loopir.Expr) loopir.Expr {
			v, ok := w.read(x, i, rk)
			if ok != nil { // a padding tap: the least value of the type
				v = te.Select(ok, v, loopir.MaxReduce.Identity(x.DT))
			}
			return te.Max(v, rv...)
		})}, nil
	case graph.OpLpPool:
		p := a.P
		if p <= 0 {
			return nil, Unsupported("LpPool with p=%d", p)
		}
		sum := te.Compute("lppool_sum", outShape, func(i []loopir.Expr) loopir.Expr {
			v, ok := w.read(x, i, rk)
			switch p {
			case 1:
				v = te.Abs(v)
			case 2:
				v = te.Mul(v, v)
			default:
				v = te.Pow(te.Abs(v), loopir.Float(float64(p), dt))
			}
			return te.Sum(guard(v, ok, 0), rv...)
		})
		return []*te.Tensor{te.Compute("lppool", outShape, func(i []loopir.Expr) loopir.Expr {
			s := sum.At(i...)
			switch p {
			case 1:
				return s
			case 2:
				return te.Sqrt(s)
			}
			return te.Pow(s, loopir.Float(1/float64(p), dt))
		})}, nil
	}
	include := a.CountIncludePad != 0
	if include && gw.Mode.Same() {
		for d := range w.In {
			if w.PadBegin[d] != 0 || w.PadEnd[d] != 0 {
				return nil, Unsupported("AveragePool with count_include_pad=1 and auto_pad %s that pads", gw.Mode)
			}
		}
	}
	sum := te.Compute("avgpool_sum", outShape, func(i []loopir.Expr) loopir.Expr {
		v, ok := w.read(x, i, rk)
		return te.Sum(guard(v, ok, 0), rv...)
	})
	return []*te.Tensor{te.Compute("avgpool", outShape, func(i []loopir.Expr) loopir.Expr {
		var cnt loopir.Expr = i64(1)
		for d := range w.In {
			c := i64(w.Kernel[d])
			if w.Guarded(d) {
				if include {
					c = w.Taps(d, i[2+d], i64(-w.PadBegin[d]), add(w.inExt(d), i64(w.CountEnd[d])))
				} else {
					c = w.Taps(d, i[2+d], i64(0), w.inExt(d))
				}
			}
			cnt = mul(cnt, c)
		}
		cnt = loopir.Bin(loopir.Max, cnt, i64(1))
		return te.Div(sum.At(i...), te.Cast(dt, cnt))
	})}, nil
}

// maxPoolIndices is MaxPool with its Indices output: one pair reduction over the
// flattened window finds the first largest tap; its flat input offset (row-major over
// N, C and the spatial axes, or column-major over the spatial axes with storage_order
// 1) is the index.
func maxPoolIndices(x *te.Tensor, w PoolWindow, outShape []loopir.Expr, colMajor bool) (*te.Tensor, *te.Tensor, error) {
	ext, err := Extents(x)
	if err != nil {
		return nil, nil, err
	}
	taps := int64(1)
	for _, k := range w.Kernel {
		taps *= k
	}
	// tap q of the flat window, split per spatial axis
	split := func(q loopir.Expr) []loopir.Expr {
		out := make([]loopir.Expr, len(w.Kernel))
		inner := int64(1)
		for d := len(w.Kernel) - 1; d >= 0; d-- {
			out[d] = loopir.Bin(loopir.Mod, div(q, i64(inner)), i64(w.Kernel[d]))
			inner *= w.Kernel[d]
		}
		return out
	}
	rq := te.RAxis("q", i64(taps))
	best, value := te.ArgMax("maxpool_arg", outShape, rq, func(i []loopir.Expr) loopir.Expr {
		v, ok := w.read(x, i, split(rq.Var))
		if ok == nil {
			return v
		}
		return te.Select(ok, v, loopir.Float(math.Inf(-1), x.DT))
	})
	spatial := int64(1)
	for _, e := range ext[2:] {
		spatial *= e
	}
	idx := te.Compute("maxpool_indices", outShape, func(i []loopir.Expr) loopir.Expr {
		k := split(best.At(i...))
		off := mul(add(mul(i[0], i64(ext[1])), i[1]), i64(spatial))
		stride := int64(1)
		for s := range w.In {
			d := len(w.In) - 1 - s // row-major: last axis fastest
			if colMajor {
				d = s
			}
			off = add(off, mul(w.Pos(d, i[2+d], k[d]), i64(stride)))
			stride *= w.In[d]
		}
		return off
	})
	return value, idx, nil
}
