package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// Slice and Pad with operands known only at run time. The output's extents are its
// type's, bound on the host by the op's shape function (vm.BuiltinShapeSlice,
// vm.BuiltinShapePad), which also refuses operands ONNX does not allow (an axis out of
// range or repeated, a step of 0, a pad cropping past the axis). The kernel reads the
// operands themselves (small 1-D tensors) to place its window: each element's source
// index is computed from them with the clamps the shape function applies, so the
// window the kernel reads is the one the extents were computed for.

// operandAt is element k of the 1-D integer input i as an int64 expression: a constant's
// literal, a value known over the symbols, or a read of the tensor; def when input i is
// absent.
func operandAt(n *graph.Node, in []Input, i, k int, def loopir.Expr) loopir.Expr {
	if i >= len(in) || !in[i].Present() {
		return def
	}
	if v, ok := knownInts(n, in, i); ok && k < len(v) {
		return v[k]
	}
	return asType(tensor.Int64, in[i].T.At(i64(int64(k))))
}

// staticLen1 is the static length of the 1-D input i.
func staticLen1(in []Input, i int) (int, bool) {
	if i >= len(in) || !in[i].Present() || len(in[i].T.Shape) != 1 {
		return 0, false
	}
	c, ok := in[i].T.Shape[0].(*loopir.IntImm)
	return int(c.V), ok && c.V <= 64
}

// normAxisExpr is an axis expression counted from the end when negative.
func normAxisExpr(a loopir.Expr, r int) loopir.Expr {
	if c, ok := a.(*loopir.IntImm); ok {
		if c.V < 0 {
			return i64(c.V + int64(r))
		}
		return a
	}
	return te.Select(loopir.Bin(loopir.LT, a, i64(0)), add(a, i64(int64(r))), a)
}

// axisIs is the condition "axis expression a names axis d": for a constant a, no
// condition but static (it does) or never (it does not).
func axisIs(a loopir.Expr, d int) (cond loopir.Expr, static, never bool) {
	if c, ok := a.(*loopir.IntImm); ok {
		return nil, c.V == int64(d), c.V != int64(d)
	}
	return loopir.Bin(loopir.EQ, a, i64(int64(d))), false, false
}

// pick is v where cond holds (always when static), else old.
func pick(cond loopir.Expr, static, never bool, v, old loopir.Expr) loopir.Expr {
	switch {
	case never:
		return old
	case static:
		return v
	}
	return te.Select(cond, v, old)
}

// runtimeSlice takes x[begin + i*step] where starts, axes or steps are read at run time.
func runtimeSlice(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	shape, ok := outputShape(n, 0, in, x)
	if !ok || len(shape) != r {
		return nil, Unsupported("Slice with run-time operands and no output type of the input's rank")
	}
	l, ok := staticLen1(in, 1)
	if !ok {
		return nil, Unsupported("Slice with run-time starts of no static length")
	}
	for _, i := range []int{2, 3, 4} {
		if i < len(in) && in[i].Present() {
			if m, ok := staticLen1(in, i); !ok || m != l {
				return nil, Unsupported("Slice with operand %d of another length than the starts", i)
			}
		}
	}
	begin, step := make([]loopir.Expr, r), make([]loopir.Expr, r)
	for d := range r {
		begin[d], step[d] = i64(0), i64(1)
		dim := x.Shape[d]
		for k := range l {
			cond, static, never := axisIs(normAxisExpr(operandAt(n, in, 3, k, i64(int64(k))), r), d)
			if never {
				continue
			}
			st := operandAt(n, in, 1, k, nil)
			sp := operandAt(n, in, 4, k, i64(1))
			var b loopir.Expr
			up := clampInto(st, dim, i64(0), dim)
			down := clampInto(st, dim, i64(-1), sub(dim, i64(1)))
			switch c, ok := sp.(*loopir.IntImm); {
			case ok && c.V > 0:
				b = up
			case ok:
				b = down
			default:
				b = te.Select(loopir.Bin(loopir.GT, sp, i64(0)), up, down)
			}
			begin[d] = pick(cond, static, never, b, begin[d])
			step[d] = pick(cond, static, never, sp, step[d])
		}
	}
	out := injCopy("slice", x, shape, func(i []loopir.Expr) []loopir.Expr {
		src := make([]loopir.Expr, r)
		for a := range src {
			src[a] = add(begin[a], mul(i[a], step[a]))
		}
		return src
	})
	return []*te.Tensor{out}, nil
}

