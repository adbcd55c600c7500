package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// Strategies is the CPU strategy table: tensorized rules for the ops that carry the
// arithmetic, and the generic rule (ScheduleGeneric on the compute definition) for
// every other op with a definition in reg.
func Strategies(reg *kernels.Registry) *kernels.Strategies {
	table := map[graph.Op][]kernels.Strategy{}
	for _, fam := range []map[graph.Op][]kernels.Strategy{tensorizedStrategies(reg), depthwiseStrategies(reg), rnnStrategies(), scatterStrategies(), topKStrategies(), quantStrategies(reg), detStrategies(), roiAlignStrategies(reg), layoutStrategies(reg)} {
		for op, l := range fam {
			table[op] = append(table[op], l...)
		}
	}
	withKnobs(reg, table)
	return kernels.NewStrategies(genericStrategy(reg), table)
}

// ScalarStrategies is the generic rule alone, for every op with a compute definition in
// reg: no packed, tensorized or Winograd kernels, and so no operand in a blocked
// layout (use it with no layout policy).
func ScalarStrategies(reg *kernels.Registry) *kernels.Strategies {
	return kernels.NewStrategies(genericStrategy(reg), nil)
}

// genericStrategy schedules a node's compute definition with ScheduleGeneric.
func genericStrategy(reg *kernels.Registry) kernels.Strategy {
	return kernels.Strategy{Name: "generic",
		Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			return kernels.Generic(reg, kernels.KernelName(n), n, in, ScheduleGeneric)
		},
		Fused: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, _ target.Target) (*kernels.Impl, error) {
			return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, ScheduleGeneric)
		},
		Knobs: genericKnobs,
		Tuned: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, _ target.Target, k kernels.Knobs) (*kernels.Impl, error) {
			cfg := genericConfig(k)
			return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, func(s *schedule.Schedule) error { return ScheduleGenericWith(s, cfg) })
		},
	}
}
