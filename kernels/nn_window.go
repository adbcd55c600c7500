package kernels

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// A sliding-window product, the shape shared by Conv and ConvTranspose:
//
//	out[n, m, o...] = Σ_{rc < channels, j...} x[n, xChan(m, rc), xi(o, j)...] · w[wLead(m, rc)..., wk(o, j)...]
//
// where each spatial axis says, for an output index o and a tap j, which input and
// weight indices it reads and under which extra condition. Input reads that can leave
// the input are guarded (a Select yielding zero) and read at clamped indices.

// tapAxis is one spatial axis of a window product.
type tapAxis struct {
	taps int64       // reduction extent of the axis
	in   int64       // input extent
	inE  loopir.Expr // or, when not nil, the symbolic input extent (in is then -1)
	// at gives the input index (unclamped), the weight index (in range whenever cond
	// holds, and clamped into range otherwise) and an extra condition (nil: none) for
	// output index o and tap j, where j is at most jhi.
	at func(o, j loopir.Expr, jhi int64) (xi, wk, cond loopir.Expr)
	// xRange bounds the input index over every output index and taps in [jlo, jhi].
	xRange func(jlo, jhi int64) (lo, hi int64)
}

// windowProduct is a sliding-window product over x and w.
type windowProduct struct {
	x, w     *te.Tensor
	channels int64 // channels reduced per output channel
	axes     []tapAxis
	xChan    func(m, rc loopir.Expr) loopir.Expr
	wLead    func(m, rc loopir.Expr) []loopir.Expr
	// guardProduct puts the guard around the product (taps outside the input do not
	// contribute at all) rather than around the input read (they read zero).
	guardProduct bool
}

// term is the product for output index i (n, m, o...), reduced channel rc and taps j,
// where taps[d] ranges over [lo[d], hi[d]] (equal for a constant tap).
func (p *windowProduct) term(i []loopir.Expr, rc loopir.Expr, j []loopir.Expr, lo, hi []int64) loopir.Expr {
	xIdx := []loopir.Expr{i[0], p.xChan(i[1], rc)}
	wIdx := p.wLead(i[1], rc)
	var cond loopir.Expr
	for d, ax := range p.axes {
		xi, wk, c := ax.at(i[2+d], j[d], hi[d])
		cond = nnAnd(cond, c)
		xlo, xhi := ax.xRange(lo[d], hi[d])
		if ax.inE != nil { // any extent, 0 included: guarded above, clamped both ways
			if xlo < 0 {
				cond = nnAnd(cond, loopir.Bin(loopir.GE, xi, i64(0)))
			}
			cond = nnAnd(cond, loopir.Bin(loopir.LT, xi, ax.inE))
			xIdx = append(xIdx, injClamp(xi, ax.inE))
			wIdx = append(wIdx, wk)
			continue
		}
		if xlo < 0 {
			cond = nnAnd(cond, loopir.Bin(loopir.GE, xi, i64(0)))
		}
		if xhi >= ax.in {
			cond = nnAnd(cond, loopir.Bin(loopir.LT, xi, i64(ax.in)))
		}
		switch {
		case xlo < 0 && xhi >= ax.in:
			xi = nnClamp(xi, ax.in)
		case xlo < 0:
			xi = loopir.Bin(loopir.Max, xi, i64(0))
		case xhi >= ax.in:
			xi = loopir.Bin(loopir.Min, xi, i64(ax.in-1))
		}
		xIdx = append(xIdx, xi)
		wIdx = append(wIdx, wk)
	}
	xv, wv := p.x.At(xIdx...), p.w.At(wIdx...)
	switch {
	case cond == nil:
		return te.Mul(xv, wv)
	case p.guardProduct:
		return te.Select(cond, te.Mul(xv, wv), lit(0, xv))
	}
	return te.Mul(te.Select(cond, xv, lit(0, xv)), wv)
}

// compute builds the product over shape [n, m, o...]. The whole window is written out
// as an explicit sum when it has at most unrollLimit terms (the block is spatial and
// vectorizes). Otherwise reduction loops run around an explicit sum of at most
// chunkLimit terms: when the spatial window fits, over chunks of channels (a divisor
// of the channel count); when it does not, over the channels and the leading spatial
// axes, the trailing ones that fit written out. The guards of written-out taps are
// decided per tap, and each iteration of the innermost reduction does several
// multiply-adds.
func (p *windowProduct) compute(name string, shape []loopir.Expr) *te.Tensor {
	sp := len(p.axes)
	taps := make([]int64, sp)
	for d, ax := range p.axes {
		taps[d] = ax.taps
	}
	u := 0 // spatial axes [0, u) are loops, [u, sp) written out
	full := p.channels*nnProd(taps) <= unrollLimit
	for !full && u < sp && nnProd(taps[u:]) > chunkLimit {
		u++
	}
	chunk := p.channels // channels written out per iteration of the channel loop
	if !full && u > 0 {
		chunk = 1
	} else if !full {
		chunk = chunkOf(p.channels, chunkLimit/nnProd(taps))
	}
	return te.Compute(name, shape, func(i []loopir.Expr) loopir.Expr {
		var axes []loopir.IterVar
		base := loopir.Expr(i64(0))
		if p.channels > chunk {
			r := te.RAxis("rc", i64(p.channels/chunk))
			axes, base = append(axes, r), mul(r.Var, i64(chunk))
		}
		j := make([]loopir.Expr, sp)
		lo, hi := make([]int64, sp), make([]int64, sp)
		for d := range u {
			j[d], hi[d] = i64(0), taps[d]-1
			if taps[d] > 1 {
				r := te.RAxis(fmt.Sprintf("rk%d", d), i64(taps[d]))
				axes, j[d] = append(axes, r), r.Var
			}
		}
		var terms []loopir.Expr
		for c := range chunk {
			for kp := range nnProd(taps[u:]) {
				k := nnUnravel(kp, taps[u:])
				for d := u; d < sp; d++ {
					j[d], lo[d], hi[d] = i64(k[d-u]), k[d-u], k[d-u]
				}
				terms = append(terms, p.term(i, add(base, i64(c)), j, lo, hi))
			}
		}
		if len(terms) == 0 {
			return lit(0, p.x.At(zeros(len(p.x.Shape))...))
		}
		if len(axes) == 0 {
			return nnSum(terms)
		}
		return te.Sum(nnSum(terms), axes...)
	})
}

// chunkOf is the largest divisor of n that is at most limit (at least 1).
func chunkOf(n, limit int64) int64 {
	for c := min(n, limit); c > 1; c-- {
		if n%c == 0 {
			return c
		}
	}
	return 1
}

// addBias adds b[m] to a [n, m, ...] tensor as a separate elementwise stage (nil: none).
func addBias(out, b *te.Tensor) *te.Tensor {
	if b == nil {
		return out
	}
	return te.Compute(out.Name+"_bias", out.Shape, func(i []loopir.Expr) loopir.Expr {
		return te.Add(out.At(i...), b.At(i[1]))
	})
}
