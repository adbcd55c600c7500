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
	if reads := countAllLoads(s.f.Body, buf); reads > 1 && reads*exprSize(expr, maxInlineCopy) > maxInlineCopy {
		return s.errf("compute_inline", "block %s's expression read %d times would copy more than %d expression nodes", name, reads, maxInlineCopy)
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
		case *loopir.Allocate:
			if x.Buf == buf {
				return x.Body
			}
		}
		return pruneEmpty(x)
	})
	s.trace.add("compute_inline", []string{string(b)}, nil, nil, nil)
	return nil
}

// pruneEmpty drops a loop with an empty body and the empty members of a sequence (for
// MapStmt callbacks; nil keeps the node).
func pruneEmpty(x loopir.Stmt) loopir.Stmt {
	switch x := x.(type) {
	case *loopir.For:
		if isEmpty(x.Body) {
			return loopir.Seq{}
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

// ReverseComputeInline folds an elementwise consumer into its producer: a block
// Out[i] = g(P[i], ...) that reads the local buffer P at exactly its iterators, where P
// has no other reader and is written by one non-reduction block storing at its
// iterators, disappears; the producer stores g(its value) into Out instead of P.
func (s *Schedule) ReverseComputeInline(b BlockRV) error {
	const prim = "reverse_compute_inline"
	cons, _, err := s.elementBlock(prim, b)
	if err != nil {
		return err
	}
	cst, ok := cons.Body.(*loopir.Store)
	if !ok {
		return s.errf(prim, "block %s is not a single store", cons.Name)
	}
	if cons.Init != nil || cons.Predicate != nil {
		return s.errf(prim, "block %s is a reduction or has a predicate", cons.Name)
	}
	var input *loopir.Buffer
	for _, r := range cons.Reads {
		if r.Buf == cst.Buf {
			continue
		}
		writers := 0
		var prod *loopir.Block
		walk(s.f.Body, func(x loopir.Stmt) {
			if blk, ok := x.(*loopir.Block); ok && blk.Name != cons.Name {
				if st, ok := blk.Body.(*loopir.Store); ok && st.Buf == r.Buf {
					writers++
					prod = blk
				}
			}
		})
		if writers == 0 || isParam(s.f, r.Buf) {
			continue
		}
		if input != nil {
			return s.errf(prim, "block %s reads two produced buffers (%s, %s)", cons.Name, input.Name, r.Buf.Name)
		}
		if writers > 1 || prod.Init != nil {
			return s.errf(prim, "%s is not written by one elementwise block", r.Buf.Name)
		}
		input = r.Buf
	}
	if input == nil {
		return s.errf(prim, "block %s reads no buffer computed in this function", cons.Name)
	}
	if !readsAtIters(cons, input) {
		return s.errf(prim, "block %s does not read %s at exactly its iterators", cons.Name, input.Name)
	}
	if all, _ := collectAccesses(s.f.Body, input, false); len(all) != countLoads(cons, input) {
		return s.errf(prim, "%s has readers besides block %s", input.Name, cons.Name)
	}
	prodName := ""
	walk(s.f.Body, func(x loopir.Stmt) {
		if blk, ok := x.(*loopir.Block); ok {
			if st, ok := blk.Body.(*loopir.Store); ok && st.Buf == input {
				prodName = blk.Name
			}
		}
	})
	prod := findBlock(s.f.Body, prodName)
	pst := prod.Body.(*loopir.Store)
	if len(pst.Index) != len(cons.Iters) {
		return s.errf(prim, "block %s's rank differs from %s's", cons.Name, input.Name)
	}
	// consumer iterator k ↦ the producer's store index k
	m := map[*loopir.Var]loopir.Expr{}
	for i, it := range cons.Iters {
		if c, ok := cons.Iters[i].Extent.(*loopir.IntImm); ok {
			if pe, ok := input.Shape[i].(*loopir.IntImm); !ok || pe.V != c.V {
				return s.errf(prim, "block %s does not cover %s", cons.Name, input.Name)
			}
		}
		m[it.Var] = pst.Index[i]
	}
	if reads := countLoads(cons, input); reads > 1 && reads*exprSize(pst.Value, maxInlineCopy) > maxInlineCopy {
		return s.errf(prim, "%s's expression read %d times by block %s would copy more than %d expression nodes", input.Name, reads, cons.Name, maxInlineCopy)
	}
	value := loopir.MapExpr(cst.Value, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == input {
			return pst.Value
		}
		return e
	})
	value = loopir.Substitute(value, m)
	index := make([]loopir.Expr, len(cst.Index))
	for i, x := range cst.Index {
		index[i] = loopir.Substitute(x, m)
	}
	root, err := s.ownNest(prim, cons)
	if err != nil {
		return err
	}
	s.removeNest(root)
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Block:
			if x.Name == prodName {
				nb := *x
				nb.Body = &loopir.Store{Buf: cst.Buf, Index: index, Value: value}
				nb.Writes = substRegions(cons.Writes, m)
				nb.Reads = mergeRegions(nb.Reads, substRegions(dropRegion(cons.Reads, input), m))
				return &nb
			}
		case *loopir.Allocate:
			if x.Buf == input {
				return x.Body
			}
		}
		return nil
	})
	s.trace.add(prim, []string{string(b)}, nil, nil, nil)
	return nil
}

