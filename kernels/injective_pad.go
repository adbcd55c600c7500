package kernels

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// injConst is element k (row-major) of a constant as a literal of type dt (0 when the
// constant has no such element).
func injConst(c *tensor.Tensor, k int, dt tensor.DType) loopir.Expr {
	if c == nil || c.Len() <= k {
		return lit(0, &loopir.IntImm{DT: dt})
	}
	c = c.Cast(dt)
	if dt.IsFloat() {
		return loopir.Float(c.Float64s()[k], dt)
	}
	return &loopir.IntImm{V: c.Int64s()[k], DT: dt}
}

// injScalar reads the first element of a run-time tensor, converted to dt.
func injScalar(t *te.Tensor, dt tensor.DType) loopir.Expr {
	v := t.At(zeros(len(t.Shape))...)
	if t.DT != dt {
		v = te.Cast(dt, v)
	}
	return v
}

// computePad pads (or, with negative pads, crops) x by the pads input 1 over all axes
// or the axes input 3 (constants here, else runtimePad). Modes: constant (the value is input 2, constant
// or read at run time, else zero), edge (repeat the border), reflect (mirror without
// repeating the border), wrap (opset 19: repeat the axis, as if it were a ring; an axis
// cropped at one end and padded at the other repeats what is left of it).
func computePad(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	x := in[0].T
	mode := attrs[graph.PadAttrs](n).Mode
	if mode != "constant" && mode != "edge" && mode != "reflect" && mode != "wrap" {
		return nil, Unsupported("Pad mode %q", mode)
	}
	from, err := Extents(x)
	if err != nil && mode != "constant" {
		return nil, err
	}
	r := len(x.Shape)
	var fill loopir.Expr
	if mode == "constant" {
		fill = lit(0, &loopir.IntImm{DT: x.DT})
		if len(in) > 2 && in[2].Present() {
			if in[2].Const != nil {
				fill = injConst(in[2].Const, 0, x.DT)
			} else if !injEmpty(in[2].T) {
				fill = injScalar(in[2].T, x.DT)
			}
		}
	}
	pads, ok := ConstInts(in, 1)
	if _, ok3 := ConstInts(in, 3); !ok || (len(in) > 3 && in[3].Present() && !ok3) || from == nil {
		// pads known at run time, or (mode constant) an input of symbolic extents:
		// each output index's source is computed, checked to be inside
		if mode == "wrap" {
			return nil, Unsupported("Pad mode wrap with pads or axes known only at run time")
		}
		return runtimePad(n, in, mode, fill)
	}
	axes := make([]int, r)
	for k := range axes {
		axes[k] = k
	}
	if len(in) > 3 && in[3].Present() {
		v, _ := ConstInts(in, 3)
		axes = axes[:0]
		for _, a := range v {
			ax, err := NormAxis(a, r)
			if err != nil {
				return nil, err
			}
			axes = append(axes, ax)
		}
	}
	if len(pads) != 2*len(axes) {
		return nil, Unsupported("Pad with %d pads for %d axes", len(pads), len(axes))
	}
	begin, end := make([]int64, r), make([]int64, r)
	for k, ax := range axes {
		begin[ax], end[ax] = pads[k], pads[k+len(axes)]
	}
	shape := make([]int64, r)
	empty := false
	for a := range shape {
		shape[a] = from[a] + begin[a] + end[a]
		if shape[a] < 0 {
			return nil, Unsupported("Pad %v makes axis %d negative", pads, a)
		}
		if from[a] == 0 {
			empty = true
			if mode != "constant" && shape[a] > 0 {
				return nil, Unsupported("%s padding of an empty axis", mode)
			}
		}
		if kept := from[a] - max(-begin[a], 0) - max(-end[a], 0); mode == "wrap" && kept <= 0 && shape[a] > 0 {
			return nil, Unsupported("wrap padding of axis %d cropped to nothing", a)
		}
	}
	out := te.Compute("pad", Static(shape...), func(i []loopir.Expr) loopir.Expr {
		if empty { // no input element exists: all padding (or no element at all)
			return fill
		}
		src := make([]loopir.Expr, r)
		var ok loopir.Expr
		for a := range src {
			p, d := sub(i[a], i64(begin[a])), i64(from[a])
			if begin[a] <= 0 && end[a] <= 0 { // cropped or untouched: always inside
				src[a] = p
				continue
			}
			switch mode {
			case "constant":
				in := inside(p, d)
				if ok == nil {
					ok = in
				} else {
					ok = loopir.Bin(loopir.And, ok, in)
				}
				src[a] = injClamp(p, d)
			case "edge":
				src[a] = injClamp(p, d)
			case "reflect":
				src[a] = injReflect(p, from[a])
			case "wrap":
				// the kept part [lo, lo+kept) repeats from the first kept element on
				lo := max(-begin[a], 0)
				kept := from[a] - lo - max(-end[a], 0)
				q := loopir.Bin(loopir.Mod, sub(i[a], i64(max(begin[a], 0))), i64(kept)) // floor modulo
				src[a] = loopir.Bin(loopir.Add, i64(lo), q)
			}
		}
		v := x.At(src...)
		if ok != nil {
			v = te.Select(ok, v, fill)
		}
		return v
	})
	return []*te.Tensor{out}, nil
}

// injReflect mirrors p into [0, d) without repeating the border: period 2(d-1).
func injReflect(p loopir.Expr, d int64) loopir.Expr {
	if d == 1 {
		return i64(0)
	}
	period := 2 * (d - 1)
	q := loopir.Bin(loopir.Mod, p, i64(period)) // floor modulo: in [0, period)
	return te.Select(loopir.Bin(loopir.GE, q, i64(d)), sub(i64(period), q), q)
}
