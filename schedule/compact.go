package schedule

import (
	"github.com/kilnrt/kiln/loopir"
)

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