func isParam(f *loopir.PrimFunc, b *loopir.Buffer) bool {
	for _, p := range f.Params {
		if p == b {
			return true
		}
	}
	return false
}

// maxInlineCopy bounds the expression nodes an inline may copy when the inlined value
// is read more than once: each such inline multiplies the expression, so a chain of
// them grows it exponentially (a chain of x·x, or of ops reading their input twice,
// fused into one kernel). Refused, the producer keeps its own buffer.
const maxInlineCopy = 1024

// exprSize counts e's nodes, stopping once past limit.
func exprSize(e loopir.Expr, limit int) int {
	n := 0
	var walk func(e loopir.Expr)
	walk = func(e loopir.Expr) {
		if n > limit {
			return
		}
		n++
		switch x := e.(type) {
		case *loopir.Binary:
			walk(x.A)
			walk(x.B)
		case *loopir.Not:
			walk(x.X)
		case *loopir.Select:
			walk(x.Cond)
			walk(x.T)
			walk(x.F)
		case *loopir.Cast:
			walk(x.X)
		case *loopir.Call:
			for _, a := range x.Args {
				walk(a)
			}
		case *loopir.Load:
			for _, a := range x.Index {
				walk(a)
			}
		case *loopir.Reduce:
			walk(x.Source)
		case *loopir.Address:
			for _, a := range x.Index {
				walk(a)
			}
		}
	}
	walk(e)
	return n
}

// countAllLoads counts the loads of buf in st.
func countAllLoads(st loopir.Stmt, buf *loopir.Buffer) int {
	n := 0
	loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
			n++
		}
		return e
	}, nil)
	return n
}

func countLoads(blk *loopir.Block, buf *loopir.Buffer) int {
	n := 0
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
			if l, ok := e.(*loopir.Load); ok && l.Buf == buf {
				n++
			}
			return e
		}, nil)
	}
	return n
}

func substRegions(rs []loopir.Region, m map[*loopir.Var]loopir.Expr) []loopir.Region {
	out := make([]loopir.Region, len(rs))
	for i, r := range rs {
		out[i] = loopir.Region{Buf: r.Buf, Ranges: make([][2]loopir.Expr, len(r.Ranges))}
		for k, rg := range r.Ranges {
			out[i].Ranges[k] = [2]loopir.Expr{loopir.Substitute(rg[0], m), loopir.Substitute(rg[1], m)}
		}
	}
	return out
}
