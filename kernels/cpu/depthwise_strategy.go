package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// depthwiseStrategies: depthwise and grouped convolutions on channel blocks
// (DepthwiseNCHWc; GroupedConvBlocked on the micro-kernel where a group is one tile
// wide, else GroupedNCHWc), after the tensorized convolutions (which take one group
// only) and before generic.
func depthwiseStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	dw := withRegistry(reg, func(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		return buildGroups(reg, n, in, epi, t, false, DefaultDepthwise)
	})
	dwTuned := func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, k kernels.Knobs) (*kernels.Impl, error) {
		return buildGroups(reg, n, in, epi, t, false, depthwiseConfig(k))
	}
	gr := withRegistry(reg, func(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		return buildGroups(reg, n, in, epi, t, true, DepthwiseConfig{})
	})
	gemm := withRegistry(reg, buildGroupedGemm)
	return map[graph.Op][]kernels.Strategy{
		graph.OpConv: {{Name: "conv2d-depthwise-nchwc", Build: unfused(dw), Fused: dw, Knobs: depthwiseKnobs(DefaultDepthwise), Tuned: dwTuned},
			{Name: "conv2d-grouped-tensorized", Build: unfused(gemm), Fused: gemm},
			{Name: "conv2d-grouped-nchwc", Build: unfused(gr), Fused: gr}},
	}
}

// groupsBlock is the attributes and channel block of n as the depthwise (grouped
// false) or grouped strategies compute it on t: an error wrapping ErrNotApplicable when
// n is not such a convolution, block 0 when no block fits.
func groupsBlock(t target.Target, n *graph.Node, grouped bool) (DepthwiseAttrs, int64, error) {
	if grouped {
		a, err := groupedConv(n)
		if err != nil {
			return a, 0, err
		}
		if _, g, err := groupedGemm(t, n); err == nil {
			return a, g.NR, nil // the tensorized strategy's blocks: one group each
		}
		return a, groupedBlock(t, a), nil
	}
	a, err := depthwiseConv(n)
	if err != nil {
		return a, 0, err
	}
	return a, depthwiseBlock(t, n, a), nil
}

// depthwiseConv returns the attributes of the blocked depthwise convolution n (all but
// the block, which the caller chooses), or an error wrapping ErrNotApplicable: one group
// per input channel (static), weights [M, 1, KH, KW] with M a multiple of the channels,
// and what convWindowAttrs takes.
func depthwiseConv(n *graph.Node) (DepthwiseAttrs, error) {
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if a == nil || len(n.Inputs) < 2 || n.Inputs[0] == nil || n.Inputs[1] == nil || n.Inputs[1].Const == nil || len(n.Inputs[0].Type.Shape) != 4 || len(n.Inputs[1].Const.Shape) != 4 {
		return DepthwiseAttrs{}, notApplicable("convolution without constant 4-D weights")
	}
	x, w := n.Inputs[0].Type, n.Inputs[1].Const
	c, ok := x.Shape[1].Value()
	if !ok || a.Group != c || c <= 1 || w.Shape[1] != 1 || int64(w.Shape[0])%c != 0 {
		return DepthwiseAttrs{}, notApplicable("group %d over %v channels, weights %v: not depthwise", a.Group, x.Shape[1], w.Shape)
	}
	attrs, err := convWindowAttrs(n)
	if err != nil {
		return attrs, err
	}
	attrs.Mult = int64(w.Shape[0]) / c
	return attrs, nil
}

// convWindowAttrs returns the window and storage attributes of the blocked convolution
// n, or an error wrapping ErrNotApplicable: float32 2-D convolutions with constant
// weights, static extents and static padding (explicit, VALID or SAME).
func convWindowAttrs(n *graph.Node) (DepthwiseAttrs, error) {
	var attrs DepthwiseAttrs
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if a == nil || len(n.Inputs) < 2 || n.Inputs[0] == nil || n.Inputs[1] == nil {
		return attrs, notApplicable("convolution without weights")
	}
	x, w := n.Inputs[0].Type, n.Inputs[1]
	if w.Const == nil || x.DType != tensor.Float32 || w.Const.DType != tensor.Float32 || len(x.Shape) != 4 || len(w.Const.Shape) != 4 {
		return attrs, notApplicable("float32 2-D convolution with constant weights")
	}
	if _, ok := x.ConstShape(); !ok {
		return attrs, notApplicable("input %v of symbolic extents", x)
	}
	win, err := graph.ConvWindow(a, []int64{int64(w.Const.Shape[2]), int64(w.Const.Shape[3])})
	if err != nil {
		return attrs, notApplicable("window: %v", err)
	}
	for d := 0; d < 2; d++ {
		attrs.Strides[d], attrs.Dilations[d] = win.Strides[d], win.Dilations[d]
		begin, end, ok := win.StaticPads(d)
		if !ok {
			in, known := x.Shape[2+d].Value()
			if !known {
				return attrs, notApplicable("auto_pad %s over a symbolic extent", a.AutoPad)
			}
			ax := win.Axis(d, in)
			begin, end = ax.PadBegin, ax.PadEnd
		}
		attrs.Pads[d], attrs.Pads[2+d] = begin, end
	}
	attrs.XBlock = x.Block
	return attrs, nil
}