// runtimePad pads x by pads (and axes) read at run time, or x of run-time extents by
// pads of any kind with zeros or a value (mode constant): the source index along each
// axis is the output's minus the axis's begin pad, then, by mode, checked to be inside
// (constant), clamped (edge) or mirrored (reflect).
func runtimePad(n *graph.Node, in []Input, mode string, fill loopir.Expr) ([]*te.Tensor, error) {
	x := in[0].T
	r := len(x.Shape)
	shape, ok := outputShape(n, 0, in, x)
	if !ok || len(shape) != r {
		return nil, Unsupported("Pad with run-time pads and no output type of the input's rank")
	}
	if !isStatic(x.Shape) && mode != "constant" {
		// an axis of run-time extent may be empty: edge and reflect would then read
		// outside it
		return nil, Unsupported("Pad mode %s of an input of run-time extents", mode)
	}
	for _, d := range x.Shape {
		if c, ok := d.(*loopir.IntImm); ok && c.V == 0 {
			if mode != "constant" {
				return nil, Unsupported("%s padding of an empty axis", mode)
			}
			// no input element exists: all padding
			return []*te.Tensor{te.Compute("pad", shape, func([]loopir.Expr) loopir.Expr { return fill })}, nil
		}
	}
	l, ok := staticLen1(in, 1)
	if !ok || l%2 != 0 {
		return nil, Unsupported("Pad with run-time pads of no static even length")
	}
	na := l / 2
	if len(in) > 3 && in[3].Present() {
		if m, ok := staticLen1(in, 3); !ok || m != na {
			return nil, Unsupported("Pad with run-time axes of another count than the pads")
		}
	} else if na != r {
		return nil, Unsupported("Pad with %d pads for rank %d", l, r)
	}
	begin := make([]loopir.Expr, r)
	for d := range r {
		begin[d] = i64(0)
		for k := range na {
			cond, static, never := axisIs(normAxisExpr(operandAt(n, in, 3, k, i64(int64(k))), r), d)
			begin[d] = pick(cond, static, never, operandAt(n, in, 1, k, nil), begin[d])
		}
	}
	out := te.Compute("pad", shape, func(i []loopir.Expr) loopir.Expr {
		src := make([]loopir.Expr, r)
		var inAll loopir.Expr
		for a := range src {
			p, d := sub(i[a], begin[a]), x.Shape[a]
			switch mode {
			case "constant":
				c := inside(p, d)
				if inAll == nil {
					inAll = c
				} else {
					inAll = loopir.Bin(loopir.And, inAll, c)
				}
				src[a] = injClamp(p, d)
			case "edge":
				src[a] = injClamp(p, d)
			case "reflect":
				src[a] = reflectExpr(p, d)
			}
		}
		v := x.At(src...)
		if inAll != nil {
			v = te.Select(inAll, v, fill)
		}
		return v
	})
	return []*te.Tensor{out}, nil
}

// reflectExpr mirrors p into [0, d) without repeating the border (period 2(d-1)), for
// an extent known at run time; an axis of extent 1 reads its one element.
func reflectExpr(p, d loopir.Expr) loopir.Expr {
	if c, ok := d.(*loopir.IntImm); ok {
		return injReflect(p, max(c.V, 1))
	}
	period := loopir.Bin(loopir.Max, mul(i64(2), sub(d, i64(1))), i64(1))
	q := loopir.Bin(loopir.Mod, p, period)
	m := te.Select(loopir.Bin(loopir.GE, q, d), sub(period, q), q)
	return te.Select(loopir.Bin(loopir.LE, d, i64(1)), i64(0), m)
}
