package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Loop-nest helpers of the recurrent kernels: the directions, one direction's scratch
// buffers and phases, and the multiply-accumulate passes that carry the arithmetic.

// rnnLoop builds a loop over [lo, lo+n) whose body is made from its index.
func rnnLoop(name string, lo, n int64, kind loopir.ForKind, body func(v loopir.Expr) loopir.Stmt) loopir.Stmt {
	return rnnLoopE(name, loopir.Int(lo), loopir.Int(n), kind, body)
}

// rnnLoopE is rnnLoop with bounds that may be expressions over the dims.
func rnnLoopE(name string, lo, n loopir.Expr, kind loopir.ForKind, body func(v loopir.Expr) loopir.Stmt) loopir.Stmt {
	v := loopir.NewVar(name)
	return &loopir.For{Var: v, Min: lo, Extent: n, Kind: kind, Body: body(v)}
}

func rnnLd(b *loopir.Buffer, idx ...loopir.Expr) loopir.Expr {
	return &loopir.Load{Buf: b, Index: idx}
}

func rnnSt(b *loopir.Buffer, v loopir.Expr, idx ...loopir.Expr) loopir.Stmt {
	return &loopir.Store{Buf: b, Index: idx, Value: v}
}

func rnnLocal(name string, p *rnnPlan, shape ...loopir.Expr) *loopir.Buffer {
	return &loopir.Buffer{Name: name, DT: p.dt, Shape: shape, Scope: "local"}
}

// rnnDir is one direction being built: its index, sense and scratch buffers.
type rnnDir struct {
	*rnnPlan
	d       int64
	rev     bool
	proj    *loopir.Buffer // [seq, batch, G·H]: X·Wᵀ + biases, by time index
	gates   *loopir.Buffer // [batch, G·H]: h·Rᵀ of the current step, then gate values
	h, c    *loopir.Buffer // [batch, H]: the state
	rh      *loopir.Buffer // [batch, H]: GRU r ⊙ h (linear_before_reset = 0)
	w, r    rnnDirWeight
	lenAt   func(b loopir.Expr) loopir.Expr // steps of batch entry b
	timeAt  func(s, b loopir.Expr) loopir.Expr
	locals  []*loopir.Buffer
	parProj bool
}

// body is the whole kernel: the directions one after the other, or the two of a
// bidirectional layer on two threads.
func (p *rnnPlan) body() loopir.Stmt {
	if p.dirs == 1 {
		return p.direction(0, p.reverse, p.opts.Parallel)
	}
	if !p.opts.Parallel {
		return loopir.Seq{p.direction(0, false, false), p.direction(1, true, false)}
	}
	d := loopir.NewVar("dir")
	return &loopir.For{Var: d, Min: loopir.Int(0), Extent: loopir.Int(2), Kind: loopir.Parallel, Body: &loopir.IfThenElse{
		Cond: loopir.Bin(loopir.EQ, d, loopir.Int(0)),
		Then: p.direction(0, false, false),
		Else: p.direction(1, true, false),
	}}
}

// direction builds one direction: scratch buffers around its phases.
func (p *rnnPlan) direction(d int64, rev, parProj bool) loopir.Stmt {
	gh := p.gh()
	r := &rnnDir{rnnPlan: p, d: d, rev: rev, parProj: parProj}
	c := loopir.Int
	r.proj = rnnLocal("proj", p, p.sseq, p.sbatch, c(gh))
	r.gates = rnnLocal("gates", p, p.sbatch, c(gh))
	r.h = rnnLocal("h", p, p.sbatch, c(p.hid))
	r.locals = []*loopir.Buffer{r.proj, r.gates, r.h}
	if p.op == graph.OpLSTM {
		r.c = rnnLocal("c", p, p.sbatch, c(p.hid))
		r.locals = append(r.locals, r.c)
	}
	if p.op == graph.OpGRU && !p.lbr {
		r.rh = rnnLocal("rh", p, p.sbatch, c(p.hid))
		r.locals = append(r.locals, r.rh)
	}
	var pre loopir.Seq
	r.w = r.weight("wp", p.w, &pre)
	r.r = r.weight("rp", p.r, &pre)
	r.lenAt = func(loopir.Expr) loopir.Expr { return p.seq }
	if p.lens != nil {
		r.lenAt = func(b loopir.Expr) loopir.Expr {
			l := &loopir.Cast{To: tensor.Int64, X: rnnLd(p.lens, b)}
			return loopir.Bin(loopir.Min, loopir.Bin(loopir.Max, l, loopir.Int(0)), p.seq)
		}
	}
	r.timeAt = func(s, b loopir.Expr) loopir.Expr {
		if !rev {
			return s
		}
		return loopir.Bin(loopir.Sub, loopir.Bin(loopir.Sub, r.lenAt(b), loopir.Int(1)), s)
	}
	var body loopir.Stmt = append(pre, r.projection(), r.initState(), r.steps(), r.finalState())
	for i := len(r.locals) - 1; i >= 0; i-- {
		body = &loopir.Allocate{Buf: r.locals[i], Body: body}
	}
	return body
}

