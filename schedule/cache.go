package schedule

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// CacheRead makes block b read its read-th input through a copy in a new buffer of the
// given scope (loopir.ScopeLocal or ScopeShared): a copy block "<buf>_<scope>" filling
// the whole copy runs just before the top-level statement that holds b (compute_at then
// shrinks it to what a loop needs; under GPU thread loops it compacts the buffer, and a
// shared one becomes a copy shared by a block's threads). It returns the copy block.
func (s *Schedule) CacheRead(b BlockRV, read int, scope string) (BlockRV, error) {
	const prim = "cache_read"
	name, ok := s.blocks[b]
	if !ok {
		return "", s.errf(prim, "unknown block %s", b)
	}
	if scope != loopir.ScopeLocal && scope != loopir.ScopeShared {
		return "", s.errf(prim, "scope %q: a cache is %q or %q", scope, loopir.ScopeLocal, loopir.ScopeShared)
	}
	blk := findBlock(s.f.Body, name)
	if read < 0 || read >= len(blk.Reads) {
		return "", s.errf(prim, "block %s has %d read regions, not %d", name, len(blk.Reads), read+1)
	}
	buf := blk.Reads[read].Buf
	cache := s.cacheBuffer(buf, scope)
	copyName := cache.Name
	if findBlock(s.f.Body, copyName) != nil {
		return "", s.errf(prim, "a block named %s exists already", copyName)
	}
	nest := copyNest(copyName, buf, cache)
	redirect := func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			return &loopir.Load{Buf: cache, Index: l.Index}
		}
		return e
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if bb, ok := x.(*loopir.Block); ok && bb.Name == name {
			nb := *bb
			nb.Init = loopir.MapStmt(bb.Init, redirect, nil)
			nb.Body = loopir.MapStmt(bb.Body, redirect, nil)
			nb.Reads = renameRegion(bb.Reads, buf, cache)
			return &nb
		}
		return nil
	})
	s.insertBeside(name, nest, false)
	s.f.Body = &loopir.Allocate{Buf: cache, Body: s.f.Body}
	out := s.newBlock(copyName)
	s.trace.add(prim, []string{string(b)}, []string{scope}, []int64{int64(read)}, []string{string(out)})
	return out, nil
}

// CacheWrite makes block b, the only writer of its write-th output, write into a new
// buffer of the given scope; a copy block "<buf>_<scope>" writing the whole buffer back
// runs just after the top-level statement that holds b (reverse_compute_at then moves it
// next to the loop that finishes each part). It returns the copy block.
func (s *Schedule) CacheWrite(b BlockRV, write int, scope string) (BlockRV, error) {
	const prim = "cache_write"
	name, ok := s.blocks[b]
	if !ok {
		return "", s.errf(prim, "unknown block %s", b)
	}
	if scope != loopir.ScopeLocal && scope != loopir.ScopeShared {
		return "", s.errf(prim, "scope %q: a cache is %q or %q", scope, loopir.ScopeLocal, loopir.ScopeShared)
	}
	blk := findBlock(s.f.Body, name)
	if write < 0 || write >= len(blk.Writes) {
		return "", s.errf(prim, "block %s has %d write regions, not %d", name, len(blk.Writes), write+1)
	}
	buf := blk.Writes[write].Buf
	writers := map[string]bool{}
	walk(s.f.Body, func(x loopir.Stmt) {
		if bb, ok := x.(*loopir.Block); ok {
			walk(bb.Body, func(y loopir.Stmt) {
				if st, ok := y.(*loopir.Store); ok && st.Buf == buf {
					writers[bb.Name] = true
				}
			})
			walk(bb.Init, func(y loopir.Stmt) {
				if st, ok := y.(*loopir.Store); ok && st.Buf == buf {
					writers[bb.Name] = true
				}
			})
		}
	})
	if len(writers) != 1 {
		return "", s.errf(prim, "%s has %d writer blocks; cache_write needs block %s to be the only one", buf.Name, len(writers), name)
	}
	cache := s.cacheBuffer(buf, scope)
	copyName := cache.Name
	if findBlock(s.f.Body, copyName) != nil {
		return "", s.errf(prim, "a block named %s exists already", copyName)
	}
	redirect := func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			return &loopir.Load{Buf: cache, Index: l.Index}
		}
		return e
	}
	stores := func(x loopir.Stmt) loopir.Stmt {
		if st, ok := x.(*loopir.Store); ok && st.Buf == buf {
			return &loopir.Store{Buf: cache, Index: st.Index, Value: st.Value}
		}
		return nil
	}
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if bb, ok := x.(*loopir.Block); ok && bb.Name == name {
			nb := *bb
			nb.Init = loopir.MapStmt(bb.Init, redirect, stores)
			nb.Body = loopir.MapStmt(bb.Body, redirect, stores)
			nb.Reads = renameRegion(bb.Reads, buf, cache)
			nb.Writes = renameRegion(bb.Writes, buf, cache)
			return &nb
		}
		return nil
	})
	s.insertBeside(name, copyNest(copyName, cache, buf), true)
	s.f.Body = &loopir.Allocate{Buf: cache, Body: s.f.Body}
	out := s.newBlock(copyName)
	s.trace.add(prim, []string{string(b)}, []string{scope}, []int64{int64(write)}, []string{string(out)})
	return out, nil
}

