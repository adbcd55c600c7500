package kernels

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
)

// Reshapes between extents that are not all constants. Every extent may be any value at
// run time, 0 and 1 included: axes are matched in groups whose products are provably
// equal (product), and what cannot be matched goes through the row-major linear
// position, split with div/mod by the run-time extents.

// reshapeExprs copies x into a tensor of the given extents in row-major order: the
// static path (reshapeTo) when everything is constant, else the symbolic one.
func reshapeExprs(name string, x *te.Tensor, shape []loopir.Expr) ([]*te.Tensor, error) {
	if isStatic(x.Shape) && isStatic(shape) {
		ext := make([]int64, len(shape))
		for k, e := range shape {
			ext[k] = e.(*loopir.IntImm).V
		}
		return reshapeTo(name, x, ext)
	}
	for _, e := range shape {
		if c, ok := e.(*loopir.IntImm); ok && c.V < 0 {
			return nil, Unsupported("%s to extent %d", name, c.V)
		}
	}
	from := x.Shape
	same := productOfAll(from).equal(productOfAll(shape))
	out := injCopy(name, x, shape, func(i []loopir.Expr) []loopir.Expr {
		return reshapeIndexSym(from, shape, i, same)
	})
	return []*te.Tensor{out}, nil
}

// reshapeIndexSym maps an index of a tensor of extents to into the index of the same
// row-major element in a tensor of extents from. Constant extent-1 axes read 0; the
// others are matched in groups of provably equal products (a group grows on the side
// whose product divides the other's), so that axes that only move or merge cost no
// division; when no such grouping exists, the whole index is linearized and split.
// same says the element counts are provably equal; otherwise the outermost source index
// is clamped, so that even extents that disagree at run time read in bounds.
func reshapeIndexSym(from, to []loopir.Expr, i []loopir.Expr, same bool) []loopir.Expr {
	src := zeros(len(from))
	var fa, ta []int // axes that are not a constant 1
	for a, e := range from {
		if !isOne(e) {
			fa = append(fa, a)
		}
	}
	for a, e := range to {
		if c, ok := e.(*loopir.IntImm); ok && c.V == 0 {
			return src // empty: no element is ever read
		}
		if !isOne(e) {
			ta = append(ta, a)
		}
	}
	if same {
		if groups, ok := reshapeGroups(from, to, fa, ta); ok {
			for _, g := range groups {
				delinearize(src, from, g.from, linearize(to, g.to, i), false)
			}
			return src
		}
	}
	delinearize(src, from, fa, linearize(to, ta, i), !same)
	return src
}

// reshapeGroup is a run of source axes and a run of target axes of equal products.
type reshapeGroup struct{ from, to []int }

// reshapeGroups splits the axes into groups of provably equal products, or reports
// that it cannot.
func reshapeGroups(from, to []loopir.Expr, fa, ta []int) ([]reshapeGroup, bool) {
	var out []reshapeGroup
	for f, t := 0, 0; f < len(fa) || t < len(ta); {
		f0, t0 := f, t
		pf, pt := product{coef: 1}, product{coef: 1}
		for f == f0 || t == t0 || !pf.equal(pt) {
			_, fDivides := pt.over(pf)
			_, tDivides := pf.over(pt)
			switch {
			case f < len(fa) && (f == f0 || (t > t0 && fDivides && !tDivides)):
				pf = pf.times(productOf(from[fa[f]]))
				f++
			case t < len(ta) && (t == t0 || tDivides):
				pt = pt.times(productOf(to[ta[t]]))
				t++
			default:
				return nil, false
			}
		}
		out = append(out, reshapeGroup{fa[f0:f], ta[t0:t]})
	}
	return out, true
}

// linearize is the row-major position of index i over the listed axes of ext.
func linearize(ext []loopir.Expr, axes []int, i []loopir.Expr) loopir.Expr {
	lin := loopir.Expr(i64(0))
	for _, a := range axes {
		lin = add(mul(lin, ext[a]), i[a])
	}
	return lin
}

// delinearize splits the row-major position lin over the listed axes of ext into src:
// the outermost axis takes the quotient (clamped into the axis when clamp is set), the
// others a quotient modulo their extent.
func delinearize(src, ext []loopir.Expr, axes []int, lin loopir.Expr, clamp bool) {
	stride := loopir.Expr(i64(1))
	for k := len(axes) - 1; k >= 0; k-- {
		a := axes[k]
		v := safeDiv(loopir.Div, lin, stride)
		if k > 0 {
			v = safeDiv(loopir.Mod, v, ext[a])
		} else if clamp {
			v = injClamp(v, ext[a])
		}
		src[a] = v
		stride = mul(stride, ext[a])
	}
}

// reshapeTarget resolves a Reshape's constant target against symbolic input extents: 0
// copies the input extent (unless allowZero), -1 is the quotient of the element counts
// when it is provably exact; ok is false when it is not.
func reshapeTarget(from []loopir.Expr, target []int64, allowZero bool) ([]loopir.Expr, bool, error) {
	shape := make([]loopir.Expr, len(target))
	infer, known := -1, product{coef: 1}
	for k, v := range target {
		switch {
		case v == 0 && !allowZero:
			if k >= len(from) {
				return nil, false, Unsupported("Reshape entry %d is 0 beyond the input rank %d", k, len(from))
			}
			shape[k] = from[k]
		case v == -1:
			if infer >= 0 {
				return nil, false, Unsupported("Reshape shape %v has two -1 entries", target)
			}
			infer = k
			continue
		case v < 0:
			return nil, false, Unsupported("Reshape extent %d", v)
		default:
			shape[k] = i64(v)
		}
		known = known.times(productOf(shape[k]))
	}
	if infer >= 0 {
		q, ok := productOfAll(from).over(known)
		if !ok {
			return nil, false, nil
		}
		shape[infer] = q.expr()
	}
	return shape, true, nil
}

// expandIndex reads x for the element i of its broadcast to shape: a constant extent 1
// reads 0, an extent that is the result's own reads i, and any other (a symbolic extent,
// which may be 1 or the result's at run time) reads min(i, extent-1), which is both.
func expandIndex(x *te.Tensor, shape, i []loopir.Expr) []loopir.Expr {
	off := len(i) - len(x.Shape)
	src := make([]loopir.Expr, len(x.Shape))
	for j, e := range x.Shape {
		switch {
		case isOne(e):
			src[j] = i64(0)
		case productOf(e).equal(productOf(shape[off+j])):
			src[j] = i[off+j]
		default:
			src[j] = loopir.Bin(loopir.Min, i[off+j], sub(e, i64(1)))
		}
	}
	return src
}
