package schedule

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// ComputeAt moves a producer block under loop l of its consumers: at every iteration of
// l, the producer computes exactly the part of its buffers that the statements under l
// read (bounded per axis from their affine indices; clipped to the buffer). The block
// must store at its spatial iterators (one store, or several buffers at the same index,
// as an arg-reduction stores its index and value) into buffers the function allocates,
// sit alone in its own loop nest, and every reader of its buffers other than itself must
// be under l (a reduction reads its own accumulator). A local buffer whose every access
// is then under l is allocated under l over just that region (compactAt): per-thread
// storage under a loop bound to a thread axis.
//
// A shared buffer (an elementwise producer, one buffer) must be under a loop bound to a
// threadIdx axis (l or one enclosing it), and stays one per block: its region is what
// every thread of the block reads under l (the threadIdx loops vary too; the region
// must not depend on them), the buffer is shrunk to it where it is allocated
// (compactShared), and the producer becomes a cooperative copy (cooperativeNest): the
// block's threads each compute a share of the region. The barriers between the copy
// and its readers come from loopir/passes.InsertBarriers.
func (s *Schedule) ComputeAt(b BlockRV, l LoopRV) error {
	const prim = "compute_at"
	blk, bufs, at, root, err := s.moveTarget(prim, b, l)
	if err != nil {
		return err
	}
	allocated := s.allocations()
	var inside []access
	for _, buf := range bufs {
		if !allocated[buf] {
			return s.errf(prim, "block %s writes %s, which the function does not allocate", blk.Name, buf.Name)
		}
		all, err1 := collectAccesses(s.f.Body, buf, false)
		own, err2 := collectAccesses(root, buf, false)
		in, err3 := collectAccesses(at.Body, buf, false)
		if err := errors.Join(err1, err2, err3); err != nil {
			return s.errf(prim, "%v", err)
		}
		if len(in) != len(all)-len(own) {
			return s.errf(prim, "%s is also read outside loop %s", buf.Name, at.Var.Name)
		}
		inside = append(inside, in...)
	}
	if len(inside) == 0 {
		return s.errf(prim, "nothing under loop %s reads %s", at.Var.Name, bufs[0].Name)
	}
	threads := s.threadLoopsAt(at)
	shared := bufs[0].Scope == loopir.ScopeShared
	if shared {
		if len(bufs) != 1 {
			return s.errf(prim, "block %s writes %d buffers; a shared buffer is filled by a block of one store", blk.Name, len(bufs))
		}
		if len(threads) == 0 {
			return s.errf(prim, "shared buffer %s: loop %s is under no loop bound to a threadIdx axis, so no block's threads share the copy", bufs[0].Name, at.Var.Name)
		}
		for i := range inside { // the region every thread of the block reads
			inside[i].loops = append(inside[i].loops, threads...)
		}
	}
	an := s.analyzerAt(at)
	region, err := coverRegion(an, inside, len(bufs[0].Shape))
	if err != nil {
		return s.errf(prim, "region of %s under %s: %v", bufs[0].Name, at.Var.Name, err)
	}
	var nest loopir.Stmt
	if shared {
		if err := s.uniformRegion(prim, at, region); err != nil {
			return err
		}
		if nest, err = s.cooperativeNest(prim, an, blk, region, threads); err != nil {
			return err
		}
		if w, _ := collectAccesses(s.f.Body, bufs[0], true); len(w) != len(storesIn(blk, bufs[0])) {
			return s.errf(prim, "%s is also written outside block %s", bufs[0].Name, blk.Name)
		}
	} else {
		nest = s.renest(an, blk, region)
	}
	s.removeNest(root)
	s.replaceLoop(at.Var, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: f.Kind, Body: loopir.Seq{nest, f.Body}, Annotations: f.Annotations}
	})
	if shared {
		s.compactShared(an, bufs[0], region)
	}
	for _, buf := range bufs {
		s.compactAt(an, at.Var, buf, region)
	}
	s.trace.add(prim, []string{string(b), string(l)}, nil, nil, nil)
	return nil
}

