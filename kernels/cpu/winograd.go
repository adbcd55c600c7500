package cpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// winogradMinTiles is the least number of 2×2 output tiles per image row and column
// for which the Winograd strategy applies: below it the padding of the last tile and
// the transforms cost more than the multiplications saved.
const winogradMinTiles = 7

// winogradMinChannels is the least number of input channels (the products' reduction)
// for which the Winograd strategy applies: with fewer, the transforms weigh as much as
// the multiplications saved. Measured per kernel on 2 threads against the direct
// strategy (three alternations): resnet18's 128- and 256-channel 3×3 convolutions ran
// 2–36% faster (28×28: 14–36%), its 64-channel ones at 56×56 within noise (−26% to
// +4%), squeezenet1_1's 64-channel ones at 13×13 15% slower.
const winogradMinChannels = 128

// winogradMinOutChannels is the least number of output channels for which the
// Winograd strategy applies: the input transform's cost and the transformed tiles it
// writes (16 planes of the input's channels) grow with the input channels and are
// repaid by the products saved per output channel. DenseNet-121's 128→32 layers took
// 0.69× (56×56), 0.81× (28×28) and 0.78× (14×14) the time on the direct strategy
// (kernel CPU time, one thread, min of 4 rounds alternating, Emerald Rapids).
const winogradMinOutChannels = 64

// winogradMaxTransformBytes bounds the transformed input (16 planes of the input's
// channels by the 2×2 output tiles of every image): beyond it the planes stream through
// memory between the transform and the products. r3d_18's 3×3×3 convolutions as 2-D
// ones over stacked frames: 192 channels by 8 frames of 56×56 (77 MB transformed) took
// 44.8 ms per launch on Winograd and 19.9 ms direct (two threads, AVX-512), while 384
// channels by 4 frames of 28×28 (19 MB) ran at 91% of the FMA peak's equivalent on it.
const winogradMaxTransformBytes = 32 << 20

// winogradPlaneAlign: the planes of the transformed tiles and of the products start
// 16 floats (one cache line) past a multiple of 4 KiB from one another.
const winogradPlaneAlign = 1024

// buildConvWinograd lowers a 3×3, stride-1 convolution through kernels.ConvWinograd:
// the padded input, its transform, 16 products on the GEMM micro-kernel (the weights
// transformed on the host at compile time) and the output transform with bias and
// epilogues, reading and writing the layouts the graph says.
func buildConvWinograd(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	return buildConvWinogradWith(reg, n, in, epi, t, DefaultGemm)
}

