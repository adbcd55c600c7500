package schedule

import (
	"github.com/kilnrt/kiln/loopir"
)

// ComputeInline removes a block that computes a local buffer elementwise — no reduction,
// one store at exactly its iterators — and substitutes its expression wherever the buffer
// is read. The buffer's allocation and the block's loops disappear.
func (s *Schedule) ComputeInline(b BlockRV) error {
	name, ok := s.blocks[b]
	if !ok {
		return s.errf("compute_inline", "unknown block %s", b)
	}
	blk := findBlock(s.f.Body, name)
	st, ok := blk.Body.(*loopir.Store)
	if !ok || blk.Init != nil {
		return s.errf("compute_inline", "block %s is not a single elementwise store", name)
	}
	if blk.Predicate != nil {
		return s.errf("compute_inline", "block %s has a predicate", name)
	}
	if len(st.Index) != len(blk.Iters) {
		return s.errf("compute_inline", "block %s does not store at its iterators", name)
	}
	for i, it := range blk.Iters {
		if it.Kind != loopir.Spatial || st.Index[i] != loopir.Expr(it.Var) {
			return s.errf("compute_inline", "block %s does not store at its iterators", name)
		}
	}
	for _, p := range s.f.Params {
		if p == st.Buf {
			return s.errf("compute_inline", "block %s writes function output %s", name, p.Name)
		}
	}
	buf, expr := st.Buf, st.Value
	// the block must be the only writer of its buffer
	writers := 0
	walk(s.f.Body, func(x loopir.Stmt) {
		if w, ok := x.(*loopir.Store); ok && w.Buf == buf {
			writers++
		}
	})
	if writers != 1 {
		return s.errf("compute_inline", "buffer %s has %d writers", buf.Name, writers)
	}
	inline := func(e loopir.Expr) loopir.Expr {
		l, ok := e.(*loopir.Load)
		if !ok || l.Buf != buf {
			return e
		}
		m := map[*loopir.Var]loopir.Expr{}
		for i, it := range blk.Iters {
			m[it.Var] = l.Index[i]
		}
		return loopir.Substitute(expr, m)
	}
	s.f.Body = loopir.MapStmt(s.f.Body, inline, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Block:
			if x.Name == name {
				return loopir.Seq{}
			}
			nb := *x
			if len(dropRegion(x.Reads, buf)) != len(x.Reads) {
				nb.Reads = mergeRegions(dropRegion(x.Reads, buf), blk.Reads)
			}
			return &nb
		case *loopir.For:
			if isEmpty(x.Body) {
				return loopir.Seq{}
			}
		case *loopir.Allocate:
			if x.Buf == buf {
				return x.Body
			}
		case loopir.Seq:
			var kept loopir.Seq
			for _, c := range x {
				if !isEmpty(c) {
					kept = append(kept, c)
				}
			}
			return kept
		}
		return nil
	})
	s.trace.add("compute_inline", []string{string(b)}, nil, nil, nil)
	return nil
}

func isEmpty(st loopir.Stmt) bool {
	seq, ok := st.(loopir.Seq)
	return st == nil || (ok && len(seq) == 0)
}

func dropRegion(rs []loopir.Region, buf *loopir.Buffer) []loopir.Region {
	var out []loopir.Region
	for _, r := range rs {
		if r.Buf != buf {
			out = append(out, r)
		}
	}
	return out
}

// mergeRegions appends the regions of buffers not yet read.
func mergeRegions(rs, more []loopir.Region) []loopir.Region {
	out := append([]loopir.Region{}, rs...)
	for _, m := range more {
		dup := false
		for _, r := range out {
			dup = dup || r.Buf == m.Buf
		}
		if !dup {
			out = append(out, m)
		}
	}
	return out
}
