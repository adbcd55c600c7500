package gpu_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
)

// serialLaunch is f with every bound loop run in turn: the launch of f where each block
// and thread runs one iteration, one after the other. Every store of a launched kernel
// runs under every bound loop (DeriveLaunch checks it) and a bound loop drives no
// reduction (Bind checks it), so the order does not change the result. A kernel with
// barriers runs each block's threads in lock-step phases instead (lockStep).
func serialLaunch(f *loopir.PrimFunc) *loopir.PrimFunc {
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: inTurn(f.Body)}
}

// threadsReversed is serialLaunch(f) with the threads of each block run in the other
// order (the last thread first): a kernel whose threads' order between two barriers
// matters (a thread reads what another writes in the same phase) then gives another
// result than in serialLaunch's order.
func threadsReversed(f *loopir.PrimFunc) *loopir.PrimFunc {
	threads := map[*loopir.Var]bool{}
	loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if l, ok := s.(*loopir.For); ok {
			if a, bound := l.Kind.Thread(); bound && !a.IsBlock() {
				threads[l.Var] = true
			}
		}
		return nil
	})
	body := loopir.MapStmt(serialLaunch(f).Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		l, ok := s.(*loopir.For)
		if !ok || !threads[l.Var] {
			return nil
		}
		last := loopir.Bin(loopir.Sub, loopir.Bin(loopir.Add, l.Min, l.Extent), loopir.Int(1))
		back := loopir.Bin(loopir.Sub, loopir.Bin(loopir.Add, last, l.Min), l.Var)
		return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Annotations: l.Annotations,
			Body: loopir.MapStmt(l.Body, func(e loopir.Expr) loopir.Expr {
				if e == loopir.Expr(l.Var) {
					return back
				}
				return e
			}, nil)}
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body}
}

// inTurn rewrites the bound loops of s from the outside in: a block loop becomes a
// serial loop; the outermost thread loop, with the thread loops inside it, runs in
// lock-step when its body has a barrier and in turn otherwise.
func inTurn(s loopir.Stmt) loopir.Stmt {
	switch s := s.(type) {
	case loopir.Seq:
		out := make(loopir.Seq, len(s))
		for i, c := range s {
			out[i] = inTurn(c)
		}
		return out
	case *loopir.For:
		a, bound := s.Kind.Thread()
		switch {
		case bound && !a.IsBlock() && hasBarrier(s.Body):
			return lockStep(s)
		case bound && !a.IsBlock():
			return serialLoops(s)
		case bound:
			return &loopir.For{Var: s.Var, Min: s.Min, Extent: s.Extent, Body: inTurn(s.Body), Annotations: s.Annotations}
		}
		return &loopir.For{Var: s.Var, Min: s.Min, Extent: s.Extent, Kind: s.Kind, Body: inTurn(s.Body), Annotations: s.Annotations}
	case *loopir.IfThenElse:
		return &loopir.IfThenElse{Cond: s.Cond, Then: inTurn(s.Then), Else: inTurn(s.Else)}
	case *loopir.Allocate:
		return &loopir.Allocate{Buf: s.Buf, Body: inTurn(s.Body)}
	}
	return s
}

// serialLoops is s with every bound loop in it a serial loop.
func serialLoops(s loopir.Stmt) loopir.Stmt {
	return loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if l, ok := x.(*loopir.For); ok {
			if _, bound := l.Kind.Thread(); bound {
				return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Body: l.Body, Annotations: l.Annotations}
			}
		}
		return nil
	})
}

// TestInjectiveKernelsMatchRefAsASerialLaunch runs every case's launched kernel (tail
// guards and launch extents included) on the CPU, each block and thread in turn, and
// compares with the reference evaluator: the schedule and the launch rule are checked
// on a machine without a GPU.
func TestInjectiveKernelsMatchRefAsASerialLaunch(t *testing.T) {
	emulateCases(t, cases(t))
}

// emulateCases runs every case's launched kernel on the CPU as a serial launch and
// compares with the reference evaluator.
func emulateCases(t *testing.T, cs []gcase) {
	d, err := cpu.Open(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tg := testGPU(t)
	for _, c := range cs {
		l := lower(t, c, tg)
		src, err := codegen.EmitC(serialLaunch(l.f))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bin, err := d.Compiler().Build(context.Background(), src.Code)
		if errors.Is(err, devices.ErrUnavailable) {
			testdata.NoCompiler(t, err)
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		mod, err := d.Load(bin)
		if err != nil {
			t.Fatal(err)
		}
		k, err := mod.Kernel(src.Kernels[0])
		if err != nil {
			t.Fatal(err)
		}
		for i, env := range c.binds {
			l.run(t, d, k, c.name, env, uint64(i+1))
		}
		if err := mod.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