// depthwiseBlock is the channel block of the depthwise convolution n with attributes
// a on t: the block its input is stored in when that block divides the channels (no
// multiplier: the copy then moves whole blocks), else the width of the micro-kernel
// the neighbouring tensorized convolutions take for these channels (convGemm) where it
// is whole vectors, else
// one vector of the target or a half or quarter of one, the first of them that divides
// the output channels; 0 when none does.
func depthwiseBlock(t target.Target, n *graph.Node, a DepthwiseAttrs) int64 {
	m := int64(n.Inputs[1].Const.Shape[0])
	if a.XBlock > 0 && a.Mult == 1 && m%a.XBlock == 0 {
		return a.XBlock
	}
	if nr, lanes := convGemm(t, n).NR, int64(max(t.VectorBits, 128)/32); m%nr == 0 && nr%lanes == 0 {
		return nr // not a tile with half a vector (AVX-512's 24): whole vectors below
	}
	// one vector of the target, else a half or a quarter of one (at least 4 floats):
	// AVX-512's 16 lanes divide none of MobileNetV3's 72, 120, 184 and 200 channels,
	// that 8 divides
	for lanes := int64(max(t.VectorBits, 128) / 32); lanes >= 4; lanes /= 2 {
		if m%lanes == 0 {
			return lanes
		}
	}
	return 0
}

// depthwisePair is the depthwise convolution n's columns per vector (DepthwiseAttrs.Pair)
// under cfg on t: where its block a.Block is narrower than the target's vector and
// divides it, the horizontal stride is 1 and the kernel's tile is written out (cfg:
// a tile width, at most MaxTaps taps), the vector's lanes over the block, if that
// divides the output columns and they are at least minPairColumns; else 1.
// MobileNetV3's 72, 120, 184 and 200 channels compute in blocks of 8, on AVX-512 two
// columns a vector: its 3×3 layer over 72 channels at 56×56 and 5×5 over 120 at 28×28
// took 18-25% less time (0.18 → 0.14-0.15 and 0.30-0.32 → 0.24-0.25 ms per launch,
// min of 4-5 rounds by thread CPU time, Emerald Rapids, one thread), its 3×3 layers
// over 184 and 200 channels at 14×14 (one tile a row) 9-15% more.
func depthwisePair(t target.Target, n *graph.Node, a DepthwiseAttrs, cfg DepthwiseConfig) int64 {
	lanes := int64(max(t.VectorBits, 128) / 32)
	ws := n.Inputs[1].Const.Shape
	ot := n.Outputs[0].Type
	if a.Block <= 0 || a.Block >= lanes || lanes%a.Block != 0 || a.Strides[1] != 1 || cfg.TileW <= 0 || int64(ws[2])*int64(ws[3]) > cfg.MaxTaps || len(ot.Shape) != 4 {
		return 1
	}
	ow, ok := ot.Shape[3].Value()
	if pair := lanes / a.Block; ok && ow%pair == 0 && ow >= minPairColumns {
		return pair
	}
	return 1
}

// minPairColumns is the narrowest output row that depthwisePair computes paired.
const minPairColumns = 28

