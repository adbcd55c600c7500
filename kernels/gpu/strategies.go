package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// Strategies is the GPU strategy table, shared by CUDA and OpenCL targets: the tiled
// matrix product (ScheduleMatMulTiled) first for MatMul and Gemm, then the injective
// rule (ScheduleInjective) for every op whose compute definition is elementwise,
// broadcasting or injective, the reduction rule (ScheduleReduce) for definitions with
// one reduction stage, and the rows rule (ScheduleRows) for definitions of several
// stages over shared rows (the softmax family, the normalizations), each of these two
// after its block-wide form (gpu-reduce-tree, ScheduleReduceTree; gpu-rows-tree,
// ScheduleRowsTree: a block of threads per output element or row, where the target's
// thresholds call for it), all with
// elementwise epilogues fused into the same kernel. An op no rule fits (several
// outputs, stages that share no rows) is kernels.ErrNotApplicable, so lowering reports
// that no strategy applies.
func Strategies(reg *kernels.Registry) *kernels.Strategies {
	// per op: its own rules first, then the rules for every op, in this order
	perOp := map[graph.Op][]kernels.Strategy{
		graph.OpMatMul: {matmulStrategy(reg)},
		graph.OpGemm:   {matmulStrategy(reg)},
	}
	everyOp := []kernels.Strategy{
		injectiveStrategy(reg),
		reduceTreeStrategy(reg),
		reduceStrategy(reg),
		rowsTreeStrategy(reg),
		rowsStrategy(reg),
	}
	return table(perOp, everyOp)
}

// table builds the strategy table: for each op its own rules, then everyOp's (the last
// of which is the table's fallback).
func table(perOp map[graph.Op][]kernels.Strategy, everyOp []kernels.Strategy) *kernels.Strategies {
	lists := map[graph.Op][]kernels.Strategy{}
	for op := range graph.NumOps {
		lists[op] = append(append([]kernels.Strategy{}, perOp[op]...), everyOp[:len(everyOp)-1]...)
	}
	return kernels.NewStrategies(everyOp[len(everyOp)-1], lists)
}

func injectiveStrategy(reg *kernels.Registry) kernels.Strategy {
	build := func(n *graph.Node, t target.Target, lower func(rule func(*schedule.Schedule) error) (*kernels.Impl, error)) (*kernels.Impl, error) {
		block, err := BlockSize(t)
		if err != nil {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		impl, err := lower(func(s *schedule.Schedule) error { return ScheduleInjective(s, block) })
		if errors.Is(err, ErrNotInjective) {
			return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
		}
		return impl, err
	}
	return kernels.Strategy{Name: "gpu-injective",
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

// BlockSize is the injective rule's threads per block on t: DefaultBlock, capped by the
// target's largest work-group. A target without GPU limits is an error.
func BlockSize(t target.Target) (int64, error) {
	if t.Kind != target.CUDA && t.Kind != target.OpenCL {
		return 0, fmt.Errorf("%v is not a GPU target", t.Kind)
	}
	if t.GPU.MaxWorkGroup < 1 {
		return 0, fmt.Errorf("%v target %s has no work-group limit", t.Kind, t.Arch)
	}
	return min(DefaultBlock, int64(t.GPU.MaxWorkGroup)), nil
}