func (s *Schedule) newBlock(name string) BlockRV {
	rv := BlockRV(fmt.Sprintf("b%d", s.next))
	s.next++
	s.blocks[rv] = name
	return rv
}

func (s *Schedule) cacheBuffer(buf *loopir.Buffer, scope string) *loopir.Buffer {
	return &loopir.Buffer{Name: buf.Name + "_" + scope, DT: buf.DT, Shape: buf.Shape, Scope: scope}
}

// copyNest is a loop nest with one block copying src into dst element by element.
func copyNest(name string, src, dst *loopir.Buffer) loopir.Stmt {
	iters := make([]loopir.IterVar, len(src.Shape))
	bind := make([]loopir.Expr, len(src.Shape))
	loops := make([]*loopir.For, len(src.Shape))
	idx := make([]loopir.Expr, len(src.Shape))
	point := make([][2]loopir.Expr, len(src.Shape))
	for d, ext := range src.Shape {
		v := loopir.NewVar(fmt.Sprintf("%s_i%d", name, d))
		l := loopir.NewVar(fmt.Sprintf("%s_l%d", name, d))
		iters[d] = loopir.IterVar{Var: v, Extent: ext, Kind: loopir.Spatial}
		bind[d], idx[d] = l, v
		point[d] = [2]loopir.Expr{v, loopir.Int(1)}
		loops[d] = &loopir.For{Var: l, Min: loopir.Int(0), Extent: ext}
	}
	var out loopir.Stmt = &loopir.Block{
		Name: name, Iters: iters, Bindings: bind,
		Reads:  []loopir.Region{{Buf: src, Ranges: point}},
		Writes: []loopir.Region{{Buf: dst, Ranges: point}},
		Body:   &loopir.Store{Buf: dst, Index: idx, Value: &loopir.Load{Buf: src, Index: idx}},
	}
	for d := len(loops) - 1; d >= 0; d-- {
		loops[d].Body = out
		out = loops[d]
	}
	return out
}

func renameRegion(rs []loopir.Region, from, to *loopir.Buffer) []loopir.Region {
	out := make([]loopir.Region, len(rs))
	for i, r := range rs {
		out[i] = r
		if r.Buf == from {
			out[i].Buf = to
		}
	}
	return out
}

// insertBeside puts st just before (or after) the top-level statement holding the
// named block; top level is the function body's sequence, below its allocations.
func (s *Schedule) insertBeside(block string, st loopir.Stmt, after bool) {
	var rec func(body loopir.Stmt) loopir.Stmt
	rec = func(body loopir.Stmt) loopir.Stmt {
		if a, ok := body.(*loopir.Allocate); ok {
			return &loopir.Allocate{Buf: a.Buf, Body: rec(a.Body)}
		}
		seq, ok := body.(loopir.Seq)
		if !ok {
			seq = loopir.Seq{body}
		}
		var out loopir.Seq
		for _, c := range seq {
			holds := findBlock(c, block) != nil
			if holds && !after {
				out = append(out, st)
			}
			out = append(out, c)
			if holds && after {
				out = append(out, st)
			}
		}
		return out
	}
	s.f.Body = rec(s.f.Body)
}
