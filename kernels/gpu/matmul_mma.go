package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
)

// WarpMMA is a warp-cooperative tensor-core intrinsic for the matrix product, as a
// target's strategies pass it in (package intrin declares them; this package knows no
// instruction set). Intrin's description is one thread's step: loops k < BK, i < RM,
// j < RN (all Partial) of C[i, j] += A[i, k]·B[k, j]; its implementation needs the lane
// layout ScheduleMatMulMMA gives (a warp is threadIdx.x, lane = g·ColGroups + t, lane
// (g, t) owning the RM rows from g·RM and the RN columns from t·RN of the warp's tile)
// and every lane of a warp reaching the call together.
type WarpMMA struct {
	Intrin               *loopir.TensorIntrin
	RM, RN, BK           int64
	RowGroups, ColGroups int64 // lanes of a warp: RowGroups × ColGroups = 32
	// Supports reports whether a target has the instruction; Needs says what it needs,
	// for the refusal ("CUDA sm_80 or later").
	Supports func(target.Target) bool
	Needs    string
}

// MMATile is the block of the tensor-core rule: WY warps stacked along the rows, each a
// (RowGroups·RM) × (ColGroups·RN) tile of the output (the three thread axes are the
// lane's column group, its row group and the warp, so a block has one warp column).
type MMATile struct{ WY int64 }

// MMATiles are the warp counts the tensor-core rule considers, largest first (with a
// 4 × 8 thread tile: 128 × 32 outputs from 4 warps, 64 × 32 from 2, then 32 × 32 from
// one for products of constant rows ≤ 32).
var MMATiles = []MMATile{{4}, {2}, {1}}

// MatMulMMAStrategy is gpu-matmul-mma, the tiled rule with its inner product on the
// tensor cores through mma: MatMul and Gemm as gpu-matmul-tiled takes them, on targets
// mma.Supports. What it cannot take (another target, a product the tiled rule refuses,
// a thread tile the intrinsic does not match) is kernels.ErrNotApplicable, so the
// float32 rules after it build the node exactly.
func MatMulMMAStrategy(reg *kernels.Registry, mma WarpMMA) kernels.Strategy {
	if mma.RowGroups*mma.ColGroups != 32 || mma.Intrin == nil || mma.Supports == nil {
		panic(fmt.Sprintf("BUG: MatMulMMAStrategy: intrinsic %+v", mma))
	}
	build := func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		if n.Op != graph.OpMatMul && n.Op != graph.OpGemm {
			return nil, notApplicable(n, "op %v (matrix products only)", n.Op)
		}
		if !mma.Supports(t) {
			return nil, notApplicable(n, "%s needs %s, the target is %v %s", mma.Intrin.Name, mma.Needs, t.Kind, t.Arch)
		}
		impl, err := buildMatMul(reg, n, in, epi, t, func(s *schedule.Schedule, product string, rows, _ loopir.Expr) error {
			tile, err := chooseMMATile(t, mma, rows)
			if err != nil {
				return notApplicable(n, "%v", err)
			}
			if err := ScheduleMatMulMMA(s, product, mma, tile); err != nil {
				return fmt.Errorf("%v: schedule: %w", n, err)
			}
			return nil
		})
		if errors.Is(err, schedule.ErrSchedule) || errors.Is(err, kernels.ErrNoKernel) || errors.Is(err, ErrNotMatMul) {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		return impl, err
	}
	return kernels.Strategy{Name: "gpu-matmul-mma",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return build(n, in, nil, t)
		},
		Fused: build,
	}
}

// chooseMMATile picks the first of MMATiles within the target's threads and shared
// memory whose rows do not exceed a constant row count by a warp or more.
func chooseMMATile(t target.Target, mma WarpMMA, m loopir.Expr) (MMATile, error) {
	for _, tile := range MMATiles {
		wm := mma.RowGroups * mma.RM
		bm, bn := tile.WY*wm, mma.ColGroups*mma.RN
		if c, ok := m.(*loopir.IntImm); ok && tile.WY > 1 && c.V <= bm-wm {
			continue
		}
		if 32*tile.WY <= int64(t.GPU.MaxWorkGroup) && 4*mma.BK*(bm+bn) <= t.GPU.LocalMemBytes {
			return tile, nil
		}
	}
	return MMATile{}, fmt.Errorf("no tensor-core tile fits %d threads and %d bytes of local memory per block", t.GPU.MaxWorkGroup, t.GPU.LocalMemBytes)
}