// ReverseComputeAt moves a consumer block under loop l of its producer: at every
// iteration of l, the consumer computes the elements whose input the statements under l
// have just finished writing. The consumer must be elementwise in that input up to an
// order of the axes (it reads it at exactly its own iterators, possibly permuted: a
// layout change from blocked to plain storage) and the producer's writes must be complete within an
// iteration of l (no reduction loop of the producer at or above l).
//
// Under a loop bound to a threadIdx axis, an allocated local input is compacted to the
// region written under l and allocated under l: each thread keeps its part (a register
// tile). Each write must then cover the region densely (denseCover: a thread's copy
// reads nothing it did not write), and nothing outside l may read the input. A shared
// input there is refused.
func (s *Schedule) ReverseComputeAt(b BlockRV, l LoopRV) error {
	const prim = "reverse_compute_at"
	blk, _, at, root, err := s.moveTarget(prim, b, l)
	if err != nil {
		return err
	}
	// the input the consumer reads that is produced under l
	var input *loopir.Buffer
	for _, r := range blk.Reads {
		if w, _ := collectAccesses(at.Body, r.Buf, true); len(w) > 0 {
			if input != nil && input != r.Buf {
				return s.errf(prim, "block %s reads two buffers written under %s", blk.Name, at.Var.Name)
			}
			input = r.Buf
		}
	}
	if input == nil {
		return s.errf(prim, "block %s reads nothing written under loop %s", blk.Name, at.Var.Name)
	}
	perm, ok := readsAtPermutedIters(blk, input)
	if !ok {
		return s.errf(prim, "block %s does not read %s at exactly its iterators (in some order)", blk.Name, input.Name)
	}
	// moving the consumer earlier must not make it read anything before it is written
	order := blockOrder(s.f.Body)
	first := -1
	walk(at.Body, func(x loopir.Stmt) {
		if b, ok := x.(*loopir.Block); ok && (first < 0 || order[b.Name] < first) {
			first = order[b.Name]
		}
	})
	for _, r := range blk.Reads {
		if r.Buf == input {
			continue
		}
		for name, i := range writerBlocks(s.f.Body, r.Buf, order) {
			if i >= first && name != blk.Name {
				return s.errf(prim, "block %s also reads %s, which block %s writes at or after loop %s", blk.Name, r.Buf.Name, name, at.Var.Name)
			}
		}
	}
	all, _ := collectAccesses(s.f.Body, input, true)
	writes, err := collectAccesses(at.Body, input, true)
	if err != nil {
		return s.errf(prim, "%v", err)
	}
	if len(all) != len(writes) {
		return s.errf(prim, "%s is also written outside loop %s", input.Name, at.Var.Name)
	}
	if v := s.reductionAtOrAbove(at, input); v != "" {
		return s.errf(prim, "%s is still being reduced by loop %s at loop %s", input.Name, v, at.Var.Name)
	}
	an := s.analyzerAt(at)
	region, err := coverRegion(an, writes, len(input.Shape))
	if err != nil {
		return s.errf(prim, "region of %s written under %s: %v", input.Name, at.Var.Name, err)
	}
	compact := len(s.threadLoopsAt(at)) > 0 && s.allocations()[input]
	if compact {
		if input.Scope != loopir.ScopeLocal {
			return s.errf(prim, "%s buffer %s under a thread loop: only a local one is kept per thread", input.Scope, input.Name)
		}
		if err := denseCover(an, writes, region); err != nil {
			return s.errf(prim, "the writes of %s under %s leave holes in their region: %v", input.Name, at.Var.Name, err)
		}
		reads, _ := collectAccesses(s.f.Body, input, false)
		under, _ := collectAccesses(at.Body, input, false)
		if len(reads) != len(under)+countLoads(blk, input) {
			return s.errf(prim, "%s is also read outside loop %s", input.Name, at.Var.Name)
		}
	}
	own := make([]dimRange, len(region)) // the region over the consumer's iterators
	for d, r := range region {
		own[perm[d]] = r
	}
	nest := s.renest(an, blk, own)
	s.removeNest(root)
	s.replaceLoop(at.Var, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: f.Kind, Body: loopir.Seq{f.Body, nest}, Annotations: f.Annotations}
	})
	if compact {
		s.compactAt(an, at.Var, input, region)
	}
	s.trace.add(prim, []string{string(b), string(l)}, nil, nil, nil)
	return nil
}

