package cpu

import (
	"errors"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// parallelWork is the least number of innermost iterations worth a parallel region: a
// wake-up of the pool costs a few microseconds, about 16K simple element operations.
const parallelWork = 1 << 14

// ScheduleGeneric is the default rule for any compute definition: intermediate
// elementwise stages are inlined into their consumers where compute_inline allows it;
// then every remaining block gets its leading spatial loops fused into one parallel
// loop (when the block does enough work) and its innermost spatial loop marked for
// vectorization. Reduction loops stay serial and inside.
func ScheduleGeneric(s *schedule.Schedule) error {
	names := s.BlockNames()
	for _, name := range names[:max(len(names)-1, 0)] {
		b, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		// a refusal (reduction, several consumers that cannot take it, an output) leaves
		// the function unchanged: the stage keeps its own loop nest
		if err := s.ComputeInline(b); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	for _, name := range s.BlockNames() {
		if err := scheduleNest(s, name); err != nil {
			return err
		}
	}
	return nil
}

// scheduleNest parallelizes and vectorizes the loops of one block. A block whose
// reductions sit inside its spatial loops gets the innermost spatial loop moved inside
// the reductions when its inputs stream along it (spatialInside): pooling windows,
// convolution taps and a matmul's k then run around a contiguous, vectorizable loop.
func scheduleNest(s *schedule.Schedule, name string) error {
	b, err := s.GetBlock(name)
	if err != nil {
		return err
	}
	loops, err := s.GetLoops(b)
	if err != nil || len(loops) == 0 {
		return err
	}
	spatial, err := leadingSpatial(s, loops)
	if err != nil {
		return err
	}
	work := int64(1)
	for _, l := range loops {
		if e, ok := s.Extent(l); ok {
			work *= e
		} else {
			work *= 64 // symbolic: assume a modest extent
		}
	}
	if spatial >= 1 && spatial < len(loops) {
		// a symbolic extent is taken as long enough (the C compiler's vector loop has a
		// scalar tail for what is left)
		if e, ok := s.Extent(loops[spatial-1]); (!ok || e >= 4) && spatialInside(s.Func(), name, spatial) {
			inner := loops[spatial-1]
			if init, err := s.DecomposeReduction(b, inner); err == nil {
				if err := s.Reorder(append(append([]schedule.LoopRV{}, loops[spatial:]...), inner)...); err != nil {
					return err
				}
				if err := parallelVector(s, init, work); err != nil {
					return err
				}
				return parallelVector(s, b, work)
			}
		}
	}
	return parallelVector(s, b, work)
}

// parallelVector fuses a block's leading spatial loops into one parallel loop (when the
// block does enough work) and marks its innermost loop, when spatial, for vectorization.
func parallelVector(s *schedule.Schedule, b schedule.BlockRV, work int64) error {
	loops, err := s.GetLoops(b)
	if err != nil || len(loops) == 0 {
		return err
	}
	spatial, err := leadingSpatial(s, loops)
	if err != nil {
		return err
	}
	innermost := loops[len(loops)-1]
	red, err := s.DrivesReduction(innermost)
	if err != nil {
		return err
	}
	vectorizable := !red && len(loops) > 1
	outer := spatial
	if vectorizable && outer == len(loops) {
		outer-- // keep the innermost loop out of the fused parallel loop
	}
	if work >= parallelWork && outer >= 1 {
		fused := loops[0]
		if outer > 1 {
			if fused, err = s.Fuse(loops[:outer]...); err != nil {
				return err
			}
		}
		if err := s.Parallel(fused); err != nil {
			return err
		}
	}
	if vectorizable {
		if err := s.Vectorize(innermost); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	return nil
}

// leadingSpatial counts the outermost loops that drive no reduction.
func leadingSpatial(s *schedule.Schedule, loops []schedule.LoopRV) (int, error) {
	for i, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil || red {
			return i, err
		}
	}
	return len(loops), nil
}

// spatialInside decides whether the innermost spatial iterator (the block's iterator
// spatial-1) should run inside the reductions: when at least as many of the block's
// loads have it in their last (contiguous) index as have only reduction iterators there.
func spatialInside(f *loopir.PrimFunc, name string, spatial int) bool {
	var blk *loopir.Block
	loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if b, ok := x.(*loopir.Block); ok && b.Name == name {
			blk = b
		}
		return nil
	})
	if blk == nil || len(blk.Iters) <= spatial {
		return false
	}
	sp := blk.Iters[spatial-1].Var
	red := map[*loopir.Var]bool{}
	for _, it := range blk.Iters[spatial:] {
		red[it.Var] = true
	}
	along, redOnly := 0, 0
	loopir.MapStmt(blk.Body, func(e loopir.Expr) loopir.Expr {
		ld, ok := e.(*loopir.Load)
		if !ok || len(ld.Index) == 0 {
			return e
		}
		hasSp, hasRed := false, false
		loopir.MapExpr(ld.Index[len(ld.Index)-1], func(x loopir.Expr) loopir.Expr {
			if v, ok := x.(*loopir.Var); ok {
				hasSp = hasSp || v == sp
				hasRed = hasRed || red[v]
			}
			return x
		})
		switch {
		case hasSp:
			along++
		case hasRed:
			redOnly++
		}
		return e
	}, nil)
	return along > 0 && along >= redOnly
}
