package passes

import (
	"fmt"
	"maps"

	"github.com/kilnrt/kiln/loopir"
)

// InsertBarriers places the work-group barriers a kernel with shared buffers needs
// (loopir.Barrier), after blocks are lowered. Every thread of a block runs the same
// statements outside its thread loops and the same loops inside them, so the kernel is
// one sequence of phases between barriers; a barrier goes before a statement that
//
//   - reads a shared buffer written since the last barrier (the other threads' writes
//     must land first: the barrier after a cooperative copy), or
//   - writes a shared buffer read since the last barrier (the other threads must have
//     finished reading: the barrier before a loop's next round overwrites a tile), or
//     written since the last barrier by another statement.
//
// A loop's body is analysed with what its previous iteration left pending, to a fixed
// point, so the copy–compute loop of a tiled kernel gets both barriers (the double-
// barrier pattern: "for k { barrier; copy; barrier; compute }", the first one waiting for
// the previous round's readers). A tensor intrinsic's call reads the shared tiles whose
// addresses it is passed for parameters its description only reads (a warp's mma reads
// the copied A and B tiles); a shared tile it would write is a BUG. The same store in two iterations is not a hazard: the
// schedules give each shared element one writer per phase (a cooperative copy's rounds
// write distinct elements). Barriers only go where every thread of the block reaches
// them: a barrier needed under a condition, or in a loop whose bounds depend on a
// threadIdx loop, panics (BUG), as loopir.Verify would refuse it. A function without
// shared buffers is returned as it is.
func InsertBarriers(f *loopir.PrimFunc) *loopir.PrimFunc {
	shared := map[*loopir.Buffer]bool{}
	walkStmts(f.Body, func(s loopir.Stmt) {
		if a, ok := s.(*loopir.Allocate); ok && a.Buf.Scope == loopir.ScopeShared {
			shared[a.Buf] = true
		}
	})
	if len(shared) == 0 {
		return f
	}
	b := &barriers{f: f, shared: shared, varying: map[*loopir.Var]bool{}}
	body, _ := b.stmt(f.Body, phase{})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}
}

// phase is what the threads may have done to shared buffers since the last barrier:
// the buffers read, and per buffer written the stores that wrote it.
type phase struct {
	reads  map[*loopir.Buffer]bool
	writes map[*loopir.Buffer]map[*loopir.Store]bool
}

func (p phase) union(q phase) phase {
	out := phase{reads: maps.Clone(p.reads), writes: map[*loopir.Buffer]map[*loopir.Store]bool{}}
	if out.reads == nil {
		out.reads = map[*loopir.Buffer]bool{}
	}
	maps.Copy(out.reads, q.reads)
	for _, w := range []map[*loopir.Buffer]map[*loopir.Store]bool{p.writes, q.writes} {
		for buf, sts := range w {
			if out.writes[buf] == nil {
				out.writes[buf] = map[*loopir.Store]bool{}
			}
			maps.Copy(out.writes[buf], sts)
		}
	}
	return out
}

func (p phase) equal(q phase) bool {
	if len(p.reads) != len(q.reads) || len(p.writes) != len(q.writes) {
		return false
	}
	for buf := range p.reads {
		if !q.reads[buf] {
			return false
		}
	}
	for buf, sts := range p.writes {
		if len(q.writes[buf]) != len(sts) {
			return false
		}
		for st := range sts {
			if !q.writes[buf][st] {
				return false
			}
		}
	}
	return true
}

// conflicts reports whether a statement with accesses a must wait for what p holds: it
// reads a buffer written, or writes a buffer read or written by another statement.
func (p phase) conflicts(a phase) bool {
	for buf := range a.reads {
		if len(p.writes[buf]) > 0 {
			return true
		}
	}
	for buf, sts := range a.writes {
		if p.reads[buf] {
			return true
		}
		for st := range p.writes[buf] {
			if !sts[st] {
				return true
			}
		}
	}
	return false
}

