package cpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/schedule"
)

// GemmConfig is the search space of the matmul strategy.
type GemmConfig struct {
	KC       int64 // reduction block: one panel of packed B (KC × nr) stays in L1 (a static reduction of up to 1.5·KC runs whole: unsplitK)
	MC       int64 // row block, in micro-kernel tiles: one block of A (MC·mr × KC) stays in L2
	Parallel bool  // run row blocks on the device's threads
	// FewRowBlocks: with static rows making at most this many row blocks, the parallel
	// loop runs over (column panel, row block) pairs instead, the reduction blocks
	// inside each pair: a 128-row product has 3 row blocks of 48 rows, which 2 threads
	// split 2:1 (an idle thread a third of the time), but N/nr × 3 pairs split evenly.
	// Panel-major, consecutive pairs share their panel of B (in L1) while all of A (few
	// rows) stays in L2: B, the large operand here, is read from memory once.
	FewRowBlocks int64
	// SymbolicMC replaces MC when the row count is symbolic (0: MC): the row blocks are
	// the parallel loop then, and smaller blocks split a transformer's few hundred rows
	// more evenly between threads (generic bert_tiny s128 on 2 threads: 4 tiles measured
	// ~12% faster than 8 over three alternations, 4×512 rows within noise).
	SymbolicMC int64
	// WideB: with symbolic rows and a B of at least this many bytes, the parallel loop
	// runs over (column panel, row block) pairs as for FewRowBlocks (0: never). Such a
	// product streams its weights from memory, and a few rows at run time make one row
	// block, which ran on one thread: Faster R-CNN's box head (11 to 150 rows times
	// 12544x1024 weights, 49 MiB) took 4.5-5.1 ms on two threads, 1.7-2.0 as pairs
	// (one thread 5.3-5.5 -> 4.4-4.8), alternating builds on machine F. A's rows are
	// then read once per panel, which costs little where B is this large.
	WideB int64
}

// DefaultGemm was the fastest (or tied) of KC ∈ {128, 192, 256, 512, 1024} × MC ∈ {4, 8,
// 16}, with and without packing A, for sgemm 1024³ on Zen 5 (48 KiB L1, 1 MiB L2),
// measured side by side in one process: KC = 1024 (one zero-initializing call per tile)
// fell to half speed in some runs, and packing A cost more than it saved. With K ≤
// unsplitK(KC) the reduction is not split and the micro-kernel's zero-initializing form
// replaces the separate init pass.
var DefaultGemm = GemmConfig{KC: 256, MC: 8, Parallel: true, FewRowBlocks: 8, SymbolicMC: 4, WideB: 8 << 20}

// unsplitK is the longest static reduction the matmul strategy runs whole under a
// reduction block of kc: 1.5·kc, so that a reduction just above kc is not split into a
// full block and a short one (each tile then a zero pass, two calls and a round trip of
// its accumulators through memory) but makes one zero-initializing call per tile.
// ConvNeXt-tiny's K = 384 products under KC 256, measured as their generated units in a
// C harness (thread CPU time, min of 200, Emerald Rapids, three rounds alternating):
// 3136x384->96 1.43-1.45 -> 1.38 ms, 196x384->1536 with its GELU 1.59-1.60 -> 1.54.
func unsplitK(kc int64) int64 { return kc + kc/2 }

// ScheduleMatMulPacked schedules MatMulPacked (blocks "packed_a" if A is packed,
// "packed_b" and "matmul")
// in the GotoBLAS order: row block (parallel), reduction block ko, column panel jo, row
// tile, then the mr × nr × KC micro-kernel call. A block of A stays in L2 while every
// panel of B streams past it; each panel of B stays in L1 across the block's tiles.
func ScheduleMatMulPacked(s *schedule.Schedule, g intrin.Gemm, cfg GemmConfig) error {
	_, err := ScheduleMatMulPackedEpilogue(s, g, cfg, "")
	return err
}

