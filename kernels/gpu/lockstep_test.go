package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
)

// lockStep runs the threads of a block (the chain of thread loops starting at l) in
// phases between barriers: the statements that hold barriers (loops and conditions
// every thread runs alike, as loopir.Verify requires) stay outside, each stretch of
// statements between two barriers runs inside serial copies of the thread loops, one
// thread after the other, and a local buffer that lives across a barrier gets one copy
// per thread (indexed by the thread's linear index). Each thread so reaches a barrier
// only when all threads have finished the phase before it, and a missing barrier shows:
// a thread then reads what another has not written yet, or overwrites what another has
// not read yet (a loop's phases continue into its next iteration: rotated).
func lockStep(l *loopir.For) loopir.Stmt {
	threads := []*loopir.For{l}
	body := l.Body
	for {
		inner, ok := body.(*loopir.For)
		if !ok {
			break
		}
		if a, bound := inner.Kind.Thread(); !bound || a.IsBlock() {
			break
		}
		threads = append(threads, inner)
		body = inner.Body
	}
	return phases(serialLoops(body), threads)
}

// phases is s run by every thread of threads with barriers as the phase boundaries.
func phases(s loopir.Stmt, threads []*loopir.For) loopir.Stmt {
	if !hasBarrier(s) {
		return eachThread(s, threads)
	}
	switch s := s.(type) {
	case loopir.Seq:
		var out, run loopir.Seq
		flush := func() {
			if len(run) > 0 {
				out = append(out, eachThread(run, threads))
				run = nil
			}
		}
		for _, c := range s {
			switch {
			case isBarrier(c):
				flush()
			case hasBarrier(c):
				flush()
				out = append(out, phases(c, threads))
			default:
				run = append(run, c)
			}
		}
		flush()
		return out
	case *loopir.For:
		return rotated(s, threads)
	case *loopir.IfThenElse:
		var els loopir.Stmt
		if s.Else != nil {
			els = phases(s.Else, threads)
		}
		return &loopir.IfThenElse{Cond: s.Cond, Then: phases(s.Then, threads), Else: els}
	case *loopir.Allocate:
		return privatize(s, threads)
	}
	panic(fmt.Sprintf("lockStep: a barrier inside %T", s))
}

// rotated runs a loop whose body is stretches S0, S1, ..., Sn between barriers: a phase
// does not end at the end of the body but at the next barrier, in the next iteration,
// so the phases are S0(first) | S1 | ... | Sn(k) + S0(k+1) | ... | Sn(last). A thread
// that overwrites in S0(k+1) what another still reads in Sn(k) (a missing barrier before
// the next round) then shows.
func rotated(l *loopir.For, threads []*loopir.For) loopir.Stmt {
	var segs []loopir.Seq
	cur := loopir.Seq{}
	for _, c := range flat(l.Body) {
		switch {
		case isBarrier(c):
			segs = append(segs, cur)
			cur = loopir.Seq{}
		case hasBarrier(c):
			panic(fmt.Sprintf("lockStep: loop %s has a barrier below the top of its body", l.Var.Name))
		default:
			cur = append(cur, c)
		}
	}
	segs = append(segs, cur)
	at := func(s loopir.Stmt, k loopir.Expr) loopir.Stmt {
		return loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr {
			if e == loopir.Expr(l.Var) {
				return k
			}
			return e
		}, nil)
	}
	end := loopir.Bin(loopir.Add, l.Min, l.Extent)
	next := loopir.Bin(loopir.Add, l.Var, loopir.Int(1))
	last := len(segs) - 1
	var body loopir.Seq
	for i, seg := range segs[1:] {
		if i+1 == last {
			seg = append(seg, &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, next, end), Then: at(segs[0], next)})
		}
		body = append(body, eachThread(seg, threads))
	}
	return loopir.Seq{
		&loopir.IfThenElse{Cond: loopir.Bin(loopir.GT, l.Extent, loopir.Int(0)), Then: eachThread(at(segs[0], l.Min), threads)},
		&loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Body: body},
	}
}

// flat lists the statements of s, nested sequences spliced in.
func flat(s loopir.Stmt) loopir.Seq {
	seq, ok := s.(loopir.Seq)
	if !ok {
		return loopir.Seq{s}
	}
	var out loopir.Seq
	for _, c := range seq {
		out = append(out, flat(c)...)
	}
	return out
}

// eachThread wraps s in serial copies of the thread loops.
func eachThread(s loopir.Stmt, threads []*loopir.For) loopir.Stmt {
	for i := len(threads) - 1; i >= 0; i-- {
		t := threads[i]
		s = &loopir.For{Var: t.Var, Min: t.Min, Extent: t.Extent, Body: s}
	}
	return s
}

// privatize gives a local buffer that lives across barriers one copy per thread: the
// copies side by side, each access (and each tile address passed to an intrinsic)
// offset by the thread's linear index times the buffer's size.
func privatize(a *loopir.Allocate, threads []*loopir.For) loopir.Stmt {
	size := a.Buf.Elements()
	var tid, n loopir.Expr = loopir.Int(0), loopir.Int(1)
	for _, t := range threads {
		tid = loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, tid, t.Extent), t.Var)
		n = loopir.Bin(loopir.Mul, n, t.Extent)
	}
	nb := &loopir.Buffer{Name: a.Buf.Name, DT: a.Buf.DT, Shape: []loopir.Expr{loopir.Bin(loopir.Mul, n, size)}, Scope: a.Buf.Scope}
	at := func(idx []loopir.Expr) []loopir.Expr {
		flat := loopir.Expr(loopir.Int(0))
		if len(idx) == 1 { // flat already (a lowered kernel's index)
			flat = idx[0]
		} else if len(idx) > 1 {
			flat = loopir.FlatIndex(a.Buf, idx)
		}
		return []loopir.Expr{loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, tid, size), flat)}
	}
	body := loopir.MapStmt(a.Body, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == a.Buf {
			return &loopir.Load{Buf: nb, Index: at(l.Index)}
		}
		if ad, ok := e.(*loopir.Address); ok && ad.Buf == a.Buf { // a tensor intrinsic's tile
			return &loopir.Address{Buf: nb, Index: at(ad.Index)}
		}
		return e
	}, func(s loopir.Stmt) loopir.Stmt {
		if st, ok := s.(*loopir.Store); ok && st.Buf == a.Buf {
			return &loopir.Store{Buf: nb, Index: at(st.Index), Value: st.Value}
		}
		return nil
	})
	return &loopir.Allocate{Buf: nb, Body: phases(body, threads)}
}

func isBarrier(s loopir.Stmt) bool {
	_, ok := s.(*loopir.Barrier)
	return ok
}

func hasBarrier(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if isBarrier(x) {
			found = true
		}
		return nil
	})
	return found
}

// withoutBarrier is f without its drop-th barrier (in program order).
func withoutBarrier(f *loopir.PrimFunc, drop int) *loopir.PrimFunc {
	seen := -1
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if _, ok := s.(*loopir.Barrier); ok {
			if seen++; seen == drop {
				return loopir.Seq{}
			}
		}
		return nil
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body}
}

// buildEmulated prints an emulated kernel (serialLaunch's or threadsReversed's) in C,
// builds it on the CPU device d and loads it.
func buildEmulated(t *testing.T, d *cpu.Device, f *loopir.PrimFunc) (devices.Module, devices.Kernel) {
	t.Helper()
	src, err := codegen.EmitC(f)
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	bin, err := d.Compiler().Build(context.Background(), src.Code)
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return loadKernel(t, d, bin, src.Kernels[0])
}