type barriers struct {
	f       *loopir.PrimFunc
	shared  map[*loopir.Buffer]bool
	varying map[*loopir.Var]bool // threadIdx loops and loops whose bounds depend on them
}

// accesses collects the shared-buffer reads and writes of a statement (the writes by
// the statement's own Store nodes, which stay the same across the analysis).
func (b *barriers) accesses(s loopir.Stmt) phase {
	p := phase{reads: map[*loopir.Buffer]bool{}, writes: map[*loopir.Buffer]map[*loopir.Store]bool{}}
	loads := func(e loopir.Expr) {
		if e == nil {
			return
		}
		loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
			switch x := x.(type) {
			case *loopir.Load:
				if b.shared[x.Buf] {
					p.reads[x.Buf] = true
				}
			case *loopir.Address:
				if b.shared[x.Buf] {
					panic(fmt.Sprintf("BUG: InsertBarriers: %s: shared buffer %s is passed to a tensor intrinsic", b.f.Name, x.Buf.Name))
				}
			}
			return x
		})
	}
	var rec func(loopir.Stmt)
	rec = func(s loopir.Stmt) {
		switch s := s.(type) {
		case loopir.Seq:
			for _, c := range s {
				rec(c)
			}
		case *loopir.For:
			loads(s.Min)
			loads(s.Extent)
			rec(s.Body)
		case *loopir.IfThenElse:
			loads(s.Cond)
			rec(s.Then)
			rec(s.Else)
		case *loopir.Allocate:
			rec(s.Body)
		case *loopir.Store:
			for _, i := range s.Index {
				loads(i)
			}
			loads(s.Value)
			if b.shared[s.Buf] {
				if p.writes[s.Buf] == nil {
					p.writes[s.Buf] = map[*loopir.Store]bool{}
				}
				p.writes[s.Buf][s] = true
			}
		case *loopir.IntrinCall:
			// a shared tile the intrinsic only reads is a read of its buffer
			readOnly := intrinReadOnly(s.Intrin)
			for i, a := range s.Args {
				if x, ok := a.(*loopir.Address); ok && b.shared[x.Buf] && readOnly[i] {
					p.reads[x.Buf] = true
					for _, i := range x.Index {
						loads(i)
					}
					continue
				}
				loads(a)
			}
		case *loopir.Block:
			panic(fmt.Sprintf("BUG: InsertBarriers: %s: block %s was not lowered", b.f.Name, s.Name))
		}
	}
	rec(s)
	return p
}

// stmt returns s with the barriers it needs, given what is pending before it, and what
// is pending after it.
func (b *barriers) stmt(s loopir.Stmt, pending phase) (loopir.Stmt, phase) {
	switch s := s.(type) {
	case nil:
		return nil, pending
	case loopir.Seq:
		return b.seq(s, pending)
	case *loopir.For:
		return b.loop(s, pending)
	case *loopir.Allocate:
		body, after := b.seq(s.Body, pending)
		return &loopir.Allocate{Buf: s.Buf, Body: body}, after
	case *loopir.IfThenElse:
		then, p1 := b.seq(s.Then, pending)
		els, p2 := b.seq(s.Else, pending)
		if (hasBarrier(then) || hasBarrier(els)) && b.uses(s.Cond) {
			panic(fmt.Sprintf("BUG: InsertBarriers: %s: a barrier is needed under condition %s, which depends on a threadIdx loop", b.f.Name, loopir.ExprString(s.Cond)))
		}
		return &loopir.IfThenElse{Cond: s.Cond, Then: then, Else: els}, p1.union(p2)
	case *loopir.Barrier:
		return s, phase{}
	}
	// a store or an intrinsic call
	return s, pending.union(b.accesses(s))
}

