package gpu

import (
	"errors"
	"fmt"
	"strings"

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
	var stages []stage
	for _, name := range s.BlockNames() {
		st, err := classify(s, name)
		if err != nil {
			return err
		}
		stages = append(stages, st)
	}
	if len(stages) == 0 || len(stages) > 2 || len(stages[0].reduction) == 0 || len(stages) == 2 && len(stages[1].reduction) > 0 {
		return fmt.Errorf("%w: %s", ErrNotReduce, describe(stages))
	}
	red := stages[0]
	thread, err := bindSpatial(s, red, block)
	if err != nil {
		return err
	}
	// the init runs once per thread before the reduction loops instead of under a test
	// for their first iteration inside; a refusal keeps it there, which is as correct
	if _, err := s.DecomposeReduction(red.b, red.reduction[0]); err != nil && !errors.Is(err, schedule.ErrSchedule) {
		return err
	}
	if len(stages) == 1 || thread == nil {
		// without a thread loop, one thread runs the whole kernel
		return nil
	}
	if err := s.ReverseComputeAt(stages[1].b, *thread); err != nil {
		if errors.Is(err, schedule.ErrSchedule) {
			return fmt.Errorf("%w: %v", ErrNotReduce, err)
		}
		return err
	}
	return nil
}

// stage is a block with its loops, told apart by whether they drive a reduction.
type stage struct {
	name               string
	b                  schedule.BlockRV
	spatial, reduction []schedule.LoopRV
	inverted           bool // a reduction loop encloses a spatial one
}

func classify(s *schedule.Schedule, name string) (stage, error) {
	st := stage{name: name}
	var err error
	if st.b, err = s.GetBlock(name); err != nil {
		return st, err
	}
	loops, err := s.GetLoops(st.b)
	if err != nil {
		return st, err
	}
	for _, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return st, err
		}
		if red {
			st.reduction = append(st.reduction, l)
		} else {
			st.spatial = append(st.spatial, l)
			st.inverted = st.inverted || len(st.reduction) > 0
		}
	}
	return st, nil
}

// describe names the stages and which of them reduce, for a refusal.
func describe(stages []stage) string {
	var parts []string
	for _, st := range stages {
		kind := "spatial"
		if len(st.reduction) > 0 {
			kind = "reduction"
		}
		parts = append(parts, st.name+" ("+kind+")")
	}
	return "stages " + strings.Join(parts, ", ")
}

// bindSpatial moves the stage's reduction loops inside its spatial ones, fuses the
// spatial loops, splits them by block and binds them to blockIdx.x and threadIdx.x. It
// returns the thread loop, or nil for a stage with no spatial loop (one thread does
// all).
func bindSpatial(s *schedule.Schedule, st stage, block int64) (*schedule.LoopRV, error) {
	spatial := st.spatial
	if len(spatial) == 0 {
		return nil, nil
	}
	if st.inverted {
		if err := s.Reorder(append(append([]schedule.LoopRV{}, spatial...), st.reduction...)...); err != nil {
			if errors.Is(err, schedule.ErrSchedule) {
				return nil, fmt.Errorf("%w: %v", ErrNotReduce, err)
			}
			return nil, err
		}
	}
	fused := spatial[0]
	var err error
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