// moveTarget resolves the block to move (see elementBlock), the loop to move it under
// and the root of the block's own nest, which must not contain that loop.
func (s *Schedule) moveTarget(prim string, b BlockRV, l LoopRV) (*loopir.Block, []*loopir.Buffer, *loopir.For, *loopir.For, error) {
	blk, bufs, err := s.elementBlock(prim, b)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	at, err := s.loop(prim, l)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	root, err := s.ownNest(prim, blk)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if findLoop(root, at.Var) != nil {
		return nil, nil, nil, nil, s.errf(prim, "loop %s belongs to block %s's own nest", at.Var.Name, blk.Name)
	}
	return blk, bufs, at, root, nil
}

// elementBlock resolves a block whose every store (one, or a sequence of them, init
// included) is at its spatial iterators, in order (its reduction iterators, if any,
// after them), and returns the buffers it stores into.
func (s *Schedule) elementBlock(prim string, b BlockRV) (*loopir.Block, []*loopir.Buffer, error) {
	name, ok := s.blocks[b]
	if !ok {
		return nil, nil, s.errf(prim, "unknown block %s", b)
	}
	blk := findBlock(s.f.Body, name)
	var spatial []*loopir.Var
	for _, it := range blk.Iters {
		if it.Kind == loopir.Spatial {
			spatial = append(spatial, it.Var)
		}
	}
	var bufs []*loopir.Buffer
	for _, part := range []loopir.Stmt{blk.Init, blk.Body} {
		stores, ok := storeList(part)
		if !ok {
			return nil, nil, s.errf(prim, "block %s is not a single store", name)
		}
		for _, st := range stores {
			if len(st.Index) != len(spatial) {
				return nil, nil, s.errf(prim, "block %s does not store at its spatial iterators", name)
			}
			for i, v := range spatial {
				if st.Index[i] != loopir.Expr(v) {
					return nil, nil, s.errf(prim, "block %s does not store at its spatial iterators", name)
				}
			}
			if !slices.Contains(bufs, st.Buf) {
				bufs = append(bufs, st.Buf)
			}
		}
	}
	if len(bufs) == 0 {
		return nil, nil, s.errf(prim, "block %s is not a single store", name)
	}
	return blk, bufs, nil
}

// storeList is the stores of a block's body or init: one store, a sequence of stores,
// or nothing (nil); ok is false for any other statement.
func storeList(st loopir.Stmt) ([]*loopir.Store, bool) {
	switch x := st.(type) {
	case nil:
		return nil, true
	case *loopir.Store:
		return []*loopir.Store{x}, true
	case loopir.Seq:
		var out []*loopir.Store
		for _, c := range x {
			one, ok := c.(*loopir.Store)
			if !ok {
				return nil, false
			}
			out = append(out, one)
		}
		return out, true
	}
	return nil, false
}

