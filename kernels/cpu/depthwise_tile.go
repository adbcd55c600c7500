package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
)

// DepthwiseConfig is the schedule of the depthwise strategy's convolution block.
type DepthwiseConfig struct {
	// TileW is the widest register tile of output columns: a row is computed in tiles
	// of the largest width up to TileW that divides it (scheduleDepthwiseTile); 0
	// computes it tap by tap over the whole row instead.
	TileW int64
	// MaxTaps is the largest kernel (rows × columns) computed in register tiles: a
	// larger one's written-out tile keeps too few of its weights in registers, and is
	// computed tap by tap.
	MaxTaps int64
	// Rows is the most output rows one parallel iteration computes from one padded
	// buffer of the input rows their windows span (the largest divisor of the output
	// height up to Rows): overlapping windows copy each input row once per band
	// instead of once per output row.
	Rows int64
}

// DefaultDepthwise is the default rule: tiles of up to 8 columns for kernels up to
// 5×5, bands of up to 8 rows. A band of R rows of a 3×3 stride-1 kernel copies R+2
// input rows, and the band is the largest divisor of the output height up to Rows:
// 7×7 and 14×14 maps take bands of 7 rows, where bands of up to 4 would be of one
// and two rows (three and two input rows copied per output row). Against bands of
// up to 4, MobileNetV2's 14×14 and 7×7 depthwise layers measured 8 to 28% less CPU
// time (AVX2, one thread), its larger ones 2 to 5% less or the same.
var DefaultDepthwise = DepthwiseConfig{TileW: 8, MaxTaps: 25, Rows: 8}

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
// so that every tile is whole; 0 (no tile) without TileW, for a kernel of more than
// MaxTaps taps (rs, its rows and columns), for a grouped block (red 3: its input
// channels make the tile's body too long to write out) or a symbolic row.
func (cfg DepthwiseConfig) tileWidth(s *schedule.Schedule, ow schedule.LoopRV, rs []schedule.LoopRV, red int) int64 {
	n, ok := s.Extent(ow)
	if cfg.TileW <= 0 || red != 2 || !ok {
		return 0
	}
	taps := int64(1)
	for _, r := range rs {
		e, ok := s.Extent(r)
		if !ok {
			return 0
		}
		taps *= e
	}
	if taps > cfg.MaxTaps {
		return 0
	}
	for w := min(cfg.TileW, n); w > 1; w-- {
		if n%w == 0 {
			return w
		}
	}
	return 1
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
func scheduleDepthwiseTile(s *schedule.Schedule, c schedule.BlockRV, ow, lane schedule.LoopRV, rs []schedule.LoopRV, tw int64) error {
	if len(rs) != 2 {
		return fmt.Errorf("BUG: depthwise tile: %d reduction loops, want the kernel's rows and columns", len(rs))
	}
	cols, err := s.Split(ow, []int64{-1, tw})
	if err != nil {
		return err
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
	return s.Annotate(lane, "c.pragma", "omp simd")
}
