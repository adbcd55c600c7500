package schedule

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/loopir"
)

// Split replaces a loop by len(factors) nested loops whose extents are the factors (one
// factor may be -1: inferred). When the factors do not divide the extent exactly, every
// block below gets a predicate so that no iteration runs past it.
func (s *Schedule) Split(l LoopRV, factors []int64) ([]LoopRV, error) {
	f, err := s.loop("split", l)
	if err != nil {
		return nil, err
	}
	if len(factors) < 2 {
		return nil, s.errf("split", "needs at least two factors, got %v", factors)
	}
	if a, ok := f.Kind.Thread(); ok {
		return nil, s.errf("split", "loop %s is bound to %v (split before binding)", f.Var.Name, a)
	}
	if !isZero(f.Min) {
		return nil, s.errf("split", "loop %s does not start at 0", f.Var.Name)
	}
	infer, known := -1, int64(1)
	for i, x := range factors {
		switch {
		case x == -1 && infer < 0:
			infer = i
		case x <= 0:
			return nil, s.errf("split", "bad factors %v (positive, at most one -1)", factors)
		default:
			known *= x
		}
	}
	extents := make([]loopir.Expr, len(factors))
	for i, x := range factors {
		extents[i] = loopir.Int(x)
	}
	exact := false
	if e, ok := f.Extent.(*loopir.IntImm); ok {
		if infer >= 0 {
			extents[infer] = loopir.Int((e.V + known - 1) / known)
			exact = e.V%known == 0
		} else {
			exact = e.V == known
		}
	} else if infer >= 0 {
		extents[infer] = loopir.Bin(loopir.Div, loopir.Bin(loopir.Add, f.Extent, loopir.Int(known-1)), loopir.Int(known))
	}
	vars := make([]*loopir.Var, len(factors))
	var combined loopir.Expr = loopir.Int(0)
	for i := range vars {
		vars[i] = loopir.NewVar(fmt.Sprintf("%s_%d", f.Var.Name, i))
		combined = loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, combined, extents[i]), vars[i])
	}
	old := f.Var
	s.replaceLoop(old, func(f *loopir.For) loopir.Stmt {
		body := substituteIn(f.Body, map[*loopir.Var]loopir.Expr{old: combined})
		if !exact {
			body = addPredicate(body, loopir.Bin(loopir.LT, combined, f.Extent))
		}
		for i := len(vars) - 1; i >= 0; i-- {
			body = &loopir.For{Var: vars[i], Min: loopir.Int(0), Extent: extents[i], Body: body}
		}
		return body
	})
	out := make([]LoopRV, len(vars))
	names := make([]string, len(vars))
	for i, v := range vars {
		out[i] = s.newLoop(v)
		names[i] = string(out[i])
	}
	s.trace.add("split", []string{string(l)}, nil, append([]int64{}, factors...), names)
	return out, nil
}

// chain checks that loops are directly nested, outermost first, and returns their nodes.
func (s *Schedule) chain(prim string, loops []LoopRV) ([]*loopir.For, error) {
	nodes := make([]*loopir.For, len(loops))
	for i, l := range loops {
		f, err := s.loop(prim, l)
		if err != nil {
			return nil, err
		}
		nodes[i] = f
	}
	for i := 1; i < len(nodes); i++ {
		inner, ok := nodes[i-1].Body.(*loopir.For)
		if !ok || inner.Var != nodes[i].Var {
			return nil, s.errf(prim, "loop %s is not directly inside %s", nodes[i].Var.Name, nodes[i-1].Var.Name)
		}
	}
	return nodes, nil
}

// Fuse merges directly nested loops (outermost first) into one loop over the product of
// their extents.
func (s *Schedule) Fuse(loops ...LoopRV) (LoopRV, error) {
	if len(loops) < 2 {
		return "", s.errf("fuse", "needs at least two loops")
	}
	nodes, err := s.chain("fuse", loops)
	if err != nil {
		return "", err
	}
	var total loopir.Expr = loopir.Int(1)
	for _, n := range nodes {
		if a, ok := n.Kind.Thread(); ok {
			return "", s.errf("fuse", "loop %s is bound to %v (fuse before binding)", n.Var.Name, a)
		}
		if !isZero(n.Min) {
			return "", s.errf("fuse", "loop %s does not start at 0", n.Var.Name)
		}
		total = loopir.Bin(loopir.Mul, total, n.Extent)
	}
	fused := loopir.NewVar(nodes[0].Var.Name + "_fused")
	m := map[*loopir.Var]loopir.Expr{}
	var stride loopir.Expr = loopir.Int(1)
	for i := len(nodes) - 1; i >= 0; i-- {
		q := loopir.Bin(loopir.Div, fused, stride)
		if i > 0 {
			q = loopir.Bin(loopir.Mod, q, nodes[i].Extent)
		}
		m[nodes[i].Var] = q
		stride = loopir.Bin(loopir.Mul, stride, nodes[i].Extent)
	}
	innermost := nodes[len(nodes)-1]
	s.replaceLoop(nodes[0].Var, func(*loopir.For) loopir.Stmt {
		return &loopir.For{Var: fused, Min: loopir.Int(0), Extent: total, Body: substituteIn(innermost.Body, m)}
	})
	out := s.newLoop(fused)
	s.trace.add("fuse", rvNames(loops), nil, nil, []string{string(out)})
	return out, nil
}