// seq runs the statements of s (one statement is a sequence of one, nested sequences
// are one sequence) in order: a barrier
// goes before a statement whose accesses conflict with what is pending, as far out as
// it can (before a loop or a branch rather than inside it); what a statement needs
// inside it goes inside it.
func (b *barriers) seq(s loopir.Stmt, pending phase) (loopir.Stmt, phase) {
	if s == nil {
		return nil, pending
	}
	_, isSeq := s.(loopir.Seq)
	list := flatten(s, nil)
	out := make(loopir.Seq, 0, len(list))
	for _, c := range list {
		if _, ok := c.(*loopir.Barrier); ok {
			out = append(out, c)
			pending = phase{}
			continue
		}
		if pending.conflicts(b.accesses(c)) {
			out = append(out, &loopir.Barrier{})
			pending = phase{}
		}
		var r loopir.Stmt
		r, pending = b.stmt(c, pending)
		out = append(out, r)
	}
	if !isSeq && len(out) == 1 {
		return out[0], pending
	}
	return out, pending
}

// loop analyses a loop's body with what the previous iteration left pending, until that
// no longer grows. A loop bound to a thread axis runs once per thread (or block): it is
// no repetition in time.
func (b *barriers) loop(l *loopir.For, pending phase) (loopir.Stmt, phase) {
	rebuild := func(body loopir.Stmt) loopir.Stmt {
		return &loopir.For{Var: l.Var, Min: l.Min, Extent: l.Extent, Kind: l.Kind, Annotations: l.Annotations, Body: body}
	}
	if a, ok := l.Kind.Thread(); ok {
		if !a.IsBlock() {
			b.varying[l.Var] = true
		}
		body, after := b.seq(l.Body, pending)
		return rebuild(body), after
	}
	if b.uses(l.Min) || b.uses(l.Extent) {
		b.varying[l.Var] = true
	}
	in := pending
	var body loopir.Stmt
	var end phase
	for { // pending only grows, over finitely many buffers and stores
		body, end = b.seq(l.Body, in)
		next := pending.union(end)
		if next.equal(in) {
			break
		}
		in = next
	}
	if hasBarrier(body) && b.varying[l.Var] {
		panic(fmt.Sprintf("BUG: InsertBarriers: %s: a barrier is needed in loop %s, whose bounds depend on a threadIdx loop", b.f.Name, l.Var.Name))
	}
	// the loop may run no iteration: what was pending before it may still be
	return rebuild(body), pending.union(end)
}

// uses reports whether e depends on a threadIdx loop.
func (b *barriers) uses(e loopir.Expr) bool {
	found := false
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, ok := x.(*loopir.Var); ok && b.varying[v] {
			found = true
		}
		return x
	})
	return found
}

// flatten appends the statements of s to out, nested sequences spliced in.
func flatten(s loopir.Stmt, out loopir.Seq) loopir.Seq {
	if seq, ok := s.(loopir.Seq); ok {
		for _, c := range seq {
			out = flatten(c, out)
		}
		return out
	}
	return append(out, s)
}

func hasBarrier(s loopir.Stmt) bool {
	found := false
	walkStmts(s, func(x loopir.Stmt) {
		if _, ok := x.(*loopir.Barrier); ok {
			found = true
		}
	})
	return found
}

// walkStmts calls f on every statement of s.
func walkStmts(s loopir.Stmt, f func(loopir.Stmt)) {
	loopir.MapStmt(s, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		f(x)
		return nil
	})
}

// intrinReadOnly marks the call arguments of in that are the addresses of parameters
// its description only reads (by argument position, per the calling convention).
func intrinReadOnly(in *loopir.TensorIntrin) map[int]bool {
	loops, blk, ok := loopir.DescNest(in.Desc.Body)
	if !ok {
		panic("BUG: tensor intrinsic " + in.Name + " has a description that is not a perfect nest")
	}
	written := map[*loopir.Buffer]bool{}
	for _, w := range blk.Writes {
		written[w.Buf] = true
	}
	out := map[int]bool{}
	for p, buf := range in.Desc.Params {
		if !written[buf] {
			out[p*(1+len(loops))] = true
		}
	}
	return out
}
