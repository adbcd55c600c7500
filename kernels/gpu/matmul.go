package gpu

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// MatMulTile is the work of the tiled matrix product: a block computes a BM×BN tile of
// the output with TY×TX threads, each thread a (BM/TY)×(BN/TX) register tile of
// contiguous rows and columns, and walks K in steps of BK with the step's A tile
// (BM×BK) and B tile (BK×BN) in shared memory.
type MatMulTile struct{ BM, BN, BK, TY, TX int64 }

// Threads is the block's thread count.
func (m MatMulTile) Threads() int64 { return m.TY * m.TX }

// SharedBytes is the shared memory of the A and B tiles (float32).
func (m MatMulTile) SharedBytes() int64 { return 4 * m.BK * (m.BM + m.BN) }

func (m MatMulTile) String() string {
	return fmt.Sprintf("%dx%dx%d/%dx%d", m.BM, m.BN, m.BK, m.TY, m.TX)
}

// MatMulTiles are the tiles ChooseMatMulTile considers, largest first: 64×64 outputs
// from 16×16 threads with 4×4 register tiles (8 KiB of shared tiles), then smaller ones
// for small products and small targets.
var MatMulTiles = []MatMulTile{{64, 64, 16, 16, 16}, {32, 32, 16, 16, 16}, {16, 16, 16, 8, 8}, {8, 8, 8, 4, 4}}

// MinTiledRows is the fewest rows (static M) the tiled rule takes: a vector times a
// matrix (a batch-1 classifier, a decoder step) in a tile of 8 or more rows leaves most
// threads idle and stages the weights through shared memory for nothing; one thread per
// output (gpu-reduce) ran resnet18's 1×512·512×1000 Gemm 7× faster on PoCL.
const MinTiledRows = 2

// ChooseMatMulTile picks the first of MatMulTiles that the target's limits allow
// (threads per block, local memory per block), starting at 32×32 when the product's
// rows and columns are constants of at most 32 (one 64×64 tile would leave most of its
// threads idle). A target that allows none is an error.
func ChooseMatMulTile(t target.Target, m, n loopir.Expr) (MatMulTile, error) {
	if _, err := BlockSize(t); err != nil {
		return MatMulTile{}, err
	}
	small := func(e loopir.Expr) bool { c, ok := e.(*loopir.IntImm); return ok && c.V <= 32 }
	for _, tile := range MatMulTiles {
		if tile.BM > 32 && small(m) && small(n) {
			continue
		}
		if tile.Threads() <= int64(t.GPU.MaxWorkGroup) && tile.SharedBytes() <= t.GPU.LocalMemBytes {
			return tile, nil
		}
	}
	return MatMulTile{}, fmt.Errorf("no matmul tile fits %d threads and %d bytes of local memory per block", t.GPU.MaxWorkGroup, t.GPU.LocalMemBytes)
}

// matmulStrategy is gpu-matmul-tiled for MatMul and Gemm (float32, operands of rank 2 or
// more for MatMul, batch axes broadcasting; Gemm's transposes, alpha, beta and C), with
// elementwise epilogues computed from the register tile before it is written.
func matmulStrategy(reg *kernels.Registry) kernels.Strategy {
	build := func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		impl, err := buildMatMulTiled(reg, n, in, epi, t)
		if errors.Is(err, schedule.ErrSchedule) || errors.Is(err, kernels.ErrNoKernel) {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		return impl, err
	}
	return kernels.Strategy{Name: "gpu-matmul-tiled",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return build(n, in, nil, t)
		},
		Fused: build,
	}
}

func notApplicable(n *graph.Node, format string, args ...any) error {
	return fmt.Errorf("%v: %w: %s", n, kernels.ErrNotApplicable, fmt.Sprintf(format, args...))
}

// buildMatMulTiled builds n's product with the rule ScheduleMatMulTiled.
func buildMatMulTiled(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	return buildMatMul(reg, n, in, epi, t, func(s *schedule.Schedule, product string, rows, cols loopir.Expr) error {
		tile, err := ChooseMatMulTile(t, rows, cols)
		if err != nil {
			return notApplicable(n, "%v", err)
		}
		if err := ScheduleMatMulTiled(s, product, tile); err != nil {
			return fmt.Errorf("%v: schedule: %w", n, err)
		}
		return nil
	})
}

// matmulRule schedules the product block (named product) of a lowered matrix product of
// rows × cols outputs.
type matmulRule func(s *schedule.Schedule, product string, rows, cols loopir.Expr) error

// buildMatMul builds n's product as one reduction block, composes its stages and
// epilogues, lowers the kernel and schedules it with rule; a kernel whose launch the
// target refuses (launchable) is not applicable.
func buildMatMul(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, rule matmulRule) (*kernels.Impl, error) {
	if t.Kind != target.CUDA && t.Kind != target.OpenCL {
		return nil, notApplicable(n, "%v is not a GPU target", t.Kind)
	}
	if len(in) < 2 || in[0].T == nil || in[1].T == nil {
		return nil, notApplicable(n, "no operands")
	}
	a, b := in[0].T, in[1].T
	if a.DT != tensor.Float32 || b.DT != tensor.Float32 {
		return nil, notApplicable(n, "%v × %v operands (float32 only)", a.DT, b.DT)
	}
	var out *te.Tensor
	var err error
	product := "matmul"
	switch n.Op {
	case graph.OpMatMul:
		if len(a.Shape) < 2 || len(b.Shape) < 2 {
			return nil, notApplicable(n, "a rank-%d × rank-%d product (matrices or batches of them only)", len(a.Shape), len(b.Shape))
		}
		out, err = kernels.MatMulReduction(a, b)
	case graph.OpGemm:
		at, ok := n.Attrs.(*graph.GemmAttrs)
		if !ok {
			return nil, notApplicable(n, "no Gemm attributes")
		}
		var c *te.Tensor
		if len(in) > 2 {
			c = in[2].T
		}
		if c != nil && c.DT != tensor.Float32 {
			return nil, notApplicable(n, "C of %v", c.DT)
		}
		product = "gemm"
		out, err = kernels.GemmReduction(a, b, c, at.TransA != 0, at.TransB != 0, float64(at.Alpha), float64(at.Beta))
	default:
		return nil, notApplicable(n, "op %v", n.Op)
	}
	if err != nil {
		return nil, err
	}
	rows, cols := out.Shape[len(out.Shape)-2], out.Shape[len(out.Shape)-1]
	if m, ok := rows.(*loopir.IntImm); ok && m.V < MinTiledRows {
		return nil, notApplicable(n, "%d rows: a thin product wastes a tile's threads (gpu-reduce takes it)", m.V)
	}
	out, eparams, efeeds, err := kernels.ApplyEpilogues(reg, out, epi)
	if err != nil {
		return nil, err
	}
	params, feeds, err := kernels.KernelParams(n, []*te.Tensor{out}, in, eparams, efeeds)
	if err != nil {
		return nil, err
	}
	f, err := te.Lower(kernels.KernelName(n), params, []*te.Tensor{out})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	s := schedule.New(f)
	if err := rule(s, product, rows, cols); err != nil {
		return nil, err
	}
	if err := launchable(s.Func(), t); errors.Is(err, passes.ErrLaunch) {
		return nil, notApplicable(n, "%v", err)
	} else if err != nil {
		return nil, err
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}
