package cpu

import (
	"errors"

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

// scheduleNest parallelizes and vectorizes the loops of one block.
func scheduleNest(s *schedule.Schedule, name string) error {
	b, err := s.GetBlock(name)
	if err != nil {
		return err
	}
	loops, err := s.GetLoops(b)
	if err != nil || len(loops) == 0 {
		return err
	}
	spatial := 0 // leading loops that drive no reduction
	work := int64(1)
	for i, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return err
		}
		if !red && spatial == i {
			spatial++
		}
		if e, ok := s.Extent(l); ok {
			work *= e
		} else {
			work *= 64 // symbolic: assume a modest extent
		}
	}
	innermost := loops[len(loops)-1]
	vectorizable := spatial == len(loops)
	outer := spatial
	if vectorizable && len(loops) > 1 {
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
	if vectorizable && len(loops) > 1 {
		if err := s.Vectorize(innermost); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	return nil
}