// rnnDirWeight is one direction's packed W or R: element off of its block is at
// buf[at(off)].
type rnnDirWeight struct {
	rnnWeight
	buf *loopir.Buffer
	at  func(off loopir.Expr) []loopir.Expr
}

// ld reads element (k, g) of the transposed weight in the single-panel layout of plain
// loops.
func (w rnnDirWeight) ld(k, g loopir.Expr, gh int64) loopir.Expr {
	return rnnLd(w.buf, w.at(loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, k, loopir.Int(gh)), g))...)
}

// weight resolves a weight for this direction: the prepacked parameter, or a scratch
// buffer that pre packs.
func (r *rnnDir) weight(name string, w rnnWeight, pre *loopir.Seq) rnnDirWeight {
	dw := rnnDirWeight{rnnWeight: w}
	if w.packed {
		dw.buf = w.param
		dw.at = func(off loopir.Expr) []loopir.Expr { return []loopir.Expr{loopir.Int(r.d), off} }
		return dw
	}
	dw.buf = rnnLocal(name, r.rnnPlan, loopir.Int(w.panels.size()))
	dw.at = func(off loopir.Expr) []loopir.Expr { return []loopir.Expr{off} }
	r.locals = append(r.locals, dw.buf)
	*pre = append(*pre, w.panels.packLoops(dw.buf, func(g, k loopir.Expr) loopir.Expr {
		return rnnLd(w.param, loopir.Int(r.d), g, k)
	}))
	return dw
}

// xAt reads X at time t, batch entry b, feature k.
func (r *rnnDir) xAt(t, b, k loopir.Expr) loopir.Expr {
	if r.layout1 {
		return rnnLd(r.x, b, t, k)
	}
	return rnnLd(r.x, t, b, k)
}

// stateIdx is the index of (direction, batch entry, unit) in initial_h/c and Y_h/c.
func (r *rnnDir) stateIdx(b, k loopir.Expr) []loopir.Expr {
	if r.layout1 {
		return []loopir.Expr{b, loopir.Int(r.d), k}
	}
	return []loopir.Expr{loopir.Int(r.d), b, k}
}

// yIdx is the index of (time, batch entry, unit) of this direction in Y.
func (r *rnnDir) yIdx(t, b, k loopir.Expr) []loopir.Expr {
	if r.layout1 {
		return []loopir.Expr{b, t, loopir.Int(r.d), k}
	}
	return []loopir.Expr{t, loopir.Int(r.d), b, k}
}

// bias is Wb[g] (+ Rb[g] where the recurrent bias adds before any gating: everywhere but
// the GRU's h gate).
func (r *rnnDir) bias(g loopir.Expr, withR bool) loopir.Expr {
	d := loopir.Int(r.d)
	wb := rnnLd(r.b, d, g)
	if !withR {
		return wb
	}
	return loopir.Bin(loopir.Add, wb, rnnLd(r.b, d, loopir.Bin(loopir.Add, g, loopir.Int(r.gh()))))
}

// micro reports whether the products run on micro-kernels.
func (r *rnnDir) micro() bool { return r.opts.Vector.Lanes > 0 && r.dt == tensor.Float32 }

// projection fills proj[t] = X[t]·Wᵀ + biases for every time step. A projection that
// may run in parallel does where it has rnnParallelWork multiply-adds (and more than
// one step with plain loops): decided here when the extents are constants, else by a
// test at run time between the parallel and the serial loop nest.
func (r *rnnDir) projection() loopir.Stmt {
	if !r.parProj {
		return r.projectionLoops(loopir.Serial)
	}
	seq, okS := rnnConst(r.seq)
	batch, okB := rnnConst(r.batch)
	if okS && okB {
		kind := loopir.Serial
		if seq*batch*r.gh()*r.isz >= rnnParallelWork && (r.micro() || seq > 1) {
			kind = loopir.Parallel
		}
		return r.projectionLoops(kind)
	}
	work := rnnMul(loopir.Bin(loopir.Mul, r.seq, r.batch), r.gh(), r.isz)
	cond := loopir.Bin(loopir.GE, work, loopir.Int(rnnParallelWork))
	if !r.micro() {
		cond = loopir.Bin(loopir.And, cond, loopir.Bin(loopir.GT, r.seq, loopir.Int(1)))
	}
	return &loopir.IfThenElse{Cond: cond, Then: r.projectionLoops(loopir.Parallel), Else: r.projectionLoops(loopir.Serial)}
}