// ScheduleMatMulMMA is the tensor-core form of ScheduleMatMulTiled for a product block
// named product: the same block tile, k steps through shared memory, register tile per
// thread, epilogue and tails, with the threads laid out as warps and the thread's step
// (k within the step, register rows and columns) tensorized onto mma.Intrin:
//
//   - rows split into (blocks, WY warps, RowGroups, RM), columns into (blocks,
//     ColGroups, RN), k into steps of BK; the batch axes fused;
//   - nest: batch (blockIdx.z), row blocks (blockIdx.y), column blocks (blockIdx.x),
//     the warp (threadIdx.z), the lane's row group (threadIdx.y) and column group
//     (threadIdx.x), so that the block is (ColGroups, RowGroups, WY) threads and a
//     warp's 32 lanes are g·ColGroups + t; k steps, then the thread's step, which
//     tensorize replaces with the intrinsic's call (the row and column tails become its
//     per-lane extents, K's tail its k extent);
//   - accumulator init, output stage and shared copies as in ScheduleMatMulTiled, the
//     shared tiles' rows padded (mmaSharedPad) so that the fragment loads do not
//     conflict in the memory banks.
//
// A call left under a condition (a lane could skip it while the others of its warp
// wait in mma.sync) is refused with ErrNotMatMul.
func ScheduleMatMulMMA(s *schedule.Schedule, product string, mma WarpMMA, tile MMATile) error {
	if tile.WY < 1 {
		return fmt.Errorf("BUG: ScheduleMatMulMMA: tile %+v", tile)
	}
	c, err := s.GetBlock(product)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotMatMul, err)
	}
	loops, err := productLoops(s, c, product)
	if err != nil {
		return err
	}
	nb := len(loops) - 3
	var out schedule.BlockRV
	if last := lastStage(s, product); last != "" {
		out, err = inlineStages(s, product, last, nil)
	} else {
		out, err = s.CacheWrite(c, 0, loopir.ScopeLocal)
	}
	if err != nil {
		return err
	}
	i, err := s.Split(loops[nb], []int64{-1, tile.WY, mma.RowGroups, mma.RM})
	if err != nil {
		return err
	}
	j, err := s.Split(loops[nb+1], []int64{-1, mma.ColGroups, mma.RN})
	if err != nil {
		return err
	}
	k, err := s.Split(loops[nb+2], []int64{-1, mma.BK})
	if err != nil {
		return err
	}
	var order []schedule.LoopRV
	bind := map[schedule.LoopRV]loopir.ThreadAxis{i[0]: loopir.BlockIdxY, j[0]: loopir.BlockIdxX,
		i[1]: loopir.ThreadIdxZ, i[2]: loopir.ThreadIdxY, j[1]: loopir.ThreadIdxX}
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
	order = append(order, i[0], j[0], i[1], i[2], j[1], k[0], k[1], i[3], j[2])
	if err := s.Reorder(order...); err != nil {
		return err
	}
	for _, l := range []schedule.LoopRV{i[3], j[2]} { // the init's and the output's register loops
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
	for read, pad := range mmaSharedPad { // A, then B
		cp, err := s.CacheRead(c, read, loopir.ScopeShared)
		if err != nil {
			return err
		}
		if err := s.ComputeAt(cp, k[0]); err != nil {
			return err
		}
		if err := s.StorageAlign(cp, 0, 0, 32, pad); err != nil {
			return err
		}
	}
	if err := s.Tensorize(k[1], mma.Intrin); err != nil {
		return err
	}
	if callUnderCondition(s.Func().Body, mma.Intrin, false) {
		return fmt.Errorf("%w: the call of %s is under a condition, which a lane of a warp could skip", ErrNotMatMul, mma.Intrin.Name)
	}
	return nil
}

// mmaSharedPad is the row stride of the shared A and B tiles modulo 32 banks
// (storage_align): a warp's fragment loads read A at rows g·RM + r and k = t (a stride
// of 17 puts the 32 lanes in 32 banks; the tile's own 16 would put the eight row groups
// in one) and B at k = t and columns c(g) (a stride of 34 spreads the four k rows over
// the banks two apart).
var mmaSharedPad = [2]int64{17, 2}

// productLoops checks that product's block is a matrix product (batch loops, rows,
// columns, then the one reduction loop) and returns its loops.
func productLoops(s *schedule.Schedule, c schedule.BlockRV, product string) ([]schedule.LoopRV, error) {
	loops, err := s.GetLoops(c)
	if err != nil {
		return nil, err
	}
	if len(loops) < 3 {
		return nil, fmt.Errorf("%w: block %s has %d loops", ErrNotMatMul, product, len(loops))
	}
	for i, l := range loops {
		red, err := s.DrivesReduction(l)
		if err != nil {
			return nil, err
		}
		if red != (i == len(loops)-1) {
			return nil, fmt.Errorf("%w: block %s's loop %d of %d reduces: %v", ErrNotMatMul, product, i+1, len(loops), red)
		}
	}
	return loops, nil
}

// callUnderCondition reports whether a call of in lies under an IfThenElse (under is
// whether st itself does).
func callUnderCondition(st loopir.Stmt, in *loopir.TensorIntrin, under bool) bool {
	switch x := st.(type) {
	case *loopir.IntrinCall:
		return under && x.Intrin == in
	case *loopir.IfThenElse:
		return callUnderCondition(x.Then, in, true) || (x.Else != nil && callUnderCondition(x.Else, in, true))
	case *loopir.For:
		return callUnderCondition(x.Body, in, under)
	case loopir.Seq:
		for _, y := range x {
			if callUnderCondition(y, in, under) {
				return true
			}
		}
	case *loopir.Allocate:
		return callUnderCondition(x.Body, in, under)
	case *loopir.Block:
		under = under || x.Predicate != nil
		if x.Init != nil && callUnderCondition(x.Init, in, under) {
			return true
		}
		return callUnderCondition(x.Body, in, under)
	}
	return false
}