// readsAtPermutedIters reports whether every load of buf in the block is at its
// iterators, all spatial, in one order: index d is iterator perm[d] (a transpose reads
// its input so; perm is the identity for an elementwise consumer).
func readsAtPermutedIters(blk *loopir.Block, buf *loopir.Buffer) ([]int, bool) {
	pos := map[loopir.Expr]int{}
	for i, it := range blk.Iters {
		if it.Kind != loopir.Spatial {
			return nil, false
		}
		pos[it.Var] = i
	}
	var perm []int
	ok := true
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
			l, isLoad := e.(*loopir.Load)
			if !isLoad || l.Buf != buf {
				return e
			}
			if len(l.Index) != len(blk.Iters) {
				ok = false
				return e
			}
			p := make([]int, len(l.Index))
			seen := make([]bool, len(l.Index))
			for d, x := range l.Index {
				i, found := pos[x]
				if !found || seen[i] {
					ok = false
					return e
				}
				p[d], seen[i] = i, true
			}
			if perm != nil && !slices.Equal(perm, p) {
				ok = false
			}
			perm = p
			return e
		}, nil)
	}
	return perm, ok && perm != nil
}

// readsAtIters reports whether every load of buf in the block is at its iterators.
func readsAtIters(blk *loopir.Block, buf *loopir.Buffer) bool {
	ok := true
	for _, st := range []loopir.Stmt{blk.Init, blk.Body} {
		loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
			if l, isLoad := e.(*loopir.Load); isLoad && l.Buf == buf {
				if len(l.Index) != len(blk.Iters) {
					ok = false
					return e
				}
				for i, it := range blk.Iters {
					if it.Kind != loopir.Spatial || l.Index[i] != loopir.Expr(it.Var) {
						ok = false
					}
				}
			}
			return e
		}, nil)
	}
	return ok
}

// ownNest returns the outermost loop whose subtree is a perfect nest around the block.
func (s *Schedule) ownNest(prim string, blk *loopir.Block) (*loopir.For, error) {
	path := loopsAbove(s.f.Body, blk.Name)
	var root *loopir.For
	for i := len(path) - 1; i >= 0; i-- {
		if i == len(path)-1 {
			if b, ok := path[i].Body.(*loopir.Block); !ok || b.Name != blk.Name {
				break
			}
		} else if path[i].Body != loopir.Stmt(path[i+1]) {
			break
		}
		root = path[i]
	}
	if root == nil {
		return nil, s.errf(prim, "block %s is not alone in a loop nest", blk.Name)
	}
	return root, nil
}

// reductionAtOrAbove names a loop at or above at (at included) that drives a reduction
// iterator of a block writing buf, or returns "".
func (s *Schedule) reductionAtOrAbove(at *loopir.For, buf *loopir.Buffer) string {
	outer := map[*loopir.Var]bool{at.Var: true}
	var path []*loopir.For
	var rec func(st loopir.Stmt) bool
	rec = func(st loopir.Stmt) bool {
		switch x := st.(type) {
		case loopir.Seq:
			for _, c := range x {
				if rec(c) {
					return true
				}
			}
		case *loopir.For:
			if x.Var == at.Var {
				for _, p := range path {
					outer[p.Var] = true
				}
				return true
			}
			path = append(path, x)
			found := rec(x.Body)
			path = path[:len(path)-1]
			return found
		case *loopir.IfThenElse:
			return rec(x.Then) || rec(x.Else)
		case *loopir.Allocate:
			return rec(x.Body)
		}
		return false
	}
	rec(s.f.Body)
	name := ""
	walk(at.Body, func(x loopir.Stmt) {
		blk, ok := x.(*loopir.Block)
		if !ok {
			return
		}
		writes := false
		walk(blk.Body, func(y loopir.Stmt) {
			if st, ok := y.(*loopir.Store); ok && st.Buf == buf {
				writes = true
			}
		})
		if !writes {
			return
		}
		for i, it := range blk.Iters {
			if it.Kind != loopir.Reduction {
				continue
			}
			for _, v := range freeVars(blk.Bindings[i]) {
				if outer[v] {
					name = v.Name
				}
			}
		}
	})
	return name
}

