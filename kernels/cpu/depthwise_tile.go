package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// DepthwiseConfig is the schedule of the depthwise strategy's convolution block.
type DepthwiseConfig struct {
	// TileW is the widest register tile of output columns: a row is computed in tiles
	// of the largest width up to TileW that divides it (scheduleDepthwiseTile); 0
	// computes it tap by tap over the whole row instead.
	TileW int64
	// MaxTaps is the largest kernel (rows × columns) computed in written-out register
	// tiles: a larger one's tile is the target's depthwise intrinsic (its taps a loop),
	// or, where no vector divides the block, the row computed tap by tap. A written-out
	// tile sums each column's taps in one chain of dependent multiply-adds, column after
	// column: 9 taps keep the core busy, 25 do not (and a 7×7 tile's 343 statements
	// exceed gcc's data-dependence limit, its sums going through memory), while the
	// intrinsic's loop over taps advances every column's sum at each tap. On
	// EfficientNet-B0's 5×5 layers (one thread, four rounds alternating, machine D) the
	// intrinsic took 0.67-0.76 of the written-out tile's time at stride 1 and 0.85-0.99
	// at stride 2 with AVX-512, 0.52-0.61 and 0.58-0.76 with AVX2; on MobileNetV3-Large's
	// 0.65 at stride 1 and 0.75-0.87 at stride 2;
	// on 3×3 layers the written-out tile stays faster (the intrinsic 1.07-1.14 of its time
	// on EfficientNet-B0's 112×112 and 56×56 layers).
	MaxTaps int64
	// Rows is the most output rows one parallel iteration computes from one padded
	// buffer of the input rows their windows span (the largest divisor of the output
	// height up to Rows): overlapping windows copy each input row once per band
	// instead of once per output row. A tile that reads its input in place
	// (readsInPlace) copies nothing; its bands are then only the parallel grain.
	Rows int64
}

// DefaultDepthwise is the default rule: tiles of up to 8 columns, written out for
// kernels up to 3×3, on the intrinsic beyond, bands of up to 8 rows. A band of R rows
// of a 3×3 stride-1 kernel copies R+2 input rows, and the band is the largest
// divisor of the output height up to Rows: 7×7 and 14×14 maps take bands of 7 rows,
// where bands of up to 4 would be of one and two rows (three and two input rows
// copied per output row). Against bands of up to 4, MobileNetV2's 14×14 and 7×7
// depthwise layers measured 8 to 28% less CPU time (AVX2, one thread), its larger
// ones 2 to 5% less or the same.
var DefaultDepthwise = DepthwiseConfig{TileW: 8, MaxTaps: 9, Rows: 8}

// depthwiseKnobs declare DepthwiseConfig as knobs around d: tile_w and rows.
func depthwiseKnobs(d DepthwiseConfig) []kernels.Knob {
	return []kernels.Knob{
		{Name: "tile_w", Values: []int64{0, 1, 2, 4, 6, 8, 12, 16}, Default: d.TileW},
		{Name: "max_taps", Values: []int64{9, 25, 49}, Default: d.MaxTaps},
		{Name: "rows", Values: []int64{1, 2, 4, 8}, Default: d.Rows},
	}
}

// depthwiseConfig is the configuration a resolved assignment of depthwiseKnobs names.
func depthwiseConfig(k kernels.Knobs) DepthwiseConfig {
	return DepthwiseConfig{TileW: k["tile_w"], MaxTaps: k["max_taps"], Rows: k["rows"]}
}

// rowBand splits the output row loop rows[2] (after batch and channel block) into
// bands of the largest divisor of its extent up to Rows, returning batch, channel
// block, band and the row within the band (rows itself and the row again when there is
// no band of more than one row).
func (cfg DepthwiseConfig) rowBand(s *schedule.Schedule, rows []schedule.LoopRV) ([]schedule.LoopRV, error) {
	n, ok := s.Extent(rows[2])
	r := int64(1)
	for w := min(cfg.Rows, n); ok && w > 1; w-- {
		if n%w == 0 {
			r = w
			break
		}
	}
	if r == 1 {
		return []schedule.LoopRV{rows[0], rows[1], rows[2], rows[2]}, nil
	}
	band, err := s.Split(rows[2], []int64{-1, r})
	if err != nil {
		return nil, err
	}
	return []schedule.LoopRV{rows[0], rows[1], band[0], band[1]}, nil
}

