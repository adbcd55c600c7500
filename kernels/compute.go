package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

func i64(v int64) loopir.Expr { return loopir.Int(v) }

func add(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Add, a, b) }
func sub(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Sub, a, b) }
func mul(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Mul, a, b) }
func div(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Div, a, b) }

// inside reports 0 <= x < n.
func inside(x, n loopir.Expr) loopir.Expr {
	return loopir.Bin(loopir.And, loopir.Bin(loopir.GE, x, i64(0)), loopir.Bin(loopir.LT, x, n))
}

// clampIndex clamps v into [0, n) (a read that a Select discards stays in bounds).
func clampIndex(v loopir.Expr, n int64) loopir.Expr {
	return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, v, i64(n-1)), i64(0))
}

// MatMul: C[m, n] = sum_k A[m, k] * B[k, n].
func MatMul(a, b *te.Tensor) *te.Tensor {
	k := te.RAxis("k", a.Shape[1])
	return te.Compute("matmul", []loopir.Expr{a.Shape[0], b.Shape[1]}, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(a.At(i[0], k.Var), b.At(k.Var, i[1])), k)
	})
}

// Conv2DAttrs are the static attributes of a 2-D convolution.
type Conv2DAttrs struct {
	Strides, Pads, Dilations [2]int64 // pads are symmetric (top/left = bottom/right)
	Groups                   int64
}

// Conv2D is an NCHW convolution with OIHW weights. The spatial extents must be static;
// the batch may be symbolic.
func Conv2D(x, w *te.Tensor, a Conv2DAttrs) (*te.Tensor, error) {
	var ext [6]int64
	for i, e := range []loopir.Expr{x.Shape[1], x.Shape[2], x.Shape[3], w.Shape[0], w.Shape[2], w.Shape[3]} {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			return nil, fmt.Errorf("conv2d: channel and spatial extents must be static")
		}
		ext[i] = c.V
	}
	c, h, wd, m, kh, kw := ext[0], ext[1], ext[2], ext[3], ext[4], ext[5]
	g := max(a.Groups, 1)
	if c%g != 0 || m%g != 0 {
		return nil, fmt.Errorf("conv2d: %d channels, %d filters do not divide into %d groups", c, m, g)
	}
	oh := (h+2*a.Pads[0]-a.Dilations[0]*(kh-1)-1)/a.Strides[0] + 1
	ow := (wd+2*a.Pads[1]-a.Dilations[1]*(kw-1)-1)/a.Strides[1] + 1
	cg, mg := c/g, m/g
	// the padded input, read through a guard
	padded := te.Compute("pad", []loopir.Expr{x.Shape[0], i64(c), i64(h + 2*a.Pads[0]), i64(wd + 2*a.Pads[1])}, func(i []loopir.Expr) loopir.Expr {
		y, xx := sub(i[2], i64(a.Pads[0])), sub(i[3], i64(a.Pads[1]))
		cond := loopir.Bin(loopir.And, inside(y, i64(h)), inside(xx, i64(wd)))
		safeY := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, y, i64(h-1)), i64(0))
		safeX := loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, xx, i64(wd-1)), i64(0))
		return te.Select(cond, x.At(i[0], i[1], safeY, safeX), loopir.Float(0, x.DT))
	})
	rc, ry, rx := te.RAxis("rc", i64(cg)), te.RAxis("ry", i64(kh)), te.RAxis("rx", i64(kw))
	out := te.Compute("conv", []loopir.Expr{x.Shape[0], i64(m), i64(oh), i64(ow)}, func(i []loopir.Expr) loopir.Expr {
		ch := add(mul(div(i[1], i64(mg)), i64(cg)), rc.Var)
		y := add(mul(i[2], i64(a.Strides[0])), mul(ry.Var, i64(a.Dilations[0])))
		xx := add(mul(i[3], i64(a.Strides[1])), mul(rx.Var, i64(a.Dilations[1])))
		return te.Sum(te.Mul(padded.At(i[0], ch, y, xx), w.At(i[1], rc.Var, ry.Var, rx.Var)), rc, ry, rx)
	})
	return out, nil
}

