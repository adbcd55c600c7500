package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
)

// The recurrence of one direction: state set-up, the time loop with the LSTM, GRU and
// RNN cell equations (ONNX gate orders: LSTM iofc, peepholes iof; GRU zrh), and the
// final state.

func (r *rnnDir) lit(v float64) loopir.Expr { return loopir.Float(v, r.dt) }

func (r *rnnDir) add(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Add, a, b) }

func (r *rnnDir) mul(a, b loopir.Expr) loopir.Expr { return loopir.Bin(loopir.Mul, a, b) }

func (r *rnnDir) col(gate int64, k loopir.Expr) loopir.Expr {
	return loopir.Bin(loopir.Add, loopir.Int(gate*r.hid), k)
}

// clipped applies the clip attribute to a pre-activation.
func (r *rnnDir) clipped(v loopir.Expr) loopir.Expr {
	if r.clip <= 0 {
		return v
	}
	return loopir.Bin(loopir.Min, loopir.Bin(loopir.Max, v, r.lit(-r.clip)), r.lit(r.clip))
}

// pre is the pre-activation of gate column g: input projection (with biases) plus the
// recurrent product of this step.
func (r *rnnDir) pre(t, b, g loopir.Expr) loopir.Expr {
	return r.add(rnnLd(r.proj, t, b, g), rnnLd(r.gates, b, g))
}

// setGate stores activation i (f, g, h of this direction) of the clipped pre-activation
// into the gates slot (b, col).
func (r *rnnDir) setGate(b, col loopir.Expr, i int, pre loopir.Expr) loopir.Stmt {
	return r.activate(b, col, i, r.clipped(pre))
}

// activate stores activation i of x into the gates slot (b, col): x, then each stage
// of the activation applied to the slot (a stage repeats its argument, which is then a
// load, and perUnit gives each store its own loop).
func (r *rnnDir) activate(b, col loopir.Expr, i int, x loopir.Expr) loopir.Stmt {
	act := r.acts[r.d][i]
	s := loopir.Seq{rnnSt(r.gates, x, b, col)}
	if act.pre != nil {
		s = append(s, rnnSt(r.gates, act.pre(rnnLd(r.gates, b, col)), b, col))
	}
	return append(s, rnnSt(r.gates, act.post(rnnLd(r.gates, b, col)), b, col))
}

// initState loads initial_h/initial_c (or zeros) and, with sequence_lens, zeroes this
// direction's part of Y (steps past a sequence's end stay zero).
func (r *rnnDir) initState() loopir.Stmt {
	var s loopir.Seq
	for _, st := range []struct{ buf, init *loopir.Buffer }{{r.h, r.h0}, {r.c, r.c0}, {r.rh, nil}} {
		if st.buf == nil {
			continue
		}
		s = append(s, rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
			return rnnLoop("k", 0, r.hid, loopir.Vectorized, func(k loopir.Expr) loopir.Stmt {
				v := r.lit(0)
				if st.init != nil {
					v = rnnLd(st.init, r.stateIdx(b, k)...)
				}
				return rnnSt(st.buf, v, b, k)
			})
		}))
	}
	if r.lens != nil && r.y != nil {
		s = append(s, rnnLoopE("t", loopir.Int(0), r.seq, loopir.Serial, func(t loopir.Expr) loopir.Stmt {
			return rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
				return rnnLoop("k", 0, r.hid, loopir.Vectorized, func(k loopir.Expr) loopir.Stmt {
					return rnnSt(r.y, r.lit(0), r.yIdx(t, b, k)...)
				})
			})
		}))
	}
	return s
}

// finalState writes Y_h and Y_c.
func (r *rnnDir) finalState() loopir.Stmt {
	var s loopir.Seq
	for _, st := range []struct{ out, buf *loopir.Buffer }{{r.yh, r.h}, {r.yc, r.c}} {
		if st.out == nil {
			continue
		}
		if st.buf == nil {
			panic("BUG: RNN: Y_c requested from a layer without a cell state")
		}
		s = append(s, rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
			return rnnLoop("k", 0, r.hid, loopir.Vectorized, func(k loopir.Expr) loopir.Stmt {
				return rnnSt(st.out, rnnLd(st.buf, b, k), r.stateIdx(b, k)...)
			})
		}))
	}
	return s
}

// perUnit runs body(t, b, k) for every batch entry still inside its sequence at step s
// and every hidden unit k, t being the time index the step reads and writes. Each
// statement of the body gets its own loop over k (they only combine values of the same
// k, so the fission is exact): the C compiler vectorizes a loop whose clamp (a select)
// is stored directly, but not one where arithmetic follows a select, unless it may
// assume that floating-point operations do not trap (-fno-trapping-math).
func (r *rnnDir) perUnit(s loopir.Expr, body func(t, b, k loopir.Expr) loopir.Stmt) loopir.Stmt {
	probe := loopir.NewVar("probe")
	n := len(rnnFlatten(body(probe, probe, probe)))
	var out loopir.Seq
	for i := 0; i < n; i++ {
		out = append(out, rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
			t := r.timeAt(s, b)
			inner := rnnLoop("k", 0, r.hid, loopir.Vectorized, func(k loopir.Expr) loopir.Stmt { return rnnFlatten(body(t, b, k))[i] })
			if r.lens == nil {
				return inner
			}
			return &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, s, r.lenAt(b)), Then: inner}
		}))
	}
	return out
}

