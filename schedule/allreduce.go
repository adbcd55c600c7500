package schedule

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// AllReduce makes the threads of a GPU block share a reduction that each of them
// computes alike: block b, under loop l (bound to a threadIdx axis, the only one of the
// function), reduces over the loops between it and l into storage of its own, the same
// value in every thread. Afterwards the block's threads (threads of them, a power of two)
// divide the reduction: thread t combines the elements t, t + threads, t + 2·threads, …
// of the reduction loops' domain (numbered row-major, the last loop fastest, so that
// consecutive threads read consecutive elements) into a private partial, the partials go
// to a shared buffer of threads elements, a tree combines them (for s = threads/2 … 1,
// the threads t < s combine element t + s into element t), and the result, element 0
// combined with b's init value, is written back: by every thread into a local buffer
// (each thread's own copy, which the stages after b read), by thread 0 into any other.
// The barriers between the tree's levels come from loopir/passes.InsertBarriers.
//
// When l runs fewer iterations than threads (one output element per block: l of extent
// 1), it is widened to threads, and every other block under it gets the predicate
// l < its former extent, but those that only write local buffers and depend in nothing
// on l (they compute the same values in every thread: the statistics of the other
// reductions).
//
// Preconditions (checked; a refusal leaves the schedule as it was): b stores at one
// index, its init a value and its update the combination of that element with an
// operand by +, ·, max or min (associative and commutative: the threads regroup the
// elements, which changes a float sum's rounding and, with a NaN among a max's elements,
// which operand wins); the loops between l and b are spatial loops (a value per
// iteration, computed in turn, each with its own tree; those of one iteration right
// above the reduction loops are dropped) then b's reduction loops, a perfect nest of
// loops that drive nothing but b's reduction iterators and whose bounds depend on no
// other of them; nothing between l and b is a condition; b (its bindings, its
// predicate, which then restricts the partials and, where it reads no reduction
// variable, the write-back) and the local buffers it reads depend in nothing on l
// (every thread would compute the same reduction); l's extent is a constant of at most
// threads; a b that writes no local buffer runs in one thread (l of extent 1). The new
// blocks are named after b: <b>_part_init and <b>_part (the partial), <b>_lanes (the
// partial into the shared buffer <b>_red), <b>_tree<s> (a level of the tree, and
// <b>_tree<s>_index before it for an arg-reduction's index); b is the write-back.
func (s *Schedule) AllReduce(b BlockRV, l LoopRV, threads int64) error {
	const prim = "all_reduce"
	name, ok := s.blocks[b]
	if !ok {
		return s.errf(prim, "unknown block %s", b)
	}
	at, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	if a, ok := at.Kind.Thread(); !ok || a.IsBlock() {
		return s.errf(prim, "loop %s is %v, not bound to a threadIdx axis", at.Var.Name, at.Kind)
	}
	if threads < 2 || threads&(threads-1) != 0 {
		return s.errf(prim, "%d threads: a tree needs a power of two of at least 2", threads)
	}
	ext, ok := loopir.NewAnalyzer(s.f.Dims).Simplify(at.Extent).(*loopir.IntImm)
	if !ok || ext.V < 1 || ext.V > threads {
		return s.errf(prim, "loop %s has extent %s; it must be a constant from 1 to %d", at.Var.Name, loopir.ExprString(at.Extent), threads)
	}
	var other error
	walk(s.f.Body, func(x loopir.Stmt) {
		if f, ok := x.(*loopir.For); ok && f.Var != at.Var && other == nil {
			if a, ok := f.Kind.Thread(); ok && !a.IsBlock() {
				other = s.errf(prim, "loop %s is bound to %v too: the threads of a block must be loop %s's alone", f.Var.Name, a, at.Var.Name)
			}
		}
	})
	if other != nil {
		return other
	}
	blk := findBlock(s.f.Body, name)
	red, err := s.matchReduction(prim, blk)
	if err != nil {
		return err
	}
	nest, err := s.reductionNest(prim, at, blk)
	if err != nil {
		return err
	}
	if err := s.checkAccumulator(prim, red, nest); err != nil {
		return err
	}
	lanes := newLaneAnalysis(s.f, at)
	if v := lanes.dependence(blk); v != "" {
		return s.errf(prim, "block %s depends on loop %s (%s): its threads would not compute the same reduction", name, at.Var.Name, v)
	}
	for _, f := range nest.path {
		if v := lanes.uses(f.Min) + lanes.uses(f.Extent); v != "" {
			return s.errf(prim, "the bounds of loop %s around block %s depend on loop %s: not every thread would reach the tree's barriers", f.Var.Name, name, v)
		}
	}
	local := red.store.Buf.Scope == loopir.ScopeLocal
	if !local && ext.V > 1 {
		return s.errf(prim, "block %s writes %s (scope %s) from %d threads", name, red.store.Buf.Name, red.store.Buf.Scope, ext.V)
	}
	if red.index != nil && (red.index.Buf.Scope == loopir.ScopeLocal) != local {
		return s.errf(prim, "block %s writes its value to %s (scope %s) and its index to %s (scope %s)", name, red.store.Buf.Name, red.store.Buf.Scope, red.index.Buf.Name, red.index.Buf.Scope)
	}
	names := []string{name + "_part_init", name + "_part", name + "_lanes"}
	for w := threads / 2; w >= 1; w /= 2 {
		names = append(names, fmt.Sprintf("%s_tree%d", name, w), fmt.Sprintf("%s_tree%d_index", name, w))
	}
	for _, n := range names {
		if findBlock(s.f.Body, n) != nil {
			return s.errf(prim, "a block named %s exists already", n)
		}
	}
	// the blocks the widened loop must keep to its former iterations
	var guard []string
	if ext.V < threads {
		walk(at.Body, func(x loopir.Stmt) {
			if ob, ok := x.(*loopir.Block); ok && ob.Name != name && (!lanes.private(ob) || lanes.dependence(ob) != "") {
				guard = append(guard, ob.Name)
			}
		})
	}

	shared := red.newParts(name+"_red", loopir.ScopeShared, threads)
	repl := red.rewrite(name, at.Var, threads, nest, shared)
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		f, ok := x.(*loopir.For)
		if !ok {
			return nil
		}
		switch f.Var {
		case nest.top.Var:
			return repl
		case at.Var:
			body := f.Body
			if len(guard) > 0 {
				cond := loopir.Bin(loopir.LT, at.Var, ext)
				body = loopir.MapStmt(body, func(e loopir.Expr) loopir.Expr { return e }, func(y loopir.Stmt) loopir.Stmt {
					if ob, ok := y.(*loopir.Block); ok && slices.Contains(guard, ob.Name) {
						return addPredicate(ob, cond)
					}
					return nil
				})
			}
			return shared.around(&loopir.For{Var: f.Var, Min: f.Min, Extent: loopir.Int(threads), Kind: f.Kind, Body: body, Annotations: f.Annotations})
		}
		return nil
	})
	s.trace.add(prim, []string{string(b), string(l)}, nil, []int64{threads}, nil)
	return nil
}
