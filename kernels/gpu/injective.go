package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// DefaultBlock is the threads per block of the injective rule before the target's
// limit: 256 keeps eight warps (or wavefronts of 32) per block, enough to hide memory
// latency, with blocks small enough for several to share a multiprocessor.
const DefaultBlock = 256

// ErrNotInjective: the definition keeps a reduction or several stages after inlining,
// which the injective rule does not schedule.
var ErrNotInjective = errors.New("not an injective definition")

// ScheduleInjective is the GPU rule for elementwise, broadcasting and injective
// definitions: every intermediate stage is inlined into the output; the output's loops
// are fused into one loop over all its elements, split by block (threads per block),
// and the outer loop is bound to blockIdx.x, the inner to threadIdx.x. A fused extent
// that block does not divide leaves a predicate on the block (the tail's threads do
// nothing); a symbolic extent gives a grid that depends on the runtime dims. A
// definition with a reduction, or with a stage that cannot be inlined, is refused with
// ErrNotInjective.
func ScheduleInjective(s *schedule.Schedule, block int64) error {
	if block < 1 {
		return fmt.Errorf("BUG: ScheduleInjective: block size %d", block)
	}
	loops, err := injectiveLoops(s)
	if err != nil || len(loops) == 0 {
		return err // a scalar (no loops): one thread in one block
	}
	fused := loops[0]
	if len(loops) > 1 {
		if fused, err = s.Fuse(loops...); err != nil {
			return err
		}
	}
	if e, ok := s.Extent(fused); ok && e < block {
		block = max(e, 1) // one block of exactly the elements
	}
	parts, err := s.Split(fused, []int64{-1, block})
	if err != nil {
		return err
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		return err
	}
	return s.Bind(parts[1], loopir.ThreadIdxX)
}

// injectiveLoops inlines every stage into the output and returns the output's loops,
// refusing (ErrNotInjective) a stage that stays or an output that reduces.
func injectiveLoops(s *schedule.Schedule) ([]schedule.LoopRV, error) {
	names := s.BlockNames()
	for _, name := range names[:max(len(names)-1, 0)] {
		b, err := s.GetBlock(name)
		if err != nil {
			return nil, err
		}
		if err := s.ComputeInline(b); err != nil {
			if errors.Is(err, schedule.ErrSchedule) {
				return nil, fmt.Errorf("%w: stage %s stays: %v", ErrNotInjective, name, err)
			}
			return nil, err
		}
	}
	names = s.BlockNames()
	if len(names) != 1 {
		return nil, fmt.Errorf("%w: %d output stages", ErrNotInjective, len(names))
	}
	b, err := s.GetBlock(names[0])
	if err != nil {
		return nil, err
	}
	loops, err := s.GetLoops(b)
	if err != nil {
		return nil, err
	}
	for _, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return nil, err
		}
		if red {
			return nil, fmt.Errorf("%w: stage %s reduces", ErrNotInjective, names[0])
		}
	}
	return loops, nil
}