// rnnFlatten lists the statements of nested sequences in order.
func rnnFlatten(s loopir.Stmt) []loopir.Stmt {
	seq, ok := s.(loopir.Seq)
	if !ok {
		return []loopir.Stmt{s}
	}
	var out []loopir.Stmt
	for _, x := range seq {
		out = append(out, rnnFlatten(x)...)
	}
	return out
}

// steps is the serial time loop.
func (r *rnnDir) steps() loopir.Stmt {
	return rnnLoopE("s", loopir.Int(0), r.seq, loopir.Serial, func(s loopir.Expr) loopir.Stmt {
		cols := r.gh()
		if r.rh != nil {
			cols = 2 * r.hid // the h gate multiplies r ⊙ h, known only after r
		}
		step := loopir.Seq{r.recurrent(r.h, 0, cols)}
		switch r.op {
		case graph.OpLSTM:
			step = append(step, r.perUnit(s, r.lstmCell))
		case graph.OpGRU:
			if r.rh != nil {
				step = append(step, r.perUnit(s, func(t, b, k loopir.Expr) loopir.Stmt {
					rc := r.col(1, k)
					return loopir.Seq{r.setGate(b, rc, 0, r.pre(t, b, rc)), rnnSt(r.rh, r.mul(rnnLd(r.gates, b, rc), rnnLd(r.h, b, k)), b, k)}
				}))
				step = append(step, r.recurrent(r.rh, 2*r.hid, r.hid))
			}
			step = append(step, r.perUnit(s, r.gruCell))
		default:
			step = append(step, r.perUnit(s, func(t, b, k loopir.Expr) loopir.Stmt {
				return r.emit(t, b, k, r.setGate(b, k, 0, r.pre(t, b, k)), rnnSt(r.h, rnnLd(r.gates, b, k), b, k))
			}))
		}
		return step
	})
}

// emit appends the write of the new h into Y.
func (r *rnnDir) emit(t, b, k loopir.Expr, s ...loopir.Stmt) loopir.Stmt {
	if r.y != nil {
		s = append(s, rnnSt(r.y, rnnLd(r.h, b, k), r.yIdx(t, b, k)...))
	}
	return loopir.Seq(s)
}

// lstmCell: i = f(Wi x + Ri h + Pi⊙c + b), f likewise (or 1 - i with input_forget),
// c' = f⊙c + i⊙g(Wc x + Rc h + b), o = f(Wo x + Ro h + Po⊙c' + b), h' = o⊙h(c').
// Gate values are kept in their gates slots.
func (r *rnnDir) lstmCell(t, b, k loopir.Expr) loopir.Stmt {
	peep := func(gate int64, v loopir.Expr) loopir.Expr {
		if r.p == nil {
			return v
		}
		return r.add(v, r.mul(rnnLd(r.p, loopir.Int(r.d), r.col(gate, k)), rnnLd(r.c, b, k)))
	}
	ic, oc, fc, gc := k, r.col(1, k), r.col(2, k), r.col(3, k)
	slot := func(col loopir.Expr) loopir.Expr { return rnnLd(r.gates, b, col) }
	forget := r.setGate(b, fc, 0, peep(2, r.pre(t, b, fc)))
	if r.inputForget {
		forget = rnnSt(r.gates, loopir.Bin(loopir.Sub, r.lit(1), slot(ic)), b, fc)
	}
	c := rnnLd(r.c, b, k)
	return r.emit(t, b, k,
		r.setGate(b, ic, 0, peep(0, r.pre(t, b, ic))),
		forget,
		r.setGate(b, gc, 1, r.pre(t, b, gc)),
		rnnSt(r.c, r.add(r.mul(slot(fc), c), r.mul(slot(ic), slot(gc))), b, k),
		r.setGate(b, oc, 0, peep(1, r.pre(t, b, oc))),
		r.activate(b, gc, 2, c), // the g slot is free once c is updated
		rnnSt(r.h, r.mul(slot(oc), slot(gc)), b, k),
	)
}

// gruCell: z = f(Wz x + Rz h + b), ĥ = g(Wh x + r⊙(Rh h + Rbh) + Wbh) with
// linear_before_reset, g(Wh x + Rh (r⊙h) + Rbh + Wbh) without (that product is already
// in the h columns of gates), h' = (1-z)⊙ĥ + z⊙h. Gate values are kept in their slots.
func (r *rnnDir) gruCell(t, b, k loopir.Expr) loopir.Stmt {
	zc, rc, hc := k, r.col(1, k), r.col(2, k)
	slot := func(col loopir.Expr) loopir.Expr { return rnnLd(r.gates, b, col) }
	rec := slot(hc)
	if r.b != nil {
		rec = r.add(rec, rnnLd(r.b, loopir.Int(r.d), r.add(loopir.Int(r.gh()), hc)))
	}
	var s loopir.Seq
	if r.lbr {
		s = append(s, r.setGate(b, rc, 0, r.pre(t, b, rc)))
		rec = r.mul(slot(rc), rec)
	}
	s = append(s,
		r.setGate(b, zc, 0, r.pre(t, b, zc)),
		r.setGate(b, hc, 1, r.add(rnnLd(r.proj, t, b, hc), rec)),
		rnnSt(r.h, r.add(r.mul(loopir.Bin(loopir.Sub, r.lit(1), slot(zc)), slot(hc)), r.mul(slot(zc), rnnLd(r.h, b, k))), b, k),
	)
	return r.emit(t, b, k, s...)
}
