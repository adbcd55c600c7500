package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
)

// GemmConfig is the search space of the matmul strategy.
type GemmConfig struct {
	KC       int64 // reduction block: one panel of packed B (KC × nr) stays in L1
	Parallel bool  // run column panels on the device's threads
}

// DefaultGemm suits a 32–48 KiB L1: a 256 × 32 float panel is 32 KiB.
var DefaultGemm = GemmConfig{KC: 256, Parallel: true}

// tile returns the rows and columns of a GEMM intrinsic's tile.
func tile(in *loopir.TensorIntrin) (mr, nr int64) {
	loops, _, ok := loopir.DescNest(in.Desc.Body)
	if !ok || len(loops) != 3 {
		panic("BUG: " + in.Name + " is not a GEMM intrinsic")
	}
	return loops[0].Extent.(*loopir.IntImm).V, loops[1].Extent.(*loopir.IntImm).V
}

// Tile exposes the (rows, columns) of a GEMM intrinsic's tile, for compute definitions
// that pack to it.
func Tile(in *loopir.TensorIntrin) (mr, nr int64) { return tile(in) }

// ScheduleMatMulPacked schedules kernels.MatMulPacked (blocks "packed_b" and "matmul")
// in the GotoBLAS order: column panel jo (parallel), reduction block ko, row tile io,
// then the mr × nr × KC micro-kernel call.
func ScheduleMatMulPacked(s *schedule.Schedule, in *loopir.TensorIntrin, cfg GemmConfig) error {
	mr, nr := tile(in)
	pb, err := s.GetBlock("packed_b")
	if err != nil {
		return err
	}
	pl, err := s.GetLoops(pb)
	if err != nil {
		return err
	}
	if err := s.Vectorize(pl[2]); err != nil {
		return err
	}
	if cfg.Parallel {
		if err := s.Parallel(pl[0]); err != nil {
			return err
		}
	}
	c, err := s.GetBlock("matmul")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(l) != 3 {
		return fmt.Errorf("matmul strategy: block has %d loops, want 3", len(l))
	}
	i, err := s.Split(l[0], []int64{-1, mr})
	if err != nil {
		return err
	}
	j, err := s.Split(l[1], []int64{-1, nr})
	if err != nil {
		return err
	}
	k, err := s.Split(l[2], []int64{-1, cfg.KC})
	if err != nil {
		return err
	}
	if err := s.Reorder(j[0], k[0], i[0], i[1], j[1], k[1]); err != nil {
		return err
	}
	if _, err := s.DecomposeReduction(c, k[0]); err != nil {
		return err
	}
	if err := s.Tensorize(i[1], in); err != nil {
		return err
	}
	if cfg.Parallel {
		return s.Parallel(j[0])
	}
	return nil
}
