package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// roiAlignStrategies: RoiAlign with the channels innermost. The definition's samples
// (their coordinates, corner indices and bilinear weights) depend on the region, the
// bin and the sample, not on the channel; the generic rule runs the sample loops inside
// the channel loop and recomputes them for each of the channels. Here the loop order
// is region, bin row, bin column, sample row, sample column, then channel: the
// compiler hoists the sample's arithmetic out of the channel loop (the buffers are
// restrict-qualified), and a bin's sums over its channels live in a local buffer of
// one channel row, divided into the output when its samples are done.
func roiAlignStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	return map[graph.Op][]kernels.Strategy{
		graph.OpRoiAlign: {{Name: "roialign-channels-inner", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
			return kernels.Generic(reg, kernels.KernelName(n), n, in, scheduleRoiAlign)
		}}},
	}
}

// scheduleRoiAlign orders the "roi_align_sum" block's loops [region, channel, bin row,
// bin column, sample row, sample column] as region, bins, samples, channel, its init
// under the bin column; the "roi_align" division runs under the bin column too, and the
// (region, bin row, bin column) loops run in parallel.
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
		return kernels.Unsupported("roialign-channels-inner: block roi_align_sum has %d loops, want 6", len(l))
	}
	r, c, ph, pw, iy, ix := l[0], l[1], l[2], l[3], l[4], l[5]
	if err := s.Reorder(r, ph, pw, iy, ix, c); err != nil {
		return err
	}
	if _, err := s.DecomposeReduction(acc, iy); err != nil {
		return err
	}
	out, err := s.GetBlock("roi_align")
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(out, pw); err != nil {
		return err
	}
	if err := s.CompactAt(acc, pw); err != nil {
		return err
	}
	bins, err := s.Fuse(r, ph, pw)
	if err != nil {
		return err
	}
	return s.Parallel(bins)
}