// buildConvWinogradWith is buildConvWinograd with its tile products scheduled under
// cfg (a tuning choice).
func buildConvWinogradWith(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, cfg GemmConfig) (*kernels.Impl, error) {
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if a == nil || len(n.Inputs) < 2 || n.Inputs[1] == nil || len(in) < 2 || in[1].Const == nil {
		return nil, notApplicable("convolution without constant weights")
	}
	x, w := n.Inputs[0].Type, in[1].Const
	if x.DType != tensor.Float32 || w.DType != tensor.Float32 || len(x.Shape) != 4 || len(w.Shape) != 4 || w.Shape[2] != 3 || w.Shape[3] != 3 {
		return nil, notApplicable("float32 2-D 3×3 convolution")
	}
	win, err := staticPadWindow(a, w.Shape)
	if err != nil || a.Group != 1 {
		return nil, notApplicable("group %d, auto_pad %s", a.Group, a.AutoPad)
	}
	for _, v := range append(append([]int64{}, win.Strides...), win.Dilations...) {
		if v != 1 {
			return nil, notApplicable("strides %v, dilations %v", a.Strides, a.Dilations)
		}
	}
	// the products' columns are the output channels: a tile that divides them, since a
	// partial column tile would take the micro-kernel's scalar path
	g := intrin.GemmTile(t, int64(w.Shape[0]), 0)
	if int64(w.Shape[0])%g.NR != 0 {
		return nil, notApplicable("%d output channels, not whole micro-kernel tiles of %d", w.Shape[0], g.NR)
	}
	ot := n.Outputs[0].Type
	for _, d := range ot.Shape {
		if _, ok := d.Value(); !ok {
			return nil, notApplicable("symbolic output %v", ot)
		}
	}
	oh, _ := ot.Shape[2].Value()
	ow, _ := ot.Shape[3].Value()
	if (oh+1)/2 < winogradMinTiles || (ow+1)/2 < winogradMinTiles {
		return nil, notApplicable("output %dx%d: fewer than %d tiles a side", oh, ow, winogradMinTiles)
	}
	attrs := kernels.WinogradAttrs{XBlock: x.Block, OutBlock: ot.Block, NR: g.NR}
	attrs.Pads[0], attrs.Pads[2], _ = win.StaticPads(0)
	attrs.Pads[1], attrs.Pads[3], _ = win.StaticPads(1)
	k, c := int64(w.Shape[0]), int64(w.Shape[1])
	if c < winogradMinChannels {
		return nil, notApplicable("%d input channels, fewer than %d", c, winogradMinChannels)
	}
	if nb, _ := ot.Shape[0].Value(); 16*4*c*nb*((oh+1)/2)*((ow+1)/2) > winogradMaxTransformBytes {
		return nil, notApplicable("%d images of %d channels: the transformed input exceeds %d MiB", nb, c, winogradMaxTransformBytes>>20)
	}
	if k < winogradMinOutChannels {
		return nil, notApplicable("%d output channels, fewer than %d", k, winogradMinOutChannels)
	}
	if ot.Block != 0 && k%ot.Block != 0 {
		return nil, notApplicable("%d output channels in blocks of %d", k, ot.Block)
	}
	u := te.Placeholder("u", tensor.Float32, kernels.Static(16, k/g.NR, c, g.NR)...)
	prepack := func(w *tensor.Tensor) (*tensor.Tensor, error) {
		u, err := kernels.TransformWinogradWeights(w)
		if err != nil {
			return nil, err
		}
		return kernels.PackWinogradPanels(u, g.NR)
	}
	layout := fmt.Sprintf("OIHW→Winograd F(2×2,3×3) [16,O/%d,I,%d]", g.NR, g.NR)
	bias, params, feeds := convBias(in, []*te.Tensor{in[0].T, u}, []kernels.Param{{Input: 0}, {Input: 1, Layout: layout, Prepack: prepack}})
	out, err := kernels.ConvWinograd(in[0].T, u, bias, attrs)
	if err != nil {
		return nil, err
	}
	s, feeds, err := withEpilogues(reg, n, out, params, feeds, epi)
	if err != nil {
		return nil, err
	}
	last, err := inlineChain(s, "pad", "wino_v", "matmul")
	if err != nil {
		return nil, err
	}
	if err := scheduleWinograd(s, g, attrs, last, cfg); err != nil {
		return nil, err
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// scheduleWinograd: the padded copy parallel over pixels and vectorized along the
// input's channel blocks; the input transform parallel over tiles with the 16
// transformed elements an unrolled loop inside the channel loop (unrolled, their
// selects fold to constants and the 16 reads of a 4×4 patch are shared); the products
// on the micro-kernel; the output transform (last, with the epilogues) over 2×2 output
// tiles whose rows and columns are unrolled (their selects fold), vectorized along the
// output's channel block.
func scheduleWinograd(s *schedule.Schedule, g intrin.Gemm, a kernels.WinogradAttrs, last string, cfg GemmConfig) error {
	pad, err := s.GetBlock("pad")
	if err != nil {
		return err
	}
	pl, err := s.GetLoops(pad) // n, hp, wp, c
	if err != nil {
		return err
	}
	pixels, err := s.Fuse(pl[0], pl[1], pl[2])
	if err != nil {
		return err
	}
	if err := s.Parallel(pixels); err != nil {
		return err
	}
	inner := pl[3]
	if a.XBlock > 1 {
		cs, err := s.Split(pl[3], []int64{-1, a.XBlock})
		if err != nil {
			return err
		}
		inner = cs[1]
	}
	if err := s.Vectorize(inner); err != nil {
		return err
	}
	v, err := s.GetBlock("wino_v")
	if err != nil {
		return err
	}
	vl, err := s.GetLoops(v) // t, p, c
	if err != nil {
		return err
	}
	if err := s.Reorder(vl[1], vl[2], vl[0]); err != nil {
		return err
	}
	if err := s.Unroll(vl[0]); err != nil {
		return err
	}
	if err := s.Parallel(vl[1]); err != nil {
		return err
	}
	// the 16 planes of V and of M are written (V) and read (M, by the output transform)
	// as 16 streams at once: planes whose stride is a multiple of 4 KiB map to the same
	// cache sets (56×56×64: 196 KiB apart, and that stage ran 10× slower than at 28×28)
	mm, err := s.GetBlock("matmul")
	if err != nil {
		return err
	}
	for _, b := range []schedule.BlockRV{v, mm} {
		if err := s.StorageAlign(b, 0, 0, winogradPlaneAlign, 16); err != nil {
			return err
		}
	}
	if err := ScheduleMatMulBatched(s, g, cfg); err != nil {
		return err
	}
	y, err := s.GetBlock(last)
	if err != nil {
		return err
	}
	yl, err := s.GetLoops(y) // n, k or kb, oh, ow (, kk)
	if err != nil {
		return err
	}
	if len(yl) < 4 {
		return fmt.Errorf("BUG: Winograd output block %s has %d loops", last, len(yl))
	}
	rows, err := s.Split(yl[2], []int64{-1, 2})
	if err != nil {
		return err
	}
	cols, err := s.Split(yl[3], []int64{-1, 2})
	if err != nil {
		return err
	}
	order := []schedule.LoopRV{yl[0], yl[1], rows[0], cols[0], rows[1], cols[1]}
	if err := s.Reorder(append(order, yl[4:]...)...); err != nil {
		return err
	}
	for _, l := range []schedule.LoopRV{rows[1], cols[1]} {
		if err := s.Unroll(l); err != nil {
			return err
		}
	}
	if len(yl) == 5 {
		if err := s.Vectorize(yl[4]); err != nil {
			return err
		}
	}
	outer, err := s.Fuse(yl[0], yl[1], rows[0])
	if err != nil {
		return err
	}
	return s.Parallel(outer)
}
