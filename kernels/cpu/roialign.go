package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// roiAlignStrategies: RoiAlign with its samples computed once per region. The
// definition's sample stages (corners, fractions, outside flags per region, bin and
// sample: kernels' computeRoiAlign) are inlined by the generic rule, which then
// recomputes them for every channel. Here they are computed under the region loop, in
// buffers of a few values, and the channel loop reads them: per channel, a bin's
// samples are four reads of one channel plane each and their weights.
func roiAlignStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	return map[graph.Op][]kernels.Strategy{
		graph.OpRoiAlign: {{Name: "roialign-samples-per-region", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			return kernels.Generic(reg, kernels.KernelName(n), n, in, scheduleRoiAlign)
		}}},
	}
}

// roiAlignStages are the sample stages of computeRoiAlign, each consumer before its
// producers (the high corner reads the low one).
var roiAlignStages = []string{"roi_y_hi", "roi_y_lo", "roi_y_frac", "roi_y_out", "roi_x_hi", "roi_x_lo", "roi_x_frac", "roi_x_out"}

// scheduleRoiAlign computes the sample stages under the "roi_align_sum" block's region
// loop (its loops: region, channel, bin row, bin column, sample row, sample column),
// runs the "roi_align" division under the channel loop with a channel's sums in a
// local buffer, and the regions in parallel.
func scheduleRoiAlign(s *schedule.Schedule) error {
	acc, err := s.GetBlock("roi_align_sum")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(acc)
	if err != nil {
		return err
	}
	if len(l) != 6 {
		return kernels.Unsupported("roialign-samples-per-region: block roi_align_sum has %d loops, want 6", len(l))
	}
	r, c := l[0], l[1]
	for _, name := range roiAlignStages {
		b, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		if err := s.ComputeAt(b, r); err != nil {
			return err
		}
	}
	out, err := s.GetBlock("roi_align")
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(out, c); err != nil {
		return err
	}
	if err := s.CompactAt(acc, c); err != nil {
		return err
	}
	return s.Parallel(r)
}
