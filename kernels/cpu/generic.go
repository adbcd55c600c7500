package cpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// parallelWork is the least number of innermost iterations worth a parallel region: a
// wake-up of the pool costs a few microseconds, about 16K simple element operations.
const parallelWork = 1 << 14

// GenericConfig is the search space of the generic rule.
type GenericConfig struct {
	// ParallelWork is the least number of a block's iterations that gets a parallel
	// loop (a power of two; 1<<62: never parallel).
	ParallelWork int64
	// Vectorize marks innermost spatial loops (and sum/max/min reductions) for vectors.
	Vectorize bool
}

// DefaultGeneric is the generic rule's fixed schedule.
var DefaultGeneric = GenericConfig{ParallelWork: parallelWork, Vectorize: true}

// genericKnobs declare GenericConfig as knobs: parallel_log2 (log2 of ParallelWork) and
// vectorize (0 or 1).
var genericKnobs = []kernels.Knob{
	{Name: "parallel_log2", Values: []int64{8, 10, 12, 14, 16, 18, 62}, Default: 14},
	{Name: "vectorize", Values: []int64{0, 1}, Default: 1},
}

// genericConfig is the configuration a resolved assignment of genericKnobs names.
func genericConfig(k kernels.Knobs) GenericConfig {
	return GenericConfig{ParallelWork: int64(1) << k["parallel_log2"], Vectorize: k["vectorize"] != 0}
}

// ScheduleGeneric is the default rule for any compute definition: intermediate
// elementwise stages are inlined into their consumers where compute_inline allows it;
// then every remaining block gets its leading spatial loops fused into one parallel
// loop (when the block does enough work) and its innermost spatial loop marked for
// vectorization. Reduction loops stay serial and inside.
func ScheduleGeneric(s *schedule.Schedule) error {
	return ScheduleGenericWith(s, DefaultGeneric)
}

// ScheduleGenericWith is ScheduleGeneric under cfg.
func ScheduleGenericWith(s *schedule.Schedule, cfg GenericConfig) error {
	if cfg.ParallelWork <= 0 {
		return fmt.Errorf("BUG: generic schedule with parallel work %d", cfg.ParallelWork)
	}
	names := s.BlockNames()
	for _, name := range names[:max(len(names)-1, 0)] {
		b, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		if recomputedInline(s.Func(), name) {
			continue
		}
		// a refusal (reduction, several consumers that cannot take it, an output) leaves
		// the function unchanged: the stage keeps its own loop nest
		if err := s.ComputeInline(b); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	for _, name := range s.BlockNames() {
		if err := scheduleNestWith(s, name, cfg); err != nil {
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
	return scheduleNestWith(s, name, DefaultGeneric)
}

// scheduleNestWith is scheduleNest under cfg.
func scheduleNestWith(s *schedule.Schedule, name string, cfg GenericConfig) error {
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
				if err := parallelVector(s, init, work, cfg); err != nil {
					return err
				}
				return parallelVector(s, b, work, cfg)
			}
		}
	}
	if spatial < len(loops) && streamsAlongReduction(s, loops[len(loops)-1], name) {
		// the reduction stays innermost, reading contiguously: move its init out so
		// that parallelVector can vectorize it as a reduction
		if _, err := s.DecomposeReduction(b, loops[spatial]); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	return parallelVector(s, b, work, cfg)
}

// minVectorReduction is the least extent of an innermost reduction loop worth running
// as a vector reduction (one vector of lanes, plus the horizontal combine at the end).
const minVectorReduction = 8

// streamsAlongReduction reports whether the innermost loop l (a reduction loop of block
// name) is long enough for a vector reduction and some load of the block reads along
// it contiguously (its iterator in the load's last index).
func streamsAlongReduction(s *schedule.Schedule, l schedule.LoopRV, name string) bool {
	if e, ok := s.Extent(l); ok && e < minVectorReduction {
		return false
	}
	var blk *loopir.Block
	loopir.MapStmt(s.Func().Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if b, ok := x.(*loopir.Block); ok && b.Name == name {
			blk = b
		}
		return nil
	})
	if blk == nil || len(blk.Iters) == 0 || blk.Iters[len(blk.Iters)-1].Kind != loopir.Reduction {
		return false
	}
	inner := map[*loopir.Var]bool{blk.Iters[len(blk.Iters)-1].Var: true}
	found := false
	loopir.MapStmt(blk.Body, func(e loopir.Expr) loopir.Expr {
		if ld, ok := e.(*loopir.Load); ok && len(ld.Index) > 0 && usesAny(ld.Index[len(ld.Index)-1:], inner) {
			found = true
		}
		return e
	}, nil)
	return found
}

