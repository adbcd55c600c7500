package cpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/schedule"
)

// ScheduleConv2DNCHWc schedules Conv2DNCHWc (blocks "pad" and "conv") whose output
// channel block equals the intrinsic's tile width: the padded copy runs first (rows in
// parallel); each output row (batch, channel block, row: fused, parallel) accumulates,
// per input channel block and kernel row, one micro-kernel call per tile of mr columns
// over the merged (kernel column, input channel) axis. The tiles are the innermost loop
// so that the weights of one (channel block, kernel row) stay in L1 across the row's
// tiles (measured ~10% faster on resnet18 at 2 threads than tiles outermost).
func ScheduleConv2DNCHWc(s *schedule.Schedule, g intrin.Gemm, parallel bool) error {
	return ScheduleConvBlocked(s, g, parallel, "", 0)
}

// ScheduleConvBlocked is ScheduleConv2DNCHWc with an optional epilogue: an elementwise
// block reading the conv result (a bias add) moved under the output row loop, so each
// row gets it right after the micro-kernels wrote it, while it is in cache; the conv
// result is then one row's local buffer (compact_at), not a whole-output temporary. With cb > 0
// (the input channel block), the padded copy's column loop is split into columns and
// the channels of a block, the inner loop a contiguous, vectorized copy. The
// micro-kernel is called per input channel block and kernel row (ConvConfig.SplitK).
func ScheduleConvBlocked(s *schedule.Schedule, g intrin.Gemm, parallel bool, epilogue string, cb int64) error {
	return scheduleConvBlocked(s, g, ConvConfig{Parallel: parallel, SplitK: true}, epilogue, cb, false)
}

// scheduleConvBlocked is ScheduleConvBlocked; with split, the epilogue computes the
// split NCHW result [N, M/sb, sb, OH, OW] (ConvBlockedAttrs.SplitOut): its loops under
// the row are reordered so that the channel within the block, along which the row
// buffer is contiguous, is the inner, vectorized loop (the stores then a channel plane
// apart, the activations' arithmetic in vectors). cfg chooses the parallel rows and
// the tiles' place in the loop order (ConvConfig).
func scheduleConvBlocked(s *schedule.Schedule, g intrin.Gemm, cfg ConvConfig, epilogue string, cb int64, split bool) error {
	parallel := cfg.Parallel
	mr := g.MR
	if s.HasBlock("pad") { // else the conv reads its input in place
		if err := schedulePad(s, parallel, cb); err != nil {
			return err
		}
	}
	c, err := s.GetBlock("conv")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(l) != 8 {
		return fmt.Errorf("conv2d NCHWc strategy: block has %d loops, want 8", len(l))
	}
	n, ocb, oh, ow, oc, icb, ry, rr := l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7]
	w, err := s.Split(ow, []int64{-1, mr})
	if err != nil {
		return err
	}
	// with one input channel block and one kernel row (a 1×1 convolution over at most
	// cb channels) the micro-kernel's call is the whole reduction: the unit loops fuse
	// into the merged column axis, and the zero-initializing form replaces the init
	// pass and never reads the tile
	whole := unitLoops(s, icb, ry)
	if whole {
		if err := s.Reorder(n, ocb, oh, w[0], w[1], oc, icb, ry, rr); err != nil {
			return err
		}
		if rr, err = s.Fuse(icb, ry, rr); err != nil {
			return err
		}
	} else if !cfg.SplitK {
		// each tile's whole reduction in one call of the micro-kernel's Blocks form:
		// its accumulators stay in registers across the input channel blocks and
		// kernel rows, and its init is the call's zeroing
		if err := s.Reorder(n, ocb, oh, w[0], w[1], oc, icb, ry, rr); err != nil {
			return err
		}
	} else {
		order := []schedule.LoopRV{n, ocb, oh, icb, ry, w[0], w[1], oc, rr}
		if cfg.RowsInner {
			order = []schedule.LoopRV{n, ocb, icb, ry, oh, w[0], w[1], oc, rr}
		} else if cfg.TilesOuter {
			order = []schedule.LoopRV{n, ocb, oh, w[0], icb, ry, w[1], oc, rr}
		}
		if err := s.Reorder(order...); err != nil {
			return err
		}
		if _, err := s.DecomposeReduction(c, icb); err != nil {
			return err
		}
	}
	if epilogue != "" {
		at := oh
		if cfg.RowsInner && cfg.SplitK && !whole {
			at = ocb // after the block's rows: the block's map lives in a local buffer
		}
		if err := scheduleRowEpilogue(s, c, at, epilogue, split); err != nil {
			return err
		}
	}
	in := g.Update
	switch {
	case whole:
		in = g.Init
	case !cfg.SplitK:
		in = g.Blocks
	}
	if err := s.Tensorize(w[1], in); err != nil {
		return err
	}
	var row schedule.LoopRV
	if cfg.RowsInner && cfg.SplitK && !whole {
		row, err = s.Fuse(n, ocb)
	} else {
		row, err = s.Fuse(n, ocb, oh)
	}
	if err != nil {
		return err
	}
	if parallel {
		return s.Parallel(row)
	}
	return nil
}

// unitLoops reports whether every loop has the static extent 1.
func unitLoops(s *schedule.Schedule, loops ...schedule.LoopRV) bool {
	for _, l := range loops {
		if e, ok := s.Extent(l); !ok || e != 1 {
			return false
		}
	}
	return true
}