// Reorder permutes a perfect nest: the given loops must be exactly the loops of a chain
// of directly nested loops (in any order); afterwards they nest in the given order.
func (s *Schedule) Reorder(loops ...LoopRV) error {
	if len(loops) < 2 {
		return s.errf("reorder", "needs at least two loops")
	}
	given := make([]*loopir.For, len(loops))
	for i, l := range loops {
		f, err := s.loop("reorder", l)
		if err != nil {
			return err
		}
		given[i] = f
	}
	// find the outermost of the given loops and walk the chain below it
	set := map[*loopir.Var]bool{}
	for _, f := range given {
		if set[f.Var] {
			return s.errf("reorder", "loop %s listed twice", f.Var.Name)
		}
		set[f.Var] = true
	}
	var top *loopir.For
	for _, f := range given {
		isInner := false
		for _, g := range given {
			if g != f && findLoop(g.Body, f.Var) != nil {
				isInner = true
			}
		}
		if !isInner {
			top = f
		}
	}
	nest := []*loopir.For{top}
	for len(nest) < len(given) {
		inner, ok := nest[len(nest)-1].Body.(*loopir.For)
		if !ok || !set[inner.Var] {
			return s.errf("reorder", "loops %v do not form one perfect nest", rvNames(loops))
		}
		nest = append(nest, inner)
	}
	for _, f := range given {
		for _, v := range freeVars(f.Extent) {
			if set[v] {
				return s.errf("reorder", "extent of %s depends on loop %s", f.Var.Name, v.Name)
			}
		}
	}
	body := nest[len(nest)-1].Body
	s.replaceLoop(top.Var, func(*loopir.For) loopir.Stmt {
		b := body
		for i := len(given) - 1; i >= 0; i-- {
			g := given[i]
			b = &loopir.For{Var: g.Var, Min: g.Min, Extent: g.Extent, Kind: g.Kind, Body: b, Annotations: g.Annotations}
		}
		return b
	})
	s.trace.add("reorder", rvNames(loops), nil, nil, nil)
	return nil
}

// Parallel marks a loop to run its iterations on several threads. Its variable must not
// drive a reduction iterator (iterations would race on the accumulator).
func (s *Schedule) Parallel(l LoopRV) error {
	return s.setKind("parallel", l, loopir.Parallel)
}

// Vectorize marks an innermost loop for SIMD execution.
func (s *Schedule) Vectorize(l LoopRV) error {
	return s.setKind("vectorize", l, loopir.Vectorized)
}

// Unroll marks a loop for unrolling.
func (s *Schedule) Unroll(l LoopRV) error {
	return s.setKind("unroll", l, loopir.Unrolled)
}

func (s *Schedule) setKind(prim string, l LoopRV, kind loopir.ForKind) error {
	f, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	switch kind {
	case loopir.Parallel:
		if drivesReduction(f.Body, f.Var) {
			return s.errf(prim, "loop %s drives a reduction iterator", f.Var.Name)
		}
	case loopir.Vectorized:
		hasLoop := false
		walk(f.Body, func(x loopir.Stmt) {
			if _, ok := x.(*loopir.For); ok {
				hasLoop = true
			}
		})
		if hasLoop {
			return s.errf(prim, "loop %s is not innermost", f.Var.Name)
		}
		if drivesReduction(f.Body, f.Var) && !vectorReduction(f) {
			return s.errf(prim, "loop %s drives a reduction that is not a sum, max or min into a decomposed block without predicate", f.Var.Name)
		}
	}
	s.replaceLoop(f.Var, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: kind, Body: f.Body, Annotations: f.Annotations}
	})
	s.trace.add(prim, []string{string(l)}, nil, nil, nil)
	return nil
}

// vectorReduction reports whether the reduction loop f may run vectorized: its body is
// one reduction block whose init was decomposed out, with no predicate, updating its
// output by a sum, max or min (loopir.MatchAccumulate), which the code generator emits
// as a vector reduction over a scalar accumulator.
func vectorReduction(f *loopir.For) bool {
	body := f.Body
	if s, ok := body.(loopir.Seq); ok && len(s) == 1 {
		body = s[0]
	}
	b, ok := body.(*loopir.Block)
	if !ok || b.Init != nil || b.Predicate != nil {
		return false
	}
	acc, ok := loopir.MatchAccumulate(b.Body)
	if !ok {
		return false
	}
	for _, it := range b.Iters {
		for _, ix := range acc.Store.Index {
			if it.Kind == loopir.Reduction && loopir.Uses(ix, it.Var) {
				return false
			}
		}
	}
	return true
}

func drivesReduction(st loopir.Stmt, v *loopir.Var) bool {
	found := false
	walk(st, func(x loopir.Stmt) {
		b, ok := x.(*loopir.Block)
		if !ok {
			return
		}
		for i, it := range b.Iters {
			if it.Kind == loopir.Reduction && slices.Contains(freeVars(b.Bindings[i]), v) {
				found = true
			}
		}
	})
	return found
}

func freeVars(e loopir.Expr) []*loopir.Var {
	var out []*loopir.Var
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, ok := x.(*loopir.Var); ok {
			out = append(out, v)
		}
		return x
	})
	return out
}

func isZero(e loopir.Expr) bool {
	c, ok := e.(*loopir.IntImm)
	return ok && c.V == 0
}

func rvNames(ls []LoopRV) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l)
	}
	return out
}

// addPredicate conjoins cond to the predicate of every block in st.
func addPredicate(st loopir.Stmt, cond loopir.Expr) loopir.Stmt {
	return loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		b, ok := x.(*loopir.Block)
		if !ok {
			return nil
		}
		nb := *b
		if nb.Predicate == nil {
			nb.Predicate = cond
		} else {
			nb.Predicate = loopir.Bin(loopir.And, nb.Predicate, cond)
		}
		return &nb
	})
}
