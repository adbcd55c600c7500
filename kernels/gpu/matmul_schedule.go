package gpu

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// ErrNotMatMul: the product block is not a matrix product the tiled rule schedules
// (loops: batch axes, rows, columns, then one reduction loop).
var ErrNotMatMul = errors.New("not a matrix product")

// ScheduleMatMulTiled is the tiled GPU rule for a matrix product block named product
// (kernels.MatMulReduction's "matmul" or kernels.GemmReduction's "gemm": loops over the
// batch axes, rows i, columns j, and the reduction k innermost) and the stages after it
// (Gemm's alpha and C, fused epilogues; all but the last inlined into it):
//
//   - rows split into (blocks, TY threads, BM/TY register rows), columns into (blocks,
//     TX threads, BN/TX register columns), k into steps of BK; the batch axes fused;
//   - nest: batch (blockIdx.z), row blocks (blockIdx.y), column blocks (blockIdx.x),
//     threads (threadIdx.y, threadIdx.x), k steps, k within a step, register rows and
//     columns (unrolled);
//   - the accumulator is a register tile per thread: its init runs before the k steps,
//     and the output (through the last stage, or a local cache of the product) is
//     written from it after them;
//   - at each k step the block's threads copy the step's A and B tiles into shared
//     buffers (cache_read "shared" + compute_at: a cooperative copy), and the barriers
//     between copy and use come from loopir/passes.InsertBarriers.
//
// Rows, columns and k that the tile does not divide leave predicates (tails: the copy
// skips what is past an operand's edge, the product what is past the output's or K's),
// so symbolic extents (batch·sequence rows) work. A product block of another shape is
// ErrNotMatMul; a stage that cannot be inlined or read from the register tile fails
// with the schedule's error.
func ScheduleMatMulTiled(s *schedule.Schedule, product string, tile MatMulTile) error {
	return scheduleTiled(s, product, tile, nil)
}

// scheduleTiled is ScheduleMatMulTiled, except that the stages named in operands (the
// producers of the product's A or B, read by nothing else) are not inlined into the
// product: each is inlined into the cooperative copy of its shared tile instead, so
// the copy computes the tile's elements (a convolution's gathered im2col tile).
func scheduleTiled(s *schedule.Schedule, product string, tile MatMulTile, operands map[string]bool) error {
	if tile.TY < 1 || tile.TX < 1 || tile.BK < 1 || tile.BM%tile.TY != 0 || tile.BN%tile.TX != 0 {
		return fmt.Errorf("BUG: ScheduleMatMulTiled: tile %v", tile)
	}
	c, err := s.GetBlock(product)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotMatMul, err)
	}
	loops, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(loops) < 3 {
		return fmt.Errorf("%w: block %s has %d loops", ErrNotMatMul, product, len(loops))
	}
	nb := len(loops) - 3
	for i, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return err
		}
		if red != (i == len(loops)-1) {
			return fmt.Errorf("%w: block %s's loop %d of %d reduces: %v", ErrNotMatMul, product, i+1, len(loops), red)
		}
	}
	// the last stage after the product, or a local cache of the product, writes the
	// output from the register tile
	var out schedule.BlockRV
	if last := lastStage(s, product); last != "" {
		out, err = inlineStages(s, product, last, operands)
	} else {
		out, err = s.CacheWrite(c, 0, loopir.ScopeLocal)
	}
	if err != nil {
		return err
	}
	i, err := s.Split(loops[nb], []int64{-1, tile.TY, tile.BM / tile.TY})
	if err != nil {
		return err
	}
	j, err := s.Split(loops[nb+1], []int64{-1, tile.TX, tile.BN / tile.TX})
	if err != nil {
		return err
	}
	k, err := s.Split(loops[nb+2], []int64{-1, tile.BK})
	if err != nil {
		return err
	}
	var order []schedule.LoopRV
	bind := map[schedule.LoopRV]loopir.ThreadAxis{i[0]: loopir.BlockIdxY, j[0]: loopir.BlockIdxX, i[1]: loopir.ThreadIdxY, j[1]: loopir.ThreadIdxX}
	if nb > 0 {
		batch := loops[0]
		if nb > 1 {
			if batch, err = s.Fuse(loops[:nb]...); err != nil {
				return err
			}
		}
		order = append(order, batch)
		bind[batch] = loopir.BlockIdxZ
	}
	order = append(order, i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2])
	if err := s.Reorder(order...); err != nil {
		return err
	}
	for _, l := range []schedule.LoopRV{i[2], j[2]} {
		if err := s.Unroll(l); err != nil {
			return err
		}
	}
	for _, l := range order[:len(order)-4] { // the launch axes, outermost first
		if err := s.Bind(l, bind[l]); err != nil {
			return err
		}
	}
	if _, err := s.DecomposeReduction(c, k[0]); err != nil {
		return err
	}
	if err := s.ReverseComputeAt(out, j[1]); err != nil {
		return err
	}
	for read := range 2 { // A, then B
		cp, err := s.CacheRead(c, read, loopir.ScopeShared)
		if err != nil {
			return err
		}
		if src := strings.TrimSuffix(s.BlockName(cp), "_"+loopir.ScopeShared); operands[src] {
			b, err := s.GetBlock(src)
			if err != nil {
				return err
			}
			if err := s.ComputeInline(b); err != nil {
				return err
			}
		}
		if err := s.ComputeAt(cp, k[0]); err != nil {
			return err
		}
	}
	return nil
}

// lastStage is the last block after the product, or "" when the product is the last.
func lastStage(s *schedule.Schedule, product string) string {
	names := s.BlockNames()
	if len(names) == 0 || names[len(names)-1] == product {
		return ""
	}
	return names[len(names)-1]
}

// inlineStages inlines every block but the product, the last stage and the operand
// stages, and returns the last stage's block.
func inlineStages(s *schedule.Schedule, product, last string, operands map[string]bool) (schedule.BlockRV, error) {
	for _, name := range s.BlockNames() {
		if name == product || name == last || operands[name] {
			continue
		}
		b, err := s.GetBlock(name)
		if err != nil {
			return "", err
		}
		if err := s.ComputeInline(b); err != nil {
			return "", err
		}
	}
	return s.GetBlock(last)
}
