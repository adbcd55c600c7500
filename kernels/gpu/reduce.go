package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// ErrNotReduce: the definition is not one reduction stage (optionally followed by one
// elementwise stage) after inlining, which the reduction rule does not schedule.
var ErrNotReduce = errors.New("not a single-stage reduction")

// ScheduleReduce is the GPU rule for definitions with one reduction stage: every
// intermediate stage that inlines is inlined; what is left must be the reduction R,
// alone or followed by one stage O that does not reduce (a mean's division, a bias, a
// fused epilogue). R's spatial loops are fused, split by block (threads per block) and
// bound outer to blockIdx.x, inner to threadIdx.x: one thread per element of R. Its
// reduction loops run serially inside the thread after its init (decompose_reduction);
// a reduction loop the definition puts outside a spatial one is moved inside
// (reorder). O runs in the same thread on the element R has just finished
// (reverse_compute_at under the thread loop); R's buffer is then one element per thread
// (loopir/passes.PrivatizeLocal). Anything else (no reduction, several reduction
// stages, a stage that does not inline, a reorder or reverse_compute_at the schedule
// refuses) is ErrNotReduce.
func ScheduleReduce(s *schedule.Schedule, block int64) error {
	if block < 1 {
		return fmt.Errorf("BUG: ScheduleReduce: block size %d", block)
	}
	names := s.BlockNames()
	for _, name := range names[:max(len(names)-1, 0)] {
		b, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		// a refusal (the reduction itself, a stage read too often) leaves the stage
		if err := s.ComputeInline(b); err != nil && !errors.Is(err, schedule.ErrSchedule) {
			return err
		}
	}
	names = s.BlockNames()
	reduces := make([]bool, len(names))
	for i, name := range names {
		var err error
		if reduces[i], err = blockReduces(s, name); err != nil {
			return err
		}
	}
	switch {
	case len(names) == 1 && reduces[0]:
	case len(names) == 2 && reduces[0] && !reduces[1]:
	default:
		return fmt.Errorf("%w: stages %v (reducing: %v)", ErrNotReduce, names, reduces)
	}
	red, err := s.GetBlock(names[0])
	if err != nil {
		return err
	}
	thread, err := bindSpatial(s, red, block)
	if err != nil {
		return err
	}
	if err := decompose(s, red); err != nil {
		return err
	}
	if len(names) == 1 || thread == nil {
		// without a thread loop, one thread runs the whole kernel
		return nil
	}
	out, err := s.GetBlock(names[1])
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(out, *thread); err != nil {
		if errors.Is(err, schedule.ErrSchedule) {
			return fmt.Errorf("%w: %v", ErrNotReduce, err)
		}
		return err
	}
	return nil
}

// blockReduces reports whether some loop of the named block drives a reduction.
func blockReduces(s *schedule.Schedule, name string) (bool, error) {
	b, err := s.GetBlock(name)
	if err != nil {
		return false, err
	}
	loops, err := s.GetLoops(b)
	if err != nil {
		return false, err
	}
	for _, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil || red {
			return red, err
		}
	}
	return false, nil
}

// bindSpatial moves b's reduction loops inside its spatial ones, fuses the spatial
// loops, splits them by block and binds them to blockIdx.x and threadIdx.x. It returns
// the thread loop, or nil for a block with no spatial loop (one thread does all).
func bindSpatial(s *schedule.Schedule, b schedule.BlockRV, block int64) (*schedule.LoopRV, error) {
	loops, err := s.GetLoops(b)
	if err != nil {
		return nil, err
	}
	var spatial, reduction []schedule.LoopRV
	inverted := false // a reduction loop encloses a spatial one
	for _, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return nil, err
		}
		if red {
			reduction = append(reduction, l)
		} else {
			spatial = append(spatial, l)
			inverted = inverted || len(reduction) > 0
		}
	}
	if len(spatial) == 0 {
		return nil, nil
	}
	if inverted {
		if err := s.Reorder(append(append([]schedule.LoopRV{}, spatial...), reduction...)...); err != nil {
			if errors.Is(err, schedule.ErrSchedule) {
				return nil, fmt.Errorf("%w: %v", ErrNotReduce, err)
			}
			return nil, err
		}
	}
	fused := spatial[0]
	if len(spatial) > 1 {
		if fused, err = s.Fuse(spatial...); err != nil {
			return nil, err
		}
	}
	if e, ok := s.Extent(fused); ok && e < block {
		block = max(e, 1) // one block of exactly the elements
	}
	parts, err := s.Split(fused, []int64{-1, block})
	if err != nil {
		return nil, err
	}
	if err := s.Bind(parts[0], loopir.BlockIdxX); err != nil {
		return nil, err
	}
	if err := s.Bind(parts[1], loopir.ThreadIdxX); err != nil {
		return nil, err
	}
	return &parts[1], nil
}

// decompose moves the reduction's init out of its reduction loops, so that each thread
// initializes its accumulator once before them instead of testing for the first
// iteration inside. A block the primitive refuses keeps its init, which lowers to the
// same result under a test.
func decompose(s *schedule.Schedule, b schedule.BlockRV) error {
	loops, err := s.GetLoops(b)
	if err != nil {
		return err
	}
	for _, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return err
		}
		if red {
			if _, err := s.DecomposeReduction(b, l); err != nil && !errors.Is(err, schedule.ErrSchedule) {
				return err
			}
			return nil
		}
	}
	return nil
}

// reduceStrategy schedules a node's compute definition (with its fused epilogues) with
// ScheduleReduce; a node with several outputs (MaxPool with Indices) is not applicable.
// The kernel is lowered through the GPU pipeline and its launch derived
// and checked against the target before it is accepted: a kernel the launch rules
// refuse is not applicable here (the node runs elsewhere), never an error at launch.
func reduceStrategy(reg *kernels.Registry) kernels.Strategy {
	build := func(n *graph.Node, t target.Target, lower func(rule func(*schedule.Schedule) error) (*kernels.Impl, error)) (*kernels.Impl, error) {
		block, err := BlockSize(t)
		if err != nil {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		if len(n.Outputs) > 1 {
			return nil, fmt.Errorf("%v: %w: %d outputs", n, kernels.ErrNotApplicable, len(n.Outputs))
		}
		impl, err := lower(func(s *schedule.Schedule) error { return ScheduleReduce(s, block) })
		if errors.Is(err, ErrNotReduce) {
			return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
		}
		if err != nil {
			return nil, err
		}
		if err := launchable(impl.Func, t); errors.Is(err, passes.ErrLaunch) {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		} else if err != nil {
			return nil, err
		}
		return impl, nil
	}
	return kernels.Strategy{Name: "gpu-reduce",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return build(n, t, func(rule func(*schedule.Schedule) error) (*kernels.Impl, error) {
				return kernels.Generic(reg, kernels.KernelName(n), n, in, rule)
			})
		},
		Fused: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
			return build(n, t, func(rule func(*schedule.Schedule) error) (*kernels.Impl, error) {
				return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, rule)
			})
		},
	}
}

// launchable lowers f through the GPU pipeline and derives and verifies its launch on t.
func launchable(f *loopir.PrimFunc, t target.Target) error {
	low, err := passes.GPUPipeline().Run(f)
	if err != nil {
		return err
	}
	g, l, err := passes.DeriveLaunch(low)
	if err != nil {
		return err
	}
	return passes.VerifyLaunch(g, l, t.GPU)
}