// parallelVector fuses a block's leading spatial loops into one parallel loop (when the
// block does enough work) and marks its innermost loop, when spatial, for vectorization.
func parallelVector(s *schedule.Schedule, b schedule.BlockRV, work int64, cfg GenericConfig) error {
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
	// the loop structure is the same with and without vectors; cfg.Vectorize decides
	// only whether the innermost loop is marked
	vectorizable := !red && len(loops) > 1
	outer := spatial
	if vectorizable && outer == len(loops) {
		outer-- // keep the innermost loop out of the fused parallel loop
	}
	if work >= cfg.ParallelWork && outer >= 1 {
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
	if vectorizable && cfg.Vectorize {
		if err := s.Vectorize(innermost); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	} else if red && cfg.Vectorize {
		// a decomposed sum/max/min runs as a vector reduction; others are refused
		// (ErrSchedule) and stay serial
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
	self := map[*loopir.Buffer]bool{}
	loopir.MapStmt(blk.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if st, ok := x.(*loopir.Store); ok {
			self[st.Buf] = true
		}
		return nil
	})
	loopir.MapStmt(blk.Body, func(e loopir.Expr) loopir.Expr {
		ld, ok := e.(*loopir.Load)
		if !ok || len(ld.Index) == 0 || self[ld.Buf] || !usesAny(ld.Index, red) {
			// the accumulator, and values the reduction does not vary (a row's max
			// in softmax's sum), are read once per output element either way
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
		case hasSp && hasRed && stridedAlongReduction(ld.Index[len(ld.Index)-1], sp, blk.Iters[len(blk.Iters)-1]):
			redOnly++
		case hasSp:
			along++
		case hasRed:
			redOnly++
		}
		return e
	}, nil)
	return along > 0 && along >= redOnly
}

// stridedAlongReduction reports whether a load's last index ix steps by more than one
// element along the spatial iterator sp while it streams along the innermost reduction
// iterator inner, long enough for a vector reduction: a convolution whose stride
// exceeds one with a long kernel (a short-time Fourier transform's frames: stride 64,
// 256 taps) reads contiguously along its taps, and moving sp inside would turn every
// vector lane into a gather and keep the accumulators in memory.
func stridedAlongReduction(ix loopir.Expr, sp *loopir.Var, inner loopir.IterVar) bool {
	if inner.Kind != loopir.Reduction {
		return false
	}
	if e, ok := inner.Extent.(*loopir.IntImm); !ok || e.V < minVectorReduction {
		return false
	}
	_, coefs, ok := loopir.Affine(ix, []*loopir.Var{sp, inner.Var})
	if !ok {
		return false
	}
	cs, okS := coefs[0].(*loopir.IntImm)
	cr, okR := coefs[1].(*loopir.IntImm)
	return okS && okR && cr.V == 1 && (cs.V > 1 || cs.V < -1)
}

// usesAny reports whether any index refers to one of vars.
func usesAny(index []loopir.Expr, vars map[*loopir.Var]bool) bool {
	for _, ix := range index {
		for v := range vars {
			if loopir.Uses(ix, v) {
				return true
			}
		}
	}
	return false
}