// buildGroups lowers a depthwise (grouped false) or grouped convolution through
// DepthwiseNCHWc or GroupedNCHWc, reading its input as it is stored and leaving its
// output blocked when the graph says so; bias and epilogues run per output row on the
// blocked result, or in a nest of their own after unpacking. cfg is the depthwise
// block's schedule (a grouped block has no register tile).
func buildGroups(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, grouped bool, cfg DepthwiseConfig) (*kernels.Impl, error) {
	attrs, bl, err := groupsBlock(t, n, grouped)
	if err != nil {
		return nil, err
	}
	m := int64(n.Inputs[1].Const.Shape[0])
	if b := n.Outputs[0].Type.Block; b != 0 {
		// the block the layout policy chose; any block within the groups computes it
		if m%b != 0 || attrs.Mult%b != 0 && (grouped || b%attrs.Mult != 0) {
			return nil, fmt.Errorf("BUG: %v: output stored in blocks of %d across its groups of %d channels", n, b, attrs.Mult)
		}
		attrs.BlockedOut, bl = true, b
	} else if bl == 0 {
		return nil, notApplicable("%d output channels in no block of this target", m)
	}
	attrs.Block = bl
	if !grouped {
		attrs.Pair = depthwisePair(t, n, attrs, cfg)
	}
	x, w := in[0], in[1]
	ws := w.Const.Shape
	var wp *te.Tensor
	var feed kernels.Param
	if grouped {
		wp = te.Placeholder("w", tensor.Float32, kernels.Static(m/bl, int64(ws[1]), int64(ws[2]), int64(ws[3]), bl)...)
		feed = kernels.Param{Input: 1, Layout: fmt.Sprintf("OIHW→[O/%d,I,H,W,%d]", bl, bl), Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
			return PackGroupedWeights(v, bl)
		}}
	} else if pair := attrs.Pair; pair > 1 {
		wp = te.Placeholder("w", tensor.Float32, kernels.Static(m/bl, int64(ws[2]), int64(ws[3]), bl*pair)...)
		feed = kernels.Param{Input: 1, Layout: fmt.Sprintf("M1HW→[M/%d,H,W,%d×%d]", bl, pair, bl), Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
			return PackDepthwiseWeightsPaired(v, bl, pair)
		}}
	} else {
		wp = te.Placeholder("w", tensor.Float32, kernels.Static(m/bl, int64(ws[2]), int64(ws[3]), bl)...)
		feed = kernels.Param{Input: 1, Layout: fmt.Sprintf("M1HW→[M/%d,H,W,%d]", bl, bl), Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
			return PackDepthwiseWeights(v, bl)
		}}
	}
	bias, params, feeds := convBias(in, []*te.Tensor{x.T, wp}, []kernels.Param{{Input: 0}, feed})
	def := DepthwiseNCHWc
	if grouped {
		def = GroupedNCHWc
	}
	out, err := def(x.T, wp, bias, attrs)
	if err != nil {
		return nil, err
	}
	return lowerDepthwise(reg, n, out, params, feeds, epi, t, attrs.BlockedOut, cfg, readsInPlace(attrs, grouped))
}

