package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// computeMaxUnpool scatters x [N, C, d...] to the positions its indices I (same shape,
// flat over the whole default unpooled tensor, as MaxPool returns them) name, 0
// elsewhere; an explicit output_shape (a constant, or extents known over the symbols,
// as Shape of the pooled tensor gives them) only adds room, each index re-raveled into
// it: one smaller than the default is refused, or fails the kernel when only the run
// time tells.
// Written as a gather: output position o reads the inputs whose pooling window covers
// o (at most ⌈k/s⌉ per spatial axis), the last in row-major order whose index is o
// winning, as the reference's scatter writes them in order. An index outside the
// window of its input (which MaxPool never produces, and the gather would not find)
// fails the kernel with that index; so does one outside the default tensor.
func computeMaxUnpool(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	a := attrs[graph.MaxUnpoolAttrs](n)
	x, ind := in[0].T, in[1].T
	if !plainNumeric(x.DT) || !ind.DT.IsInt() {
		return nil, Unsupported("%v on %v with %v indices", n.Op, x.DT, ind.DT)
	}
	xe, err := Extents(x)
	if err != nil {
		return nil, err
	}
	ie, err := Extents(ind)
	if err != nil {
		return nil, err
	}
	sp := len(xe) - 2
	if sp < 1 || len(ie) != len(xe) || len(a.KernelShape) != sp {
		return nil, Unsupported("%v on %v with indices %v and kernel_shape %v", n.Op, xe, ie, a.KernelShape)
	}
	for k := range xe {
		if xe[k] != ie[k] {
			return nil, Unsupported("%v on %v with indices %v", n.Op, xe, ie)
		}
	}
	// the default unpooled extents, and the output's
	kern, stride, padLo := make([]int64, sp), make([]int64, sp), make([]int64, sp)
	def := append([]int64{}, xe...)
	for d := 0; d < sp; d++ {
		kern[d], stride[d] = a.KernelShape[d], graph.AttrOr(a.Strides, d, 1)
		padLo[d] = graph.AttrOr(a.Pads, d, 0)
		padHi := graph.AttrOr(a.Pads, d+sp, 0)
		if padLo[d] >= kern[d] || padHi >= kern[d] {
			return nil, Unsupported("%v with pads %v for kernel_shape %v", n.Op, a.Pads, a.KernelShape)
		}
		def[2+d] = (xe[2+d]-1)*stride[d] + kern[d] - padLo[d] - padHi
	}
	out := Static(def...)
	// outOK is the run-time condition that a symbolic output extent is at least the
	// default one (nil when every extent is known to be)
	var outOK loopir.Expr
	if len(in) > 2 && in[2].Present() {
		s, ok := knownInts(n, in, 2)
		if !ok {
			return nil, Unsupported("%v with an output_shape known only at run time (the output's extents depend on data)", n.Op)
		}
		if len(s) != len(def) || !einsumSameExtent(s[0], i64(def[0])) || !einsumSameExtent(s[1], i64(def[1])) {
			return nil, Unsupported("%v with output_shape %v for default %v", n.Op, s, def)
		}
		for d := 2; d < len(s); d++ {
			c, static := s[d].(*loopir.IntImm)
			switch {
			case static && c.V < def[d]:
				return nil, Unsupported("%v with output_shape %v smaller than the default %v", n.Op, s, def)
			case !static:
				ge := loopir.Bin(loopir.GE, s[d], i64(def[d]))
				if outOK == nil {
					outOK = ge
				} else {
					outOK = loopir.Bin(loopir.And, outOK, ge)
				}
			}
		}
		out = s
	}
	defInner := int64(1)
	for _, e := range def[2:] {
		defInner *= e
	}
	inInner := int64(1)
	for _, e := range xe[2:] {
		inInner *= e
	}
	channels := xe[1]
	taps := make([]loopir.IterVar, sp)
	for d := range taps {
		taps[d] = te.RAxis("unpool_t", i64((kern[d]+stride[d]-1)/stride[d]))
	}
	// best is the flat in-plane position of the input that writes o, or -1
	best := te.Compute("unpool_src", out, func(i []loopir.Expr) loopir.Expr {
		plane := add(mul(i[0], i64(channels)), i[1])
		inDef := loopir.Expr(nil)
		var target, flatQ loopir.Expr = i64(0), i64(0)
		q := make([]loopir.Expr, sp)
		candOK := loopir.Expr(nil)
		for d := 0; d < sp; d++ {
			o := i[2+d]
			and := func(acc, c loopir.Expr) loopir.Expr {
				if acc == nil {
					return c
				}
				return loopir.Bin(loopir.And, acc, c)
			}
			inDef = and(inDef, loopir.Bin(loopir.LT, o, i64(def[2+d])))
			target = add(mul(target, i64(def[2+d])), o)
			qd := sub(div(add(o, i64(padLo[d])), i64(stride[d])), taps[d].Var)
			candOK = and(candOK, inside(qd, i64(xe[2+d])))
			q[d] = nnClamp(qd, xe[2+d])
			flatQ = add(mul(flatQ, i64(xe[2+d])), q[d])
		}
		target = add(mul(plane, i64(defInner)), target)
		idx := append([]loopir.Expr{i[0], i[1]}, q...)
		p := te.Cast(tensor.Int64, ind.At(idx...))
		p = add(p, unpoolCheck(p, plane, q, def, kern, stride, padLo, defInner))
		if outOK != nil {
			// an output smaller than the default would lose the indices past it
			p = add(p, te.CheckedIndex(te.Select(outOK, i64(0), i64(-1)), te.Select(outOK, i64(1), i64(0))))
		}
		hit := loopir.Bin(loopir.And, loopir.Bin(loopir.And, inDef, candOK), loopir.Bin(loopir.EQ, p, target))
		return te.Max(te.Select(hit, flatQ, i64(-1)), taps...)
	})
	zero := &loopir.IntImm{V: 0, DT: x.DT}
	var zeroV loopir.Expr = zero
	if x.DT.IsFloat() {
		zeroV = loopir.Float(0, x.DT)
	}
	return []*te.Tensor{te.Compute("maxunpool", out, func(i []loopir.Expr) loopir.Expr {
		b := best.At(i...)
		safe := loopir.Bin(loopir.Max, b, i64(0))
		idx := []loopir.Expr{i[0], i[1]}
		rest := inInner
		for d := 0; d < sp; d++ {
			rest /= xe[2+d]
			idx = append(idx, loopir.Bin(loopir.Mod, div(safe, i64(rest)), i64(xe[2+d])))
		}
		return te.Select(loopir.Bin(loopir.GE, b, i64(0)), x.At(idx...), zeroV)
	})}, nil
}

// unpoolCheck is 0, and fails the kernel with index p unless p lies in plane's part of
// the default tensor inside the pooling window of input position q.
func unpoolCheck(p, plane loopir.Expr, q []loopir.Expr, def, kern, stride, padLo []int64, defInner int64) loopir.Expr {
	within := sub(p, mul(plane, i64(defInner)))
	ok := inside(within, i64(defInner))
	rest := defInner
	for d := range q {
		rest /= def[2+d]
		c := loopir.Bin(loopir.Mod, div(within, i64(rest)), i64(def[2+d]))
		lo := sub(mul(q[d], i64(stride[d])), i64(padLo[d]))
		ok = loopir.Bin(loopir.And, ok, inside(sub(c, lo), i64(kern[d])))
	}
	return te.CheckedIndex(te.Select(ok, i64(0), p), te.Select(ok, i64(1), i64(0)))
}