// tileWidth is the register tile's width for a convolution block whose row loop is ow
// and whose reduction has red loops: the largest divisor of ow's extent up to TileW,
// so that every tile is whole; 0 (no tile) without TileW, for a grouped block (red 3:
// its input channels make the tile's body too long to write out) or a symbolic row, and
// for a kernel of more than MaxTaps taps (rs, its rows and columns) unless the tile is
// the depthwise intrinsic (intrinsic: its taps are a loop, not written out).
func (cfg DepthwiseConfig) tileWidth(s *schedule.Schedule, ow schedule.LoopRV, rs []schedule.LoopRV, red int, intrinsic bool) int64 {
	n, ok := s.Extent(ow)
	if cfg.TileW <= 0 || red != 2 || !ok {
		return 0
	}
	if taps, ok := kernelTaps(s, rs); !ok || taps > cfg.MaxTaps && !intrinsic {
		return 0
	}
	for w := min(cfg.TileW, n); w > 1; w-- {
		if n%w == 0 {
			return w
		}
	}
	return 1
}

// kernelTaps is the product of the static extents of the kernel's loops rs; false when
// one is symbolic.
func kernelTaps(s *schedule.Schedule, rs []schedule.LoopRV) (int64, bool) {
	taps := int64(1)
	for _, r := range rs {
		e, ok := s.Extent(r)
		if !ok {
			return 0, false
		}
		taps *= e
	}
	return taps, true
}

// scheduleDepthwiseTile computes the convolution block c (loops ow, lane, then the
// kernel's rows and columns rs) in register tiles: the row's columns split into tiles
// of tw, and for each tile the lanes are one vector loop around the tile's columns and
// the taps, all written out (unrolled). Each lane's tw sums then live in registers
// from the zero to the one store: the C compiler keeps straight-line accumulations in
// registers, and vectorizes the lane loop around them (`omp simd`, the schedule's
// vectorize taking innermost loops only), tw vector accumulators per lane vector, the
// weights of a tap loaded once per tile and an input vector loaded once for every
// column and tap that reads it.
//
// With in (the target's depthwise intrinsic for tiles of tw, intrin.DepthwiseTile), the
// tile's columns, lanes and taps are tensorized onto it instead: one call per tile owns
// the init and the whole reduction, its taps a loop rather than written out, so that any
// kernel size keeps its sums in registers and a tap's FMAs are independent chains, one
// per column. rows schedules the rest of the nest (the padded copy), before the call
// replaces the tile's loops.
func scheduleDepthwiseTile(s *schedule.Schedule, c schedule.BlockRV, ow, lane schedule.LoopRV, rs []schedule.LoopRV, tw int64, in *loopir.TensorIntrin, rows func() error) error {
	if len(rs) != 2 {
		return fmt.Errorf("BUG: depthwise tile: %d reduction loops, want the kernel's rows and columns", len(rs))
	}
	cols, err := s.Split(ow, []int64{-1, tw})
	if err != nil {
		return err
	}
	if in != nil {
		if err := rows(); err != nil {
			return err
		}
		return s.Tensorize(cols[1], in)
	}
	if err := s.Reorder(cols[0], lane, cols[1], rs[0], rs[1]); err != nil {
		return err
	}
	if _, err := s.DecomposeReduction(c, rs[0]); err != nil {
		return err
	}
	for _, l := range []schedule.LoopRV{cols[1], rs[0], rs[1]} {
		if err := s.Unroll(l); err != nil {
			return err
		}
	}
	if err := s.Annotate(lane, "c.pragma", "omp simd"); err != nil {
		return err
	}
	return rows()
}
