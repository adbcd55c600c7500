package schedule

import (
	"math"

	"github.com/kilnrt/kiln/loopir"
)

// Bind runs a loop as a GPU thread axis: its iterations become the blocks (blockIdx) or
// the threads of a block (threadIdx) of the kernel's launch. Preconditions: the loop is
// serial and starts at 0; it drives no reduction iterator (the threads would race on the
// accumulator); no other loop of the function is bound to the axis and none runs on host
// threads (parallel); a block axis's extent is an expression of the runtime dims only
// (the grid is fixed for a launch) and a thread axis's extent has a constant upper bound
// under the enclosing loops (a block's size is fixed when the kernel is built; a smaller
// extent becomes a guard when the launch is derived, see loopir/passes.DeriveLaunch).
func (s *Schedule) Bind(l LoopRV, axis loopir.ThreadAxis) error {
	const prim = "bind"
	f, err := s.loop(prim, l)
	if err != nil {
		return err
	}
	if axis >= loopir.NumThreadAxes {
		return s.errf(prim, "%v is not a thread axis", axis)
	}
	if f.Kind != loopir.Serial {
		return s.errf(prim, "loop %s is already %v", f.Var.Name, f.Kind)
	}
	if !isZero(f.Min) {
		return s.errf(prim, "loop %s does not start at 0", f.Var.Name)
	}
	if drivesReduction(f.Body, f.Var) {
		return s.errf(prim, "loop %s drives a reduction iterator", f.Var.Name)
	}
	var clash error
	walk(s.f.Body, func(x loopir.Stmt) {
		g, ok := x.(*loopir.For)
		if !ok || clash != nil {
			return
		}
		if a, ok := g.Kind.Thread(); ok && a == axis {
			clash = s.errf(prim, "%v is already bound to loop %s", axis, g.Var.Name)
		}
		if g.Kind == loopir.Parallel {
			clash = s.errf(prim, "loop %s runs on host threads (parallel)", g.Var.Name)
		}
	})
	if clash != nil {
		return clash
	}
	if err := s.bindableExtent(prim, f, axis); err != nil {
		return err
	}
	s.replaceLoop(f.Var, func(f *loopir.For) loopir.Stmt {
		return &loopir.For{Var: f.Var, Min: f.Min, Extent: f.Extent, Kind: loopir.Bound(axis), Body: f.Body, Annotations: f.Annotations}
	})
	s.trace.add(prim, []string{string(l)}, []string{axis.String()}, nil, nil)
	return nil
}

// bindableExtent checks the loop's extent against the axis: over dims only for a block
// axis, a constant upper bound for a thread axis.
func (s *Schedule) bindableExtent(prim string, f *loopir.For, axis loopir.ThreadAxis) error {
	dims := map[*loopir.Var]bool{}
	for _, d := range s.f.Dims {
		dims[d] = true
	}
	if axis.IsBlock() {
		for _, v := range freeVars(f.Extent) {
			if !dims[v] {
				return s.errf(prim, "the extent of loop %s depends on loop %s: a grid is fixed for a launch", f.Var.Name, v.Name)
			}
		}
		return nil
	}
	a := loopir.NewAnalyzer(s.f.Dims)
	for _, g := range loopsAboveVar(s.f.Body, f.Var) {
		a.BindLoop(g.Var, g.Min, g.Extent)
	}
	if b := a.Bound(f.Extent); b.Max == math.MaxInt64 || b.Max < 1 {
		return s.errf(prim, "the extent %s of loop %s has no constant upper bound: a block's size is fixed when the kernel is built", loopir.ExprString(f.Extent), f.Var.Name)
	}
	return nil
}

// loopsAboveVar returns the loops enclosing the loop of variable v, outermost first.
func loopsAboveVar(st loopir.Stmt, v *loopir.Var) []*loopir.For {
	var path, result []*loopir.For
	var rec func(loopir.Stmt) bool
	rec = func(x loopir.Stmt) bool {
		switch x := x.(type) {
		case loopir.Seq:
			for _, c := range x {
				if rec(c) {
					return true
				}
			}
		case *loopir.For:
			if x.Var == v {
				result = append([]*loopir.For{}, path...)
				return true
			}
			path = append(path, x)
			if rec(x.Body) {
				return true
			}
			path = path[:len(path)-1]
		case *loopir.IfThenElse:
			return rec(x.Then) || rec(x.Else)
		case *loopir.Allocate:
			return rec(x.Body)
		case *loopir.Block:
			return rec(x.Init) || rec(x.Body)
		}
		return false
	}
	rec(st)
	return result
}
