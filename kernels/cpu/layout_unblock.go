package cpu

import (
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// layoutStrategies: "layout-unblock-tiled" for a LayoutTransform from channel blocks
// [N, C/b, H, W, b] to plain NCHW. In the output's order (n, c, h, w) each channel's
// plane reads every b-th float of the whole blocked map, so a map larger than the
// caches is read from memory b times: Mask R-CNN's stride-4 FPN level (256 channels at
// 200×200, 41 MB) took 40 ms on the generic rule. Here the channels of one block are
// the loop inside each image row: the row's [W, b] tile (W·b floats) is read from memory
// once and from L1 for the block's b output rows. Rows (n, channel block, h) run in
// parallel; w is the vectorized loop. The channels must be static; the other extents
// may be symbolic (a detector's feature maps). "cast-unblock-tiled": a Cast whose
// LayoutTransform epilogue unblocks its result takes the same order (the Cast inlined;
// ISNet's float16 sibling casts a 64-channel 512×512 map, a model output, read from
// blocks: 135 ms on the generic rule).
func layoutStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	st := kernels.Strategy{Name: "layout-unblock-tiled", Build: func(n *graph.Node, in []kernels.Input, _ target.Target) (*kernels.Impl, error) {
		src, dst := n.Inputs[0].Type, n.Outputs[0].Type
		if src.Block == 0 || dst.Block != 0 || len(dst.Shape) != 4 {
			return nil, notApplicable("not channel blocks to plain NCHW")
		}
		if c, ok := dst.Shape[1].Value(); !ok || c%src.Block != 0 {
			return nil, notApplicable("channels %v not whole blocks of %d", dst.Shape[1], src.Block)
		}
		b := src.Block
		return kernels.Generic(reg, kernels.KernelName(n), n, in, func(s *schedule.Schedule) error {
			return scheduleUnblock(s, b)
		})
	}}
	// an elementwise node whose result is unblocked in the same kernel (a model's
	// output Cast read from blocked data: the LayoutTransform its epilogue) gets the
	// same loop order
	cast := kernels.Strategy{Name: "cast-unblock-tiled", Build: func(*graph.Node, []kernels.Input, target.Target) (*kernels.Impl, error) {
		return nil, notApplicable("a Cast alone")
	}, Fused: func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, _ target.Target) (*kernels.Impl, error) {
		if len(epi) == 0 || epi[len(epi)-1].Node.Op != graph.OpLayoutTransform {
			return nil, notApplicable("no unblocking epilogue")
		}
		lt := epi[len(epi)-1].Node
		src, dst := lt.Inputs[0].Type, lt.Outputs[0].Type
		if src.Block == 0 || dst.Block != 0 || len(dst.Shape) != 4 {
			return nil, notApplicable("not channel blocks to plain NCHW")
		}
		if c, ok := dst.Shape[1].Value(); !ok || c%src.Block != 0 {
			return nil, notApplicable("channels %v not whole blocks of %d", dst.Shape[1], src.Block)
		}
		b := src.Block
		return kernels.GenericFused(reg, kernels.KernelName(n), n, in, epi, func(s *schedule.Schedule) error {
			if _, err := inlineChain(s); err != nil {
				return err
			}
			return scheduleUnblock(s, b)
		})
	}}
	return map[graph.Op][]kernels.Strategy{graph.OpLayoutTransform: {st}, graph.OpCast: {cast}}
}

// scheduleUnblock schedules block "layout" (loops n, c, h, w) as layoutStrategies says.
func scheduleUnblock(s *schedule.Schedule, b int64) error {
	blk, err := s.GetBlock("layout")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(blk)
	if err != nil {
		return err
	}
	if len(l) != 4 {
		return notApplicable("layout block with %d loops", len(l))
	}
	c, err := s.Split(l[1], []int64{-1, b})
	if err != nil {
		return err
	}
	if err := s.Reorder(l[0], c[0], l[2], c[1], l[3]); err != nil {
		return err
	}
	if err := s.Vectorize(l[3]); err != nil {
		return err
	}
	rows, err := s.Fuse(l[0], c[0], l[2])
	if err != nil {
		return err
	}
	return s.Parallel(rows)
}
