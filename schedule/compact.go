package schedule

import (
	"errors"

	"github.com/kilnrt/kiln/loopir"
)

// CompactAt allocates the local buffer that block b stores into under loop l, shrunk to
// the region that the accesses under one iteration of l cover, inside l: a temporary
// that a consumer moved under l (reverse_compute_at) reads right after its producer
// wrote it becomes per-iteration scratch of the region's size (on the host, a stack
// array when small: see codegen) instead of a whole-tensor allocation. Every load and
// store of the buffer must be under l, and the stores under l must cover the region
// densely (so no element read under an iteration was written by another one). Call it
// before tensorize: an intrinsic call's footprint is not analyzed.
func (s *Schedule) CompactAt(b BlockRV, l LoopRV) error {
	const prim = "compact_at"
	blk, bufs, err := s.elementBlock(prim, b)
	if err != nil {
		return err
	}
	if len(bufs) != 1 {
		return s.errf(prim, "block %s stores into %d buffers, want 1", blk.Name, len(bufs))
	}
	buf := bufs[0]
	at, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	if buf.Scope != loopir.ScopeLocal || !s.allocations()[buf] {
		return s.errf(prim, "%s is not a local buffer the function allocates", buf.Name)
	}
	var under [2][]access
	for k, stores := range []bool{false, true} {
		all, err1 := collectAccesses(s.f.Body, buf, stores)
		in, err2 := collectAccesses(at.Body, buf, stores)
		if err := errors.Join(err1, err2); err != nil {
			return s.errf(prim, "%v", err)
		}
		if len(all) != len(in) {
			return s.errf(prim, "%s is also accessed outside loop %s", buf.Name, at.Var.Name)
		}
		under[k] = in
	}
	if len(under[1]) == 0 {
		return s.errf(prim, "nothing under loop %s stores into %s", at.Var.Name, buf.Name)
	}
	an := s.analyzerAt(at)
	region, err := coverRegion(an, append(append([]access{}, under[0]...), under[1]...), len(buf.Shape))
	if err != nil {
		return s.errf(prim, "region of %s under %s: %v", buf.Name, at.Var.Name, err)
	}
	if err := denseCover(an, under[1], region); err != nil {
		return s.errf(prim, "the stores into %s under %s leave holes in their region: %v", buf.Name, at.Var.Name, err)
	}
	s.compactAt(an, at.Var, buf, region)
	s.trace.add(prim, []string{string(b), string(l)}, nil, nil, nil)
	return nil
}

// compactAt allocates the local buffer buf under the loop of variable at, shrunk to
// region (per axis [Min, Min+Extent), Min an expression of at and the loops above it),
// when every load and store of buf is under that loop: the allocation enclosing the
// function moves into the loop's body, the buffer's shape becomes the region's extents
// and every index d becomes index - Min[d]. A buffer that is a parameter, not local, or
// also accessed outside the loop keeps its allocation.
func (s *Schedule) compactAt(an *loopir.Analyzer, at *loopir.Var, buf *loopir.Buffer, region []dimRange) {
	if buf.Scope != "local" || len(region) != len(buf.Shape) || !s.allocations()[buf] {
		return
	}
	loop := findLoop(s.f.Body, at)
	for _, stores := range []bool{false, true} {
		all, err1 := collectAccesses(s.f.Body, buf, stores)
		in, err2 := collectAccesses(loop.Body, buf, stores)
		if err1 != nil || err2 != nil || len(all) != len(in) {
			return
		}
	}
	shape := make([]loopir.Expr, len(region))
	for d, r := range region {
		shape[d] = loopir.Int(r.Extent)
	}
	nb := &loopir.Buffer{Name: buf.Name, DT: buf.DT, Shape: shape, Scope: buf.Scope}
	shift := func(idx []loopir.Expr) []loopir.Expr {
		out := make([]loopir.Expr, len(idx))
		for d, i := range idx {
			out[d] = an.Simplify(loopir.Bin(loopir.Sub, i, region[d].Min))
		}
		return out
	}
	whole := make([][2]loopir.Expr, len(shape))
	for d, e := range shape {
		whole[d] = [2]loopir.Expr{loopir.Int(0), e}
	}
	regions := func(rs []loopir.Region) []loopir.Region {
		out := make([]loopir.Region, len(rs))
		for i, r := range rs {
			out[i] = r
			if r.Buf == buf {
				out[i] = loopir.Region{Buf: nb, Ranges: whole}
			}
		}
		return out
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			return &loopir.Load{Buf: nb, Index: shift(l.Index)}
		}
		return e
	}, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Store:
			if x.Buf == buf {
				return &loopir.Store{Buf: nb, Index: shift(x.Index), Value: x.Value}
			}
		case *loopir.Allocate:
			if x.Buf == buf {
				return x.Body
			}
		case *loopir.Block:
			nb := *x
			nb.Reads, nb.Writes = regions(x.Reads), regions(x.Writes)
			return &nb
		}
		return nil
	})
	s.replaceLoop(at, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: f.Kind, Annotations: f.Annotations,
			Body: &loopir.Allocate{Buf: nb, Body: f.Body}}
	})
}

// allocations is the set of buffers the function allocates (not its parameters).
func (s *Schedule) allocations() map[*loopir.Buffer]bool {
	out := map[*loopir.Buffer]bool{}
	walk(s.f.Body, func(x loopir.Stmt) {
		if a, ok := x.(*loopir.Allocate); ok {
			out[a.Buf] = true
		}
	})
	return out
}