// lowerDepthwise composes the epilogues onto a depthwise or grouped convolution's result
// out (DepthwiseNCHWc's or GroupedNCHWc's stages) and lowers and schedules the kernel:
// the epilogues under the output row loop when the result stays blocked, a nest of
// their own after the unpacking otherwise.
func lowerDepthwise(reg *kernels.Registry, n *graph.Node, out *te.Tensor, params []*te.Tensor, feeds []kernels.Param, epi []kernels.Epilogue, t target.Target, blockedOut bool, cfg DepthwiseConfig, inPlace bool) (*kernels.Impl, error) {
	s, feeds, err := withEpilogues(reg, n, out, params, feeds, epi)
	if err != nil {
		return nil, err
	}
	last, err := inlineChain(s, "pad", "dwconv")
	if err != nil {
		return nil, err
	}
	if last == "dwconv" {
		last = ""
	}
	rowEpilogue := last
	if !blockedOut {
		rowEpilogue = ""
	}
	if err := scheduleDepthwise(s, t, rowEpilogue, cfg, inPlace); err != nil {
		return nil, err
	}
	if last != "" && rowEpilogue == "" {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// ScheduleDepthwise schedules DepthwiseNCHWc and GroupedNCHWc (blocks "pad" and
// "dwconv"): each output row (batch, channel block, row: fused, parallel) computes the
// padded input rows its window spans into a buffer of its own, then accumulates tap by
// tap (a group's input channel, kernel row and column outermost) over the row's columns
// and the block's channel lanes, the lanes a unit-stride vector loop. An epilogue block (the bias, fused elementwise ops), when
// named, owns the row loop: the convolution's row is computed under it into a row
// buffer and the epilogue runs on it while it is in cache, vectorized along the lanes.
func ScheduleDepthwise(s *schedule.Schedule, t target.Target, epilogue string) error {
	return ScheduleDepthwiseWith(s, t, epilogue, DefaultDepthwise)
}

// readsInPlace reports whether a written-out register tile of the depthwise convolution
// a reads its input where it is stored rather than from a padded copy: one output
// channel per input channel (no multiplier, not grouped), the input stored in the
// convolution's own channel blocks and one column a vector, so that each tap's read is
// a unit-stride run of lanes whose zero padding is a test of its row and column alone.
// The lowering's partition-boundary-loops pass then splits the rows and tiles into the
// borders, which keep the test, and the interior, which reads plainly. A copy phase
// that is bound by memory no longer precedes the arithmetic: MobileNetV2's stride-2
// layer over 96 channels at 112×112 took 0.20-0.21 ms against 0.28-0.29 with the
// padded copy (C harness, one thread, machine F).
func readsInPlace(a DepthwiseAttrs, grouped bool) bool {
	return !grouped && a.Mult == 1 && a.Pair <= 1 && a.XBlock == a.Block
}

// ScheduleDepthwiseWith is ScheduleDepthwise under cfg: with a register tile
// (cfg.tileWidth), a depthwise block's columns are computed in tiles
// (scheduleDepthwiseTile), else tap by tap over the whole row.
func ScheduleDepthwiseWith(s *schedule.Schedule, t target.Target, epilogue string, cfg DepthwiseConfig) error {
	return scheduleDepthwise(s, t, epilogue, cfg, false)
}

// scheduleDepthwise is ScheduleDepthwiseWith; with inPlace (readsInPlace), a written-out
// register tile reads the input through the inlined "pad" block instead of a padded
// copy per band of rows.
func scheduleDepthwise(s *schedule.Schedule, t target.Target, epilogue string, cfg DepthwiseConfig, inPlace bool) error {
	c, err := s.GetBlock("dwconv")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(l) != 7 && len(l) != 8 {
		return fmt.Errorf("depthwise strategy: block has %d loops, want 7 or 8", len(l))
	}
	red := len(l) - 5 // the kernel's rows and columns, after a group's input channels
	rows := l[:3]     // batch, channel block, output row
	if epilogue != "" {
		e, err := s.GetBlock(epilogue)
		if err != nil {
			return err
		}
		el, err := s.GetLoops(e)
		if err != nil {
			return err
		}
		if len(el) != 5 {
			return fmt.Errorf("depthwise strategy: epilogue has %d loops, want 5", len(el))
		}
		band, err := cfg.rowBand(s, el[:3])
		if err != nil {
			return err
		}
		if err := s.ComputeAt(c, band[3]); err != nil {
			return err
		}
		if err := s.Vectorize(el[4]); err != nil {
			return err
		}
		if l, err = s.GetLoops(c); err != nil {
			return err
		}
		rows = band[:3]
	} else if red == 2 {
		band, err := cfg.rowBand(s, rows)
		if err != nil {
			return err
		}
		if l, err = s.GetLoops(c); err != nil {
			return err
		}
		rows = band[:3]
	}
	ow, lane, rs := l[len(l)-red-2], l[len(l)-red-1], l[len(l)-red:]
	// a kernel of more taps than a written-out tile takes: the target's depthwise
	// intrinsic, where a vector divides the block's lanes
	block, static := s.Extent(lane)
	taps, known := kernelTaps(s, rs)
	intrinsic := static && known && red == 2 && taps > cfg.MaxTaps && intrin.DepthwiseTile(t, 1, block) != nil
	if tw := cfg.tileWidth(s, ow, rs, red, intrinsic); tw > 0 {
		var in *loopir.TensorIntrin
		if intrinsic {
			in = intrin.DepthwiseTile(t, tw, block)
		}
		return scheduleDepthwiseTile(s, c, ow, lane, rs, tw, in, func() error {
			if inPlace && in == nil {
				return scheduleInPlaceRows(s, rows)
			}
			return schedulePadRows(s, rows)
		})
	}
	if err := s.Reorder(append(append([]schedule.LoopRV{}, rs...), ow, lane)...); err != nil {
		return err
	}
	init, err := s.DecomposeReduction(c, rs[0])
	if err != nil {
		return err
	}
	if err := vectorizeInnermost(s, init); err != nil {
		return err
	}
	if err := s.Vectorize(lane); err != nil {
		return err
	}
	return schedulePadRows(s, rows)
}

// schedulePadRows computes the "pad" block under the output row rows[2] (the rows the
// window spans, its lanes a vector loop) and makes the fused rows loop the parallel
// one.
func schedulePadRows(s *schedule.Schedule, rows []schedule.LoopRV) error {
	pb, err := s.GetBlock("pad")
	if err != nil {
		return err
	}
	if err := s.ComputeAt(pb, rows[2]); err != nil {
		return err
	}
	if err := vectorizeInnermost(s, pb); err != nil {
		return err
	}
	row, err := s.Fuse(rows...)
	if err != nil {
		return err
	}
	return s.Parallel(row)
}

// scheduleInPlaceRows inlines the "pad" block into the convolution (its reads become
// the input's, behind the padding's test) and makes the fused rows loop the parallel
// one.
func scheduleInPlaceRows(s *schedule.Schedule, rows []schedule.LoopRV) error {
	pb, err := s.GetBlock("pad")
	if err != nil {
		return err
	}
	if err := s.ComputeInline(pb); err != nil {
		return err
	}
	row, err := s.Fuse(rows...)
	if err != nil {
		return err
	}
	return s.Parallel(row)
}

// vectorizeInnermost vectorizes the innermost loop of block b.
func vectorizeInnermost(s *schedule.Schedule, b schedule.BlockRV) error {
	l, err := s.GetLoops(b)
	if err != nil {
		return err
	}
	if len(l) == 0 {
		return fmt.Errorf("BUG: depthwise strategy: block %s has no loops", s.BlockName(b))
	}
	return s.Vectorize(l[len(l)-1])
}