// Pool2D is max or average pooling (average excludes padding) over static spatial dims.
func Pool2D(x *te.Tensor, kernel, strides, pads [2]int64, isMax bool) (*te.Tensor, error) {
	h, ok1 := x.Shape[2].(*loopir.IntImm)
	w, ok2 := x.Shape[3].(*loopir.IntImm)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("pool2d: spatial extents must be static")
	}
	oh := (h.V+2*pads[0]-kernel[0])/strides[0] + 1
	ow := (w.V+2*pads[1]-kernel[1])/strides[1] + 1
	ry, rx := te.RAxis("ry", i64(kernel[0])), te.RAxis("rx", i64(kernel[1]))
	shape := []loopir.Expr{x.Shape[0], x.Shape[1], i64(oh), i64(ow)}
	pos := func(i []loopir.Expr) (loopir.Expr, loopir.Expr, loopir.Expr) {
		y := sub(add(mul(i[2], i64(strides[0])), ry.Var), i64(pads[0]))
		xx := sub(add(mul(i[3], i64(strides[1])), rx.Var), i64(pads[1]))
		return y, xx, loopir.Bin(loopir.And, inside(y, i64(h.V)), inside(xx, i64(w.V)))
	}
	clamp := func(v loopir.Expr, n int64) loopir.Expr {
		return loopir.Bin(loopir.Max, loopir.Bin(loopir.Min, v, i64(n-1)), i64(0))
	}
	if isMax {
		return te.Compute("maxpool", shape, func(i []loopir.Expr) loopir.Expr {
			y, xx, ok := pos(i)
			v := te.Select(ok, x.At(i[0], i[1], clamp(y, h.V), clamp(xx, w.V)), loopir.Float(-1.0/zero, x.DT))
			return te.Max(v, ry, rx)
		}), nil
	}
	sum := te.Compute("poolsum", shape, func(i []loopir.Expr) loopir.Expr {
		y, xx, ok := pos(i)
		return te.Sum(te.Select(ok, x.At(i[0], i[1], clamp(y, h.V), clamp(xx, w.V)), loopir.Float(0, x.DT)), ry, rx)
	})
	cnt := te.Compute("poolcount", shape, func(i []loopir.Expr) loopir.Expr {
		_, _, ok := pos(i)
		return te.Sum(te.Select(ok, loopir.Float(1, x.DT), loopir.Float(0, x.DT)), ry, rx)
	})
	return te.Compute("avgpool", shape, func(i []loopir.Expr) loopir.Expr {
		return te.Div(sum.At(i...), cnt.At(i...))
	}), nil
}

var zero = 0.0

// lastAxis splits a shape into its leading extents and the last one.
func lastAxis(x *te.Tensor) ([]loopir.Expr, loopir.Expr) {
	return x.Shape[:len(x.Shape)-1], x.Shape[len(x.Shape)-1]
}

func withLast(i []loopir.Expr, last loopir.Expr) []loopir.Expr {
	return append(append([]loopir.Expr{}, i...), last)
}

// Softmax over the last axis, with the max subtracted for stability.
func Softmax(x *te.Tensor) *te.Tensor {
	lead, n := lastAxis(x)
	r := te.RAxis("k", n)
	mx := te.Compute("smax", lead, func(i []loopir.Expr) loopir.Expr { return te.Max(x.At(withLast(i, r.Var)...), r) })
	e := te.Compute("sexp", x.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Exp(te.Sub(x.At(i...), mx.At(i[:len(i)-1]...)))
	})
	r2 := te.RAxis("k2", n)
	sum := te.Compute("ssum", lead, func(i []loopir.Expr) loopir.Expr { return te.Sum(e.At(withLast(i, r2.Var)...), r2) })
	return te.Compute("softmax", x.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Div(e.At(i...), sum.At(i[:len(i)-1]...))
	})
}

// LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta.
func LayerNorm(x, gamma, beta *te.Tensor, eps float64) *te.Tensor {
	lead, n := lastAxis(x)
	count := &loopir.Cast{To: x.DT, X: n}
	r := te.RAxis("k", n)
	mean := te.Compute("mean", lead, func(i []loopir.Expr) loopir.Expr {
		return te.Sum(te.Div(x.At(withLast(i, r.Var)...), count), r)
	})
	r2 := te.RAxis("k2", n)
	variance := te.Compute("var", lead, func(i []loopir.Expr) loopir.Expr {
		d := te.Sub(x.At(withLast(i, r2.Var)...), mean.At(i...))
		return te.Sum(te.Div(te.Mul(d, d), count), r2)
	})
	return te.Compute("layernorm", x.Shape, func(i []loopir.Expr) loopir.Expr {
		lead := i[:len(i)-1]
		inv := te.Div(loopir.Float(1, x.DT), te.Sqrt(te.Add(variance.At(lead...), loopir.Float(eps, x.DT))))
		return te.Add(te.Mul(te.Mul(te.Sub(x.At(i...), mean.At(lead...)), inv), gamma.At(i[len(i)-1])), beta.At(i[len(i)-1]))
	})
}

// ReduceLast sums (or takes the max of) the last axis.
func ReduceLast(x *te.Tensor, isMax bool) *te.Tensor {
	lead, n := lastAxis(x)
	r := te.RAxis("k", n)
	return te.Compute("reduce", lead, func(i []loopir.Expr) loopir.Expr {
		if isMax {
			return te.Max(x.At(withLast(i, r.Var)...), r)
		}
		return te.Sum(x.At(withLast(i, r.Var)...), r)
	})
}

// BatchMatMul multiplies the last two axes of rank-3 tensors over a shared batch axis:
// C[b, m, n] = sum_k A'[b, m, k] * B'[b, k, n], where A' and B' are A and B with their
// last two axes swapped when transA / transB is set.
func BatchMatMul(a, b *te.Tensor, transA, transB bool) *te.Tensor {
	m, k := a.Shape[1], a.Shape[2]
	if transA {
		m, k = k, m
	}
	n := b.Shape[2]
	if transB {
		n = b.Shape[1]
	}
	r := te.RAxis("k", k)
	return te.Compute("batch_matmul", []loopir.Expr{a.Shape[0], m, n}, func(i []loopir.Expr) loopir.Expr {
		av := a.At(i[0], i[1], r.Var)
		if transA {
			av = a.At(i[0], r.Var, i[1])
		}
		bv := b.At(i[0], r.Var, i[2])
		if transB {
			bv = b.At(i[0], i[2], r.Var)
		}
		return te.Sum(te.Mul(av, bv), r)
	})
}
