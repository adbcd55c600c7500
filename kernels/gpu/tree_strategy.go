package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// reduceTreeStrategy is ScheduleReduceTree as the strategy gpu-reduce-tree, before
// gpu-reduce in the table.
func reduceTreeStrategy(reg *kernels.Registry) kernels.Strategy {
	return treeStrategy(reg, "gpu-reduce-tree", ErrNotReduce, func(s *schedule.Schedule, t target.Target, block int64) error {
		return ScheduleReduceTree(s, t.GPU, block)
	})
}

// rowsTreeStrategy is ScheduleRowsTree as the strategy gpu-rows-tree, before gpu-rows in
// the table.
func rowsTreeStrategy(reg *kernels.Registry) kernels.Strategy {
	return treeStrategy(reg, "gpu-rows-tree", ErrNotRows, func(s *schedule.Schedule, t target.Target, _ int64) error {
		return ScheduleRowsTree(s, t.GPU)
	})
}

// treeStrategy is a block-wide rule on a node's compute definition (with its fused
// epilogues). Not applicable (the rule after it in the table takes the node): a node
// with several outputs, the rule's refusal (ErrNotTree, or notKind: the definition is
// not of the rule's kind), and a kernel the launch rules refuse once lowered through the
// GPU pipeline.
func treeStrategy(reg *kernels.Registry, name string, notKind error, rule func(*schedule.Schedule, target.Target, int64) error) kernels.Strategy {
	build := func(n *graph.Node, t target.Target, lower func(rule func(*schedule.Schedule) error) (*kernels.Impl, error)) (*kernels.Impl, error) {
		block, err := BlockSize(t)
		if err != nil {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		if len(n.Outputs) > 1 {
			return nil, fmt.Errorf("%v: %w: %d outputs", n, kernels.ErrNotApplicable, len(n.Outputs))
		}
		impl, err := lower(func(s *schedule.Schedule) error { return rule(s, t, block) })
		if errors.Is(err, ErrNotTree) || errors.Is(err, notKind) {
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
	return kernels.Strategy{Name: name,
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