// analyzerAt knows the dims and the ranges of at and the loops above it.
func (s *Schedule) analyzerAt(at *loopir.For) *loopir.Analyzer {
	an := loopir.NewAnalyzer(s.f.Dims)
	var bind func(st loopir.Stmt) bool
	bind = func(st loopir.Stmt) bool {
		switch x := st.(type) {
		case loopir.Seq:
			for _, c := range x {
				if bind(c) {
					return true
				}
			}
		case *loopir.For:
			an.BindLoop(x.Var, x.Min, x.Extent)
			return x.Var == at.Var || bind(x.Body)
		case *loopir.IfThenElse:
			return bind(x.Then) || bind(x.Else)
		case *loopir.Allocate:
			return bind(x.Body)
		}
		return false
	}
	bind(s.f.Body)
	return an
}

// renest rebuilds a block's loop nest over a region of the buffer its spatial
// iterators index (region axis d ↔ spatial iterator d): one loop per axis over the
// region, reduction iterators over their full extents inside, and a predicate clipping
// the region to the buffer where the bounds do not prove it inside.
func (s *Schedule) renest(an *loopir.Analyzer, blk *loopir.Block, region []dimRange) loopir.Stmt {
	nb := *blk
	nb.Bindings = make([]loopir.Expr, len(blk.Iters))
	nb.Predicate = nil
	var loops []*loopir.For
	d := 0
	for i, it := range blk.Iters {
		v := loopir.NewVar(fmt.Sprintf("%s_c%d", blk.Name, i))
		if it.Kind == loopir.Spatial {
			r := region[d]
			d++
			loops = append(loops, &loopir.For{Var: v, Min: loopir.Int(0), Extent: loopir.Int(r.Extent)})
			an.Bind(v, loopir.Bounds{Min: 0, Max: r.Extent - 1})
			x := loopir.Bin(loopir.Add, r.Min, v)
			nb.Bindings[i] = x
			for _, c := range []loopir.Expr{loopir.Bin(loopir.GE, x, loopir.Int(0)), loopir.Bin(loopir.LT, x, it.Extent)} {
				if k, ok := an.Simplify(c).(*loopir.IntImm); ok && k.V != 0 {
					continue
				}
				if nb.Predicate == nil {
					nb.Predicate = c
				} else {
					nb.Predicate = loopir.Bin(loopir.And, nb.Predicate, c)
				}
			}
			continue
		}
		loops = append(loops, &loopir.For{Var: v, Min: loopir.Int(0), Extent: it.Extent})
		nb.Bindings[i] = v
	}
	var out loopir.Stmt = &nb
	for i := len(loops) - 1; i >= 0; i-- {
		loops[i].Body = out
		out = loops[i]
	}
	return out
}

// removeNest deletes a loop nest and the empty statements it leaves.
func (s *Schedule) removeNest(root *loopir.For) {
	s.replaceLoop(root.Var, func(*loopir.For) loopir.Stmt { return loopir.Seq{} })
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, pruneEmpty)
}

// blockOrder numbers blocks in program order.
func blockOrder(body loopir.Stmt) map[string]int {
	order := map[string]int{}
	walk(body, func(x loopir.Stmt) {
		if b, ok := x.(*loopir.Block); ok {
			order[b.Name] = len(order)
		}
	})
	return order
}

// writerBlocks maps the blocks that store into buf to their program order.
func writerBlocks(body loopir.Stmt, buf *loopir.Buffer, order map[string]int) map[string]int {
	out := map[string]int{}
	walk(body, func(x loopir.Stmt) {
		b, ok := x.(*loopir.Block)
		if !ok {
			return
		}
		for _, st := range []loopir.Stmt{b.Init, b.Body} {
			walk(st, func(y loopir.Stmt) {
				if w, ok := y.(*loopir.Store); ok && w.Buf == buf {
					out[b.Name] = order[b.Name]
				}
			})
		}
	})
	return out
}
