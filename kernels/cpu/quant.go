package cpu

import (
	"errors"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// quantStrategies: ConvInteger and QLinearConv on the integer micro-kernels where they
// fit (conv_integer.go), a depthwise QLinearConv on the float depthwise stages over its
// exact integer differences (conv_integer_depthwise.go); otherwise they keep their padded input stage
// ("x_padded", see kernels' quantization family) as a loop nest of its own, so the
// product reads contiguous rows without padding guards and the generic rule vectorizes
// it along the output columns; everything else is scheduled as ScheduleGeneric does.
func quantStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	padded := kernels.Strategy{Name: "conv-integer-padded",
		Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			return kernels.Generic(reg, kernels.KernelName(n), n, in, scheduleKeeping("x_padded"))
		},
		Fused: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, _ target.Target) (*kernels.Impl, error) {
			return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, scheduleKeeping("x_padded"))
		},
	}
	blocked := withRegistry(reg, buildConvInteger)
	depthwise := withRegistry(reg, buildIntegerDepthwise)
	return map[graph.Op][]kernels.Strategy{
		graph.OpConvInteger: {{Name: "conv-integer-blocked", Build: unfused(blocked), Fused: blocked}, padded},
		graph.OpQLinearConv: {{Name: "conv-integer-blocked", Build: unfused(blocked), Fused: blocked},
			{Name: "conv-integer-depthwise", Build: unfused(depthwise), Fused: depthwise}, padded},
	}
}

// scheduleKeeping is ScheduleGeneric but for the block named keep, which stays a loop
// nest of its own (when the definition has it) instead of being inlined.
func scheduleKeeping(keep string) func(*schedule.Schedule) error {
	return func(s *schedule.Schedule) error {
		names := s.BlockNames()
		for _, name := range names[:max(len(names)-1, 0)] {
			if name == keep {
				continue
			}
			b, err := s.GetBlock(name)
			if err != nil {
				return err
			}
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
}