// projectionLoops is the projection with its outer loop (over column panels with
// micro-kernels, over time steps with plain loops) of kind.
func (r *rnnDir) projectionLoops(kind loopir.ForKind) loopir.Stmt {
	gh := r.gh()
	biasRow := func(t loopir.Expr) loopir.Stmt {
		segs := [][2]int64{{0, gh}}
		if r.op == graph.OpGRU {
			segs = [][2]int64{{0, 2 * r.hid}, {2 * r.hid, gh}}
		}
		var s loopir.Seq
		for i, sg := range segs {
			withR := i == 0
			s = append(s, rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
				return rnnLoop("g", sg[0], sg[1]-sg[0], loopir.Vectorized, func(g loopir.Expr) loopir.Stmt {
					return rnnSt(r.proj, r.bias(g, withR), t, b, g)
				})
			}))
		}
		return s
	}
	if r.micro() {
		var s loopir.Seq
		if r.b != nil {
			s = append(s, rnnLoopE("t", loopir.Int(0), r.seq, loopir.Serial, biasRow))
		}
		s = append(s, rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
			c := rnnOperand{buf: r.proj, stride: rnnMul(r.sbatch, gh), at: func(t, g loopir.Expr) []loopir.Expr { return []loopir.Expr{t, b, g} }}
			a := rnnOperand{buf: r.x, stride: rnnMul(r.batch, r.isz), at: func(t, k loopir.Expr) []loopir.Expr { return []loopir.Expr{t, b, k} }}
			if r.layout1 {
				a = rnnOperand{buf: r.x, stride: loopir.Int(r.isz), at: func(t, k loopir.Expr) []loopir.Expr { return []loopir.Expr{b, t, k} }}
			}
			return r.opts.Vector.microGemm(r.b == nil, r.seq, c, a, r.w.panels, 0, gh, r.w.buf, r.w.at, kind)
		}))
		return s
	}
	return rnnLoopE("t", loopir.Int(0), r.seq, kind, func(t loopir.Expr) loopir.Stmt {
		var s loopir.Seq
		if r.b != nil {
			s = append(s, biasRow(t))
		}
		s = append(s, r.accumulate(r.isz, 0, gh, r.b == nil,
			func(b, g loopir.Expr) []loopir.Expr { return []loopir.Expr{t, b, g} }, r.proj,
			func(b, k loopir.Expr) loopir.Expr { return r.xAt(t, b, k) },
			func(k, g loopir.Expr) loopir.Expr { return r.w.ld(k, g, gh) }))
		return s
	})
}

// recurrent emits gates[b, off+j] = Σ_i src[b, i]·Rᵀ[i, off+j] for j < cols.
func (r *rnnDir) recurrent(src *loopir.Buffer, off, cols int64) loopir.Stmt {
	if r.micro() {
		c := rnnOperand{buf: r.gates, stride: loopir.Int(r.gh()), at: func(b, g loopir.Expr) []loopir.Expr { return []loopir.Expr{b, g} }}
		a := rnnOperand{buf: src, stride: loopir.Int(r.hid), at: func(b, i loopir.Expr) []loopir.Expr { return []loopir.Expr{b, i} }}
		return r.opts.Vector.microGemm(true, r.batch, c, a, r.r.panels, off, off+cols, r.r.buf, r.r.at, loopir.Serial)
	}
	return r.accumulate(r.hid, off, off+cols, true, func(b, g loopir.Expr) []loopir.Expr { return []loopir.Expr{b, g} }, r.gates,
		func(b, i loopir.Expr) loopir.Expr { return rnnLd(src, b, i) },
		func(i, g loopir.Expr) loopir.Expr { return r.r.ld(i, g, r.gh()) })
}

// accumulate emits dst[idx(b, g)] (=|+=) Σ_{i<n} src(b, i)·w(i, g) for every batch entry
// b and gate column g in [c0, c1): passes over the columns, each adding Unroll terms, so
// a row of dst is loaded and stored once per Unroll weight rows and the innermost loop
// runs over contiguous columns. fromZero makes the first pass store instead of add.
func (r *rnnDir) accumulate(n, c0, c1 int64, fromZero bool, idx func(b, g loopir.Expr) []loopir.Expr, dst *loopir.Buffer,
	src func(b, i loopir.Expr) loopir.Expr, w func(i, g loopir.Expr) loopir.Expr) loopir.Stmt {
	u := r.opts.Unroll
	pass := func(i0 loopir.Expr, terms int64, add bool) loopir.Stmt {
		return rnnLoopE("b", loopir.Int(0), r.batch, loopir.Serial, func(b loopir.Expr) loopir.Stmt {
			return rnnLoop("g", c0, c1-c0, loopir.Vectorized, func(g loopir.Expr) loopir.Stmt {
				var sum loopir.Expr
				for j := int64(0); j < terms; j++ {
					i := loopir.Bin(loopir.Add, i0, loopir.Int(j))
					term := loopir.Bin(loopir.Mul, src(b, i), w(i, g))
					if sum == nil {
						sum = term
					} else {
						sum = loopir.Bin(loopir.Add, sum, term)
					}
				}
				if add {
					sum = loopir.Bin(loopir.Add, rnnLd(dst, idx(b, g)...), sum)
				}
				return rnnSt(dst, sum, idx(b, g)...)
			})
		})
	}
	first := min(u, n)
	out := loopir.Seq{pass(loopir.Int(0), first, !fromZero)}
	full := (n - first) / u
	if full > 0 {
		out = append(out, rnnLoop("io", 0, full, loopir.Serial, func(io loopir.Expr) loopir.Stmt {
			return pass(loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, io, loopir.Int(u)), loopir.Int(first)), u, true)
		}))
	}
	if tail := n - first - full*u; tail > 0 {
		out = append(out, pass(loopir.Int(first+full*u), tail, true))
	}
	return out
}