// ScheduleMatMulPackedEpilogue is ScheduleMatMulPacked with an elementwise epilogue
// block (reading "matmul" at its own iterators) computed under the loop after which a
// part of the product is complete: a row block × column panel (a 48 × 16 tile on
// AVX2, still in L1) or, when reduction blocks run inside the row block, the row
// block. It reports whether the epilogue moved; when the schedule refuses (the product
// viewed through other extents), the epilogue keeps its own nest for the caller.
func ScheduleMatMulPackedEpilogue(s *schedule.Schedule, g intrin.Gemm, cfg GemmConfig, epilogue string) (bool, error) {
	mr, nr := g.MR, g.NR
	for _, name := range []string{"packed_a", "packed_b"} {
		if !s.HasBlock(name) {
			continue // read in place (A) or packed on the host (B)
		}
		pb, err := s.GetBlock(name)
		if err != nil {
			return false, err
		}
		pl, err := s.GetLoops(pb)
		if err != nil {
			return false, err
		}
		if cfg.Parallel {
			if err := s.Parallel(pl[0]); err != nil {
				return false, err
			}
		}
	}
	c, err := s.GetBlock("matmul")
	if err != nil {
		return false, err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return false, err
	}
	if len(l) != 3 {
		return false, fmt.Errorf("matmul strategy: block has %d loops, want 3", len(l))
	}
	rows, static := s.Extent(l[0])
	few := cfg.Parallel && static && (rows+mr*max(cfg.MC, 1)-1)/(mr*max(cfg.MC, 1)) <= cfg.FewRowBlocks
	if cfg.Parallel && !static && cfg.WideB > 0 {
		n, nStatic := s.Extent(l[1])
		k, kStatic := s.Extent(l[2])
		few = nStatic && kStatic && 4*n*k >= cfg.WideB
	}
	i, err := s.Split(l[0], []int64{-1, mr})
	if err != nil {
		return false, err
	}
	j, err := s.Split(l[1], []int64{-1, nr})
	if err != nil {
		return false, err
	}
	mc := max(cfg.MC, 1)
	if !static && cfg.SymbolicMC > 0 {
		mc = cfg.SymbolicMC
	}
	ib, err := s.Split(i[0], []int64{-1, mc})
	if err != nil {
		return false, err
	}
	// the loop order, outermost first; anchor: the loop after whose iteration a part of
	// the product is final
	var order []schedule.LoopRV
	var anchor schedule.LoopRV
	var ko schedule.LoopRV
	kExt, kStatic := s.Extent(l[2])
	split := !kStatic || kExt > unsplitK(cfg.KC)
	if split {
		k, err := s.Split(l[2], []int64{-1, cfg.KC})
		if err != nil {
			return false, err
		}
		ko = k[0]
		if few {
			order, anchor = []schedule.LoopRV{j[0], ib[0], k[0], ib[1], i[1], j[1], k[1]}, ib[0]
		} else {
			order, anchor = []schedule.LoopRV{ib[0], k[0], j[0], ib[1], i[1], j[1], k[1]}, ib[0]
		}
	} else if few {
		order, anchor = []schedule.LoopRV{j[0], ib[0], ib[1], i[1], j[1], l[2]}, ib[0]
	} else {
		order, anchor = []schedule.LoopRV{ib[0], j[0], ib[1], i[1], j[1], l[2]}, j[0]
	}
	if err := s.Reorder(order...); err != nil {
		return false, err
	}
	if split {
		if _, err := s.DecomposeReduction(c, ko); err != nil {
			return false, err
		}
	}
	moved := false
	if epilogue != "" {
		if moved, err = epilogueAt(s, epilogue, anchor); err != nil {
			return false, err
		}
	}
	// the whole reduction in one call zero-initializes the tile itself
	in := g.Init
	if split {
		in = g.Update
	}
	if err := s.Tensorize(i[1], in); err != nil {
		return false, err
	}
	switch {
	case !cfg.Parallel:
		return moved, nil
	case few:
		return moved, parallelPairs(s, j[0], ib[0])
	}
	return moved, s.Parallel(ib[0])
}

// epilogueAt moves block name under loop at and vectorizes its innermost loop; false
// when the schedule refuses the move.
func epilogueAt(s *schedule.Schedule, name string, at schedule.LoopRV) (bool, error) {
	e, err := s.GetBlock(name)
	if err != nil {
		return false, err
	}
	if err := s.ReverseComputeAt(e, at); err != nil {
		if errors.Is(err, schedule.ErrSchedule) {
			return false, nil
		}
		return false, err
	}
	el, err := s.GetLoops(e)
	if err != nil {
		return false, err
	}
	if err := s.Vectorize(el[len(el)-1]); err != nil && !errors.Is(err, schedule.ErrSchedule) {
		return false, err
	}
	return true, nil
}

// parallelPairs fuses the column panel and row block loops into one parallel loop.
func parallelPairs(s *schedule.Schedule, ib, j schedule.LoopRV) error {
	f, err := s.Fuse(ib, j)
	if err != nil {
		return err
	}
	return s.Parallel(f)
}
