package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/schedule"
)

// GemmConfig is the search space of the matmul strategy.
type GemmConfig struct {
	KC       int64 // reduction block: one panel of packed B (KC × nr) stays in L1
	MC       int64 // row block, in micro-kernel tiles: one block of A (MC·mr × KC) stays in L2
	Parallel bool  // run row blocks on the device's threads
}

// DefaultGemm was the fastest (or tied) of KC ∈ {128, 192, 256, 512, 1024} × MC ∈ {4, 8,
// 16}, with and without packing A, for sgemm 1024³ on Zen 5 (48 KiB L1, 1 MiB L2),
// measured side by side in one process: KC = 1024 (one zero-initializing call per tile)
// fell to half speed in some runs, and packing A cost more than it saved. With K ≤ KC
// the reduction is not split and the micro-kernel's zero-initializing form replaces the
// separate init pass.
var DefaultGemm = GemmConfig{KC: 256, MC: 8, Parallel: true}

// ScheduleMatMulPacked schedules kernels.MatMulPacked (blocks "packed_a" if A is packed,
// "packed_b" and "matmul")
// in the GotoBLAS order: row block (parallel), reduction block ko, column panel jo, row
// tile, then the mr × nr × KC micro-kernel call. A block of A stays in L2 while every
// panel of B streams past it; each panel of B stays in L1 across the block's tiles.
func ScheduleMatMulPacked(s *schedule.Schedule, g intrin.Gemm, cfg GemmConfig) error {
	mr, nr := g.MR, g.NR
	for _, name := range []string{"packed_a", "packed_b"} {
		if !s.HasBlock(name) {
			continue // read in place (A) or packed on the host (B)
		}
		pb, err := s.GetBlock(name)
		if err != nil {
			return err
		}
		pl, err := s.GetLoops(pb)
		if err != nil {
			return err
		}
		if cfg.Parallel {
			if err := s.Parallel(pl[0]); err != nil {
				return err
			}
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
	ib, err := s.Split(i[0], []int64{-1, max(cfg.MC, 1)})
	if err != nil {
		return err
	}
	if kExt, ok := s.Extent(l[2]); ok && kExt <= cfg.KC {
		// the whole reduction in one call, which also zero-initializes the tile
		if err := s.Reorder(ib[0], j[0], ib[1], i[1], j[1], l[2]); err != nil {
			return err
		}
		if err := s.Tensorize(i[1], g.Init); err != nil {
			return err
		}
	} else {
		k, err := s.Split(l[2], []int64{-1, cfg.KC})
		if err != nil {
			return err
		}
		if err := s.Reorder(ib[0], k[0], j[0], ib[1], i[1], j[1], k[1]); err != nil {
			return err
		}
		if _, err := s.DecomposeReduction(c, k[0]); err != nil {
			return err
		}
		if err := s.Tensorize(i[1], g.Update); err != nil {
			return err
		}
	}
	if cfg.Parallel {
		return s.Parallel(ib[0])
	}
	return nil
}
