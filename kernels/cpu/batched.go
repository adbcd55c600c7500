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

// buildMatMulBatched runs a MatMul whose operands are both computed at run time (an
// attention's Q·Kᵀ and P·V; batch axes broadcast) on the GEMM micro-kernel, reading B
// in place: the micro-kernel needs B's rows contiguous along j, not packed panels, and
// at attention's sizes (K = head size, B a few tens of KiB per batch element) B's
// panel stays in L1 across the row tiles. Constant 2-D weights take the packed
// strategy instead (tried first).
func buildMatMulBatched(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	return buildMatMulBatchedWith(reg, n, in, epi, t, DefaultGemm)
}

// buildMatMulBatchedWith is buildMatMulBatched with its batched product scheduled under cfg (a tuning choice).
func buildMatMulBatchedWith(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, cfg GemmConfig) (*kernels.Impl, error) {
	if len(in) < 2 || in[0].T == nil || in[1].T == nil {
		return nil, notApplicable("MatMul without operands")
	}
	a, b := in[0].T, in[1].T
	if a.DT != tensor.Float32 || b.DT != tensor.Float32 || len(a.Shape) < 2 || len(b.Shape) < 2 {
		return nil, notApplicable("float32 operands of rank ≥ 2")
	}
	g := intrin.GemmFor(t)
	if c, ok := b.Shape[len(b.Shape)-1].(*loopir.IntImm); ok {
		rows := int64(0)
		if r, ok := a.Shape[len(a.Shape)-2].(*loopir.IntImm); ok {
			rows = r.V
		}
		if g = intrin.GemmTile(t, c.V, rows); c.V < g.NR {
			return nil, notApplicable("%d columns, fewer than the micro-kernel's %d", c.V, g.NR)
		}
	}
	out, err := kernels.MatMulReduction(a, b)
	if err != nil {
		return nil, err
	}
	s, feeds, err := withEpilogues(reg, n, out, []*te.Tensor{a, b}, []kernels.Param{{Input: 0}, {Input: 1}}, epi)
	if err != nil {
		return nil, err
	}
	if err := ScheduleMatMulBatched(s, g, cfg); err != nil {
		return nil, err
	}
	last, err := inlineChain(s, "matmul")
	if err != nil {
		return nil, err
	}
	if last != "matmul" {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// ScheduleMatMulBatched schedules block "matmul" of kernels.MatMulReduction (loops:
// batch axes, i, j, k): row tiles of mr and column tiles of nr, the whole reduction
// in one zero-initializing micro-kernel call (or KC-long blocks updating a zeroed tile
// when a static K exceeds KC), and one parallel loop over (batch, row tile, column
// tile) — or (batch, column tile, row tile) where one batch element's B is larger than
// batchedPanelMajorBytes (panelMajor).
func ScheduleMatMulBatched(s *schedule.Schedule, g intrin.Gemm, cfg GemmConfig) error {
	c, err := s.GetBlock("matmul")
	if err != nil {
		return err
	}
	l, err := s.GetLoops(c)
	if err != nil {
		return err
	}
	if len(l) < 3 {
		return fmt.Errorf("batched matmul strategy: block has %d loops, want at least 3", len(l))
	}
	nb := len(l) - 3
	byPanel := panelMajor(s, l[nb+1], l[nb+2])
	i, err := s.Split(l[nb], []int64{-1, g.MR})
	if err != nil {
		return err
	}
	j, err := s.Split(l[nb+1], []int64{-1, g.NR})
	if err != nil {
		return err
	}
	outer := append(append([]schedule.LoopRV{}, l[:nb]...), i[0], j[0])
	if byPanel {
		outer = append(append([]schedule.LoopRV{}, l[:nb]...), j[0], i[0])
	}
	if kExt, ok := s.Extent(l[nb+2]); ok && kExt > cfg.KC {
		k, err := s.Split(l[nb+2], []int64{-1, cfg.KC})
		if err != nil {
			return err
		}
		if err := s.Reorder(append(append([]schedule.LoopRV{}, outer...), k[0], i[1], j[1], k[1])...); err != nil {
			return err
		}
		if _, err := s.DecomposeReduction(c, k[0]); err != nil {
			return err
		}
		if err := s.Tensorize(i[1], g.Update); err != nil {
			return err
		}
	} else {
		if err := s.Reorder(append(append([]schedule.LoopRV{}, outer...), i[1], j[1], l[nb+2])...); err != nil {
			return err
		}
		if err := s.Tensorize(i[1], g.Init); err != nil {
			return err
		}
	}
	if !cfg.Parallel {
		return nil
	}
	fused, err := s.Fuse(outer...)
	if err != nil {
		return err
	}
	return s.Parallel(fused)
}

// batchedPanelMajorBytes is the largest B of one batch element (K × N floats) that the
// batched product reads whole for each row tile (row tiles outer, column tiles inner:
// an attention's B of a few tens of KiB stays in L1 or L2 across them). Past it the
// column tiles go outer, so consecutive row tiles share one column panel of B (K × nr)
// while it is in L2, and B is read once instead of once per row tile. FCN-ResNet50's
// head (a 3×3 2048→512 convolution at 28×28 on Winograd: 16 products of 196×2048 by
// 2048×512, B 4 MiB each) read 2.1 GB of B per launch row-tile-major.
const batchedPanelMajorBytes = 1 << 20

// panelMajor reports whether the batched product with column loop j and reduction loop
// k, both static, has a B per batch element larger than batchedPanelMajorBytes.
func panelMajor(s *schedule.Schedule, j, k schedule.LoopRV) bool {
	n, ok := s.Extent(j)
	kk, ok2 := s.Extent(k)
	return ok && ok2 && 4*n*kk > batchedPanelMajorBytes
}