// schedulePad schedules the padded copy "pad": rows in parallel, and with cb > 1 the
// column loop split into columns and the channels of a block, the inner loop a
// contiguous, vectorized copy.
func schedulePad(s *schedule.Schedule, parallel bool, cb int64) error {
	pb, err := s.GetBlock("pad")
	if err != nil {
		return err
	}
	pl, err := s.GetLoops(pb)
	if err != nil {
		return err
	}
	prow, err := s.Fuse(pl[0], pl[1], pl[2])
	if err != nil {
		return err
	}
	if cb > 1 {
		cols, err := s.Split(pl[3], []int64{-1, cb})
		if err != nil {
			return err
		}
		if err := s.Vectorize(cols[1]); err != nil {
			return err
		}
	}
	if parallel {
		return s.Parallel(prow)
	}
	return nil
}

// scheduleRowEpilogue moves the elementwise block epilogue under loop at of the
// convolution's block c (ReverseComputeAt): the conv result then lives in a local
// buffer of that loop's extent (compact_at), and the epilogue's inner loop is
// vectorized; with split (a [N, M/sb, sb, OH, OW] result unpacked alone) its loops are
// reordered so that the channel within the block, along which the buffer is
// contiguous, is inner. A split result with epilogues after its unpacking takes
// scheduleStagedUnpack.
func scheduleRowEpilogue(s *schedule.Schedule, c schedule.BlockRV, at schedule.LoopRV, epilogue string, split bool) error {
	if epilogue != "unpack" && s.HasBlock("unpack") {
		return scheduleStagedUnpack(s, c, at, epilogue)
	}
	e, err := s.GetBlock(epilogue)
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(e, at); err != nil {
		return err
	}
	// the row then lives in a row-sized local buffer, not a whole-output one
	if err := s.CompactAt(c, at); err != nil && !errors.Is(err, schedule.ErrSchedule) {
		return err
	}
	el, err := s.GetLoops(e)
	if err != nil {
		return err
	}
	inner := el[len(el)-1]
	if split && len(el) >= 3 {
		j, oh, ow := el[len(el)-3], el[len(el)-2], el[len(el)-1]
		if err := s.Reorder(oh, ow, j); err != nil {
			return err
		}
		inner = j
	}
	return s.Vectorize(inner)
}

// scheduleStagedUnpack: the split result's unpacking (kept as its own stage by
// lowerConvResult) moves under loop at, reading the conv row buffer along its channels
// into a row-local [sb, OW] buffer (a transpose, in scalar code), and the epilogue after
// it runs along the columns, reading that buffer and writing each channel's row
// contiguously, vectorized. In one nest the epilogue either stored a value into each of
// the block's channel planes per column (64 planes a power of two apart: a store stream
// each, conflicting in L1) or read the conv buffer a block apart, which gcc 12 does
// not vectorize (a QLinearConv's requantization then ran in scalar code, three fifths of
// its time). Measured at one thread on machine G, builds alternating: a synthetic
// QLinearConv network 32.6–32.8 → 19.6–20.1 ms, quantized MobileNetV2 29.7 →
// 26.5–27.3 ms, ISNet 2.50–2.65 → 2.43–2.44 s, SqueezeNet 1.1 and MobileNetV2 up to a
// tenth faster, ResNet-18/50, EfficientNet-B0 and RegNetX-400MF within the spread.
func scheduleStagedUnpack(s *schedule.Schedule, c schedule.BlockRV, at schedule.LoopRV, epilogue string) error {
	u, err := s.GetBlock("unpack")
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(u, at); err != nil {
		return err
	}
	if err := s.CompactAt(c, at); err != nil && !errors.Is(err, schedule.ErrSchedule) {
		return err
	}
	ul, err := s.GetLoops(u)
	if err != nil {
		return err
	}
	if len(ul) >= 3 {
		j, oh, ow := ul[len(ul)-3], ul[len(ul)-2], ul[len(ul)-1]
		if err := s.Reorder(oh, ow, j); err != nil {
			return err
		}
	}
	e, err := s.GetBlock(epilogue)
	if err != nil {
		return err
	}
	if err := s.ReverseComputeAt(e, at); err != nil {
		return err
	}
	if err := s.CompactAt(u, at); err != nil && !errors.Is(err, schedule.ErrSchedule) {
		return err
	}
	el, err := s.GetLoops(e)
	if err != nil {
		return err
	}
	return s.Vectorize(el[len(el)-1])
}

// channelsInnerMaxBytes is the largest split result (ConvBlockedAttrs.SplitOut)
// unpacked alone whose unpacking runs with the channel inner (scheduleRowEpilogue's
// split): each column then stores one value into each of the block's channel planes,
// a stream per channel, which stays cheap while the result lives in cache; a larger
// result is written row by row, contiguously, and reads the row buffer a block apart.
// Measured at one thread on machine G (32 MiB L3), with the epilogues then in the same
// nest: ISNet's quantized layers at 512×512 and 256×256 (16–64 MB results) with the
// columns inner took the model's kernels from 3.34 to 2.37 s, while resnet18,
// mobilenet_v2, squeezenet1_1 and EfficientNet-B0 (results up to 3.2 MB) were
// unchanged or slower by a few percent.
const channelsInnerMaxBytes = 2 << 20

// channelsInner reports whether the split result of n, in its own element type (the
// planes the stores stream into), is small enough for the channel-inner unpacking
// (channelsInnerMaxBytes).
func channelsInner(n *graph.Node) bool {
	ext, ok := n.Outputs[0].Type.ConstShape()
	return ok && n.Outputs[0].Type.DType.Size()*ext.NumElements() <= channelsInnerMaxBytes
}
