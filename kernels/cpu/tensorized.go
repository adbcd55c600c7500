package cpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// tensorizedStrategies: convolution and matrix products on the GEMM micro-kernels, with
// constant weights repacked on the host at compile time; products of two computed
// operands read B in place.
func tensorizedStrategies(reg *kernels.Registry) map[graph.Op][]kernels.Strategy {
	conv := withRegistry(reg, buildConvBlocked)
	wino := withRegistry(reg, buildConvWinograd)
	pw := withRegistry(reg, buildConvPointwise)
	mm := withRegistry(reg, buildMatMulPacked)
	bmm := withRegistry(reg, buildMatMulBatched)
	return map[graph.Op][]kernels.Strategy{
		graph.OpConv: {{Name: "conv2d-pointwise-tensorized", Build: unfused(pw), Fused: pw},
			{Name: "conv2d-winograd-tensorized", Build: unfused(wino), Fused: wino},
			{Name: "conv2d-nchwc-tensorized", Build: unfused(conv), Fused: conv}},
		graph.OpMatMul: {{Name: "matmul-packed-tensorized", Build: unfused(mm), Fused: mm},
			{Name: "matmul-batched-tensorized", Build: unfused(bmm), Fused: bmm}},
		graph.OpGemm: {{Name: "gemm-packed-tensorized", Build: unfused(mm), Fused: mm}},
	}
}

// withRegistry binds the registry the epilogues' definitions come from.
func withRegistry(reg *kernels.Registry, b func(*kernels.Registry, *graph.Node, []kernels.Input, []kernels.Epilogue, target.Target) (*kernels.Impl, error)) fusedBuild {
	return func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		return b(reg, n, in, epi, t)
	}
}

// fusedBuild builds a node with elementwise epilogues.
type fusedBuild func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error)

func unfused(b fusedBuild) func(*graph.Node, []kernels.Input, target.Target) (*kernels.Impl, error) {
	return func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
		return b(n, in, nil, t)
	}
}

// inlineChain inlines every block but the anchor stages (names in fixed) and the last
// into its consumer, leaving one epilogue nest; it returns the last block's name.
func inlineChain(s *schedule.Schedule, fixed ...string) (string, error) {
	names := s.BlockNames()
	if len(names) == 0 { // the anchor alone, tensorized whole
		return fixed[len(fixed)-1], nil
	}
	last := names[len(names)-1]
	for _, name := range names {
		if name == last || slices.Contains(fixed, name) || slices.Contains(fixed, strings.TrimSuffix(name, "_init")) {
			continue
		}
		b, err := s.GetBlock(name)
		if err != nil {
			return "", err
		}
		if err := s.ComputeInline(b); errors.Is(err, schedule.ErrSchedule) {
			// a stage that cannot be inlined (its copies would be too large) leaves a
			// second nest: the group is lowered member by member instead
			return "", notApplicable("epilogue: %v", err)
		} else if err != nil {
			return "", err
		}
	}
	if trimmed := strings.TrimSuffix(last, "_init"); slices.Contains(fixed, trimmed) {
		return trimmed, nil // no stage after the anchor stages
	}
	return last, nil
}

// withEpilogues composes the epilogues onto out and lowers the kernel: the node's params
// and their feeds, then those the epilogues read; the schedule starts from the result.
func withEpilogues(reg *kernels.Registry, n *graph.Node, out *te.Tensor, params []*te.Tensor, feeds []kernels.Param, epi []kernels.Epilogue) (*schedule.Schedule, []kernels.Param, error) {
	out, eparams, efeeds, err := kernels.ApplyEpilogues(reg, out, epi)
	if err != nil {
		return nil, nil, err
	}
	f, err := te.Lower(kernels.KernelName(n), append(params, eparams...), []*te.Tensor{out})
	if err != nil {
		return nil, nil, err
	}
	return schedule.New(f), append(feeds, efeeds...), nil
}

// convBias appends a convolution's optional bias (input 2) to its params and feeds.
func convBias(in []kernels.Input, params []*te.Tensor, feeds []kernels.Param) (*te.Tensor, []*te.Tensor, []kernels.Param) {
	if len(in) > 2 && in[2].T != nil {
		return in[2].T, append(params, in[2].T), append(feeds, kernels.Param{Input: 2})
	}
	return nil, params, feeds
}

func notApplicable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", kernels.ErrNotApplicable, fmt.Sprintf(format, args...))
}

// inputBlock picks the input channel block of the blocked convolution: all channels
// up to 64 (the merged kernel-column·channel reduction stays long), else the largest
// power of two up to 64 that divides them.
func inputBlock(c int64) int64 {
	if c <= 64 {
		return c
	}
	for cb := int64(64); cb > 1; cb /= 2 {
		if c%cb == 0 {
			return cb
		}
	}
	return 1
}

// convBlocked returns the attributes of the blocked convolution for n, or an error
// wrapping ErrNotApplicable: float32 2-D convolutions of static shapes with one group,
// constant weights, explicit or VALID padding.
func convBlocked(n *graph.Node, g intrin.Gemm) (ConvBlockedAttrs, error) {
	var attrs ConvBlockedAttrs
	a, _ := n.Attrs.(*graph.ConvAttrs)
	if a == nil || len(n.Inputs) < 2 || n.Inputs[1] == nil {
		return attrs, notApplicable("convolution without weights")
	}
	x, w := n.Inputs[0].Type, n.Inputs[1]
	if w.Const == nil || x.DType != tensor.Float32 || w.Const.DType != tensor.Float32 || len(x.Shape) != 4 || len(w.Const.Shape) != 4 {
		return attrs, notApplicable("float32 2-D convolution with constant weights")
	}
	if !x.IsStatic() || !n.Outputs[0].Type.IsStatic() {
		return attrs, notApplicable("symbolic extents %v", x.Shape)
	}
	win, err := staticPadWindow(a, w.Const.Shape)
	if err != nil || a.Group != 1 {
		return attrs, notApplicable("group %d, auto_pad %s", a.Group, a.AutoPad)
	}
	attrs = ConvBlockedAttrs{XBlock: x.Block}
	copy(attrs.Strides[:], win.Strides)
	copy(attrs.Dilations[:], win.Dilations)
	attrs.Pads[0], attrs.Pads[2], _ = win.StaticPads(0)
	attrs.Pads[1], attrs.Pads[3], _ = win.StaticPads(1)
	c, ok := x.Shape[1].Value()
	if !ok {
		return attrs, notApplicable("symbolic channels")
	}
	attrs.CB, attrs.MB = inputBlock(c), g.NR
	if x.Block != 0 {
		// the padded copy is then a copy of whole blocks (contiguous, vectorized)
		attrs.CB = x.Block
	}
	return attrs, nil
}

// convGemm is the micro-kernel of the blocked convolution n on t: its tiles span output
// channels (the columns) along an output row (the rows). The strategy and the layout
// policy's anchor both take it, so that a blocked output's block is the tile width.
func convGemm(t target.Target, n *graph.Node) intrin.Gemm {
	var cols, width int64
	if len(n.Inputs) > 1 && n.Inputs[1] != nil && n.Inputs[1].Const != nil && len(n.Inputs[1].Const.Shape) > 0 {
		cols = int64(n.Inputs[1].Const.Shape[0])
	}
	if ot := n.Outputs[0].Type; len(ot.Shape) == 4 {
		if w, ok := ot.Shape[3].Value(); ok {
			width = w
		}
	}
	return intrin.GemmTile(t, cols, width)
}

// staticPadWindow is the window of a 2-D convolution with a weight of shape weight when
// its padding does not depend on the input extent (explicit or VALID): the strategies
// that pad a copy of the input by fixed amounts take only those.
func staticPadWindow(a *graph.ConvAttrs, weight tensor.Shape) (graph.Window, error) {
	w, err := graph.ConvWindow(a, []int64{int64(weight[2]), int64(weight[3])})
	if err != nil {
		return graph.Window{}, err
	}
	if w.Mode.Same() {
		return graph.Window{}, fmt.Errorf("auto_pad %s", w.Mode)
	}
	return w, nil
}

// buildConvBlocked lowers a convolution through ConvNCHWBlocked, reading its
// input as it is stored and leaving its output blocked when the graph says so.
func buildConvBlocked(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	cfg := DefaultConv
	cfg.SplitK = !blocksByDefault(n, convGemm(t, n))
	cfg.RowsInner = cfg.SplitK && rowsInnerByDefault(n, convGemm(t, n))
	return buildConvBlockedWith(reg, n, in, epi, t, cfg)
}

// blocksMaxInputBytes is the largest input for which the default blocked convolution
// runs each tile's whole reduction in one call (the Blocks form). That call reads one
// tile's pixels in every input channel block in turn, a stride of a channel plane
// apart, where a call per block streams each plane from start to end: from L2 the
// Blocks form is faster, from farther the streaming is. Measured at one thread on
// resnet50 (Zen, 1 MiB L2) against a call per block, in the model: 8–17% faster on
// 1×1 convolutions over inputs of 800 KiB (layer1's 64-channel ones at 56×56), 4–13%
// slower over inputs of 1.6 and 3.2 MiB (layer2's and layer1's 256-channel ones).
const blocksMaxInputBytes = 1 << 20

// stemChannels: a convolution over at most this many input channels (a network's stem
// on an RGB image) takes the Blocks form whatever its window. A call per kernel row
// reduces over a few values only (9 for a 3×3 window over 3 channels) and loads and
// stores its tile's accumulators around each; one call keeps them in registers across
// the rows. Measured per kernel at one thread on an Emerald Rapids Xeon (min of 3 to 6
// rounds, alternating binaries): squeezenet1_1's 3×3 s2 3→64 stem 0.75× the time,
// RegNetY-400MF's and MobileNetV3's 0.72× and 0.79×, mobilenet_v2's 0.93×,
// ConvNeXt-tiny's 4×4 s4 patchify 0.92×, ViT-B/16's 16×16 s16 one 0.91×,
// EfficientNet-B0's 3×3 and resnet18's 7×7 stems unchanged (1.00×, 1.02×).
const stemChannels = 4

// blocksByDefault reports whether the default schedule of the blocked convolution n
// takes the Blocks form: over an input of at most blocksMaxInputBytes, any window over
// at most stemChannels input channels, or a 1×1 window whose output rows span at least
// two row tiles of g. Measured per kernel at one
// thread (warm caches, best of three against a call per block): resnet50's 1×1
// convolutions at 14×14 and 56×56 ran 9% and 8–17% faster; at 7×7 (one tile a row)
// one ran 4% faster and another 14% slower, and the 3×3 ones from 5% slower to 4%
// faster, so those keep a call per block (the tuner's split_k knob may choose either).
func blocksByDefault(n *graph.Node, g intrin.Gemm) bool {
	if len(n.Inputs) < 2 || n.Inputs[0] == nil || n.Inputs[1] == nil || n.Inputs[1].Const == nil {
		return false // not a blocked convolution: convBlocked refuses it
	}
	w := n.Inputs[1].Const
	if len(w.Shape) != 4 {
		return false
	}
	ext, ok := n.Inputs[0].Type.ConstShape()
	if !ok || 4*ext.NumElements() > blocksMaxInputBytes {
		return false
	}
	if w.Shape[1] <= stemChannels {
		return true
	}
	if w.Shape[2] != 1 || w.Shape[3] != 1 {
		return false
	}
	ot := n.Outputs[0].Type
	if len(ot.Shape) != 4 {
		return false
	}
	ow, ok := ot.Shape[3].Value()
	return ok && ow >= 2*g.MR
}

// ConvConfig is the search space of the blocked (NCHWc) convolution's schedule.
type ConvConfig struct {
	Parallel bool // run the output rows (batch, channel block, row) on the device's threads
	// TilesOuter puts the row's tiles outside the input channel blocks and kernel rows:
	// each tile's accumulators then take the whole reduction in turn (its output stays
	// in L1) while the weights of one channel block and kernel row are read once per
	// tile instead of once per row. The default keeps the tiles innermost (the weights
	// in L1 across the row: ~10% faster on resnet18 at 2 threads). It applies with
	// SplitK only.
	TilesOuter bool
	// SplitK calls the micro-kernel once per input channel block and kernel row, its
	// tile of C loaded and stored by each call after a zeroing pass, instead of once per
	// tile for the whole reduction (the Blocks form: the accumulators in registers
	// throughout).
	SplitK bool
	// RowsInner (with SplitK) runs every output row of a channel block under each input
	// channel block and kernel row: the weights' panel of one call is read from memory
	// once and serves the whole map while it is in cache, and the block's map is the
	// local buffer. The parallel loop is then the channel blocks.
	RowsInner bool
}

// DefaultConv is the blocked convolution's default schedule.
var DefaultConv = ConvConfig{Parallel: true}

// convKnobs declare ConvConfig as knobs: parallel, split_k, tiles_outer and rows_inner
// (0 or 1).
func convKnobs(d ConvConfig) []kernels.Knob {
	b := map[bool]int64{false: 0, true: 1}
	return []kernels.Knob{
		{Name: "parallel", Values: []int64{0, 1}, Default: b[d.Parallel]},
		{Name: "split_k", Values: []int64{0, 1}, Default: b[d.SplitK]},
		{Name: "tiles_outer", Values: []int64{0, 1}, Default: b[d.TilesOuter]},
		{Name: "rows_inner", Values: []int64{0, 1}, Default: b[d.RowsInner]},
	}
}

// buildConvBlockedWith is buildConvBlocked under cfg.
func buildConvBlockedWith(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, cfg ConvConfig) (*kernels.Impl, error) {
	g := convGemm(t, n)
	attrs, err := convBlocked(n, g)
	if err != nil {
		return nil, err
	}
	x, w := in[0], in[1]
	m := int64(w.Const.Shape[0])
	if b := n.Outputs[0].Type.Block; b != 0 {
		switch {
		case b == g.NR:
		case g.NR%b == 0 && m%b == 0:
			attrs.OutBlock = b // repacked from the tiles' blocks
		default:
			return nil, fmt.Errorf("BUG: %v: output stored in blocks of %d, the micro-kernel computes %d", n, b, g.NR)
		}
		attrs.BlockedOut = true
	}
	packed := []int64{(m + g.NR - 1) / g.NR, int64(w.Const.Shape[1]) / attrs.CB, int64(w.Const.Shape[2]), int64(w.Const.Shape[3]) * attrs.CB, g.NR}
	wp := te.Placeholder("w", tensor.Float32, kernels.Static(packed...)...)
	layout := fmt.Sprintf("OIHW→[O/%d,I/%d,H,W·%d,%d]", g.NR, attrs.CB, attrs.CB, g.NR)
	xt := x.T
	if attrs.XBlock != 0 && attrs.inPlace(int64(w.Const.Shape[3])) {
		// read in place: the blocks' storage viewed as rows of W·cb
		ext, err := kernels.Extents(x.T)
		if err != nil || len(ext) != 5 {
			return nil, notApplicable("blocked data %v", x.T.Shape)
		}
		xt = te.Placeholder("x", tensor.Float32, kernels.Static(ext[0], ext[1], ext[2], ext[3]*ext[4])...)
	}
	bias, params, feeds := convBias(in, []*te.Tensor{xt, wp}, []kernels.Param{{Input: 0}, {Input: 1, Layout: layout, Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) {
		return PackConvWeights(v, attrs.CB, attrs.MB)
	}}})
	_, static := n.Outputs[0].Type.ConstShape()
	attrs.SplitOut = !attrs.BlockedOut && static && SplitBlock(m, g.NR) != 0
	out, err := ConvNCHWBlocked(xt, wp, bias, m, attrs)
	if err != nil {
		return nil, err
	}
	s, feeds, last, rowEpilogue, err := lowerConvResult(reg, n, out, params, feeds, epi, attrs, m, g.NR)
	if err != nil {
		return nil, err
	}
	if err := scheduleConvBlocked(s, g, cfg, rowEpilogue, attrs.CB, attrs.SplitOut && channelsInner(n)); err != nil {
		return nil, err
	}
	if last != "" && rowEpilogue == "" {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// lowerConvResult composes the epilogues onto a blocked convolution's result out (of
// m channels computed in blocks of mb; ConvNCHWBlocked's stages) and lowers the kernel.
// It returns the schedule, the params' feeds, the name of the elementwise nest after
// the "conv" stage ("" for none) and, when that nest can run under the output row loop
// (a blocked result in the conv stage's blocks, or a split one), its name again as the
// row epilogue.
func lowerConvResult(reg *kernels.Registry, n *graph.Node, out *te.Tensor, params []*te.Tensor, feeds []kernels.Param, epi []kernels.Epilogue, attrs ConvBlockedAttrs, m, mb int64) (*schedule.Schedule, []kernels.Param, string, string, error) {
	var s *schedule.Schedule
	var err error
	if attrs.SplitOut {
		// the epilogues run on the result's [N, M/sb, sb, OH, OW] view of NCHW
		oext, _ := n.Outputs[0].Type.ConstShape()
		ext := []int64{int64(oext[0]), int64(oext[1]), int64(oext[2]), int64(oext[3])}
		last, eparams, efeeds, err := viewEpilogues(reg, out, epi, func(v *te.Tensor) (*te.Tensor, bool, error) {
			return splitView(v, ext, SplitBlock(m, mb))
		})
		if err != nil {
			return nil, nil, "", "", err
		}
		f, err := te.Lower(kernels.KernelName(n), append(params, eparams...), []*te.Tensor{last})
		if err != nil {
			return nil, nil, "", "", err
		}
		s, feeds = schedule.New(f), append(feeds, efeeds...)
	} else if s, feeds, err = withEpilogues(reg, n, out, params, feeds, epi); err != nil {
		return nil, nil, "", "", err
	}
	// unpacking, bias and epilogues become one elementwise nest: under the output rows
	// when the result stays blocked or is split in blocks, a nest of its own otherwise;
	// a split result's unpacking stays a stage of its own, which the epilogues after it
	// read along the columns (scheduleStagedUnpack)
	fixed := []string{"pad", "conv"}
	if attrs.SplitOut {
		fixed = append(fixed, "unpack")
	}
	last, err := inlineChain(s, fixed...)
	if err != nil {
		return nil, nil, "", "", err
	}
	if last == "conv" {
		last = ""
	}
	rowEpilogue := last
	if !attrs.BlockedOut && !attrs.SplitOut || attrs.OutBlock != 0 {
		rowEpilogue = "" // the repacking reads a block of rows the conv stage's row loop does not
	}
	return s, feeds, last, rowEpilogue, nil
}

// buildMatMulPacked applies to MatMul and Gemm with a constant 2-D float32 B (weights)
// and an A of rank ≥ 2 whose leading axes flatten into rows (static or symbolic: the
// row tiles then end in a partial tile at run time, which the micro-kernel takes); Gemm's
// alpha is folded into the packed B, beta·C is added in an epilogue.
func buildMatMulPacked(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	return buildMatMulPackedWith(reg, n, in, epi, t, DefaultGemm)
}

// buildMatMulPackedWith is buildMatMulPacked scheduled under cfg (a tuning choice).
func buildMatMulPackedWith(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target, cfg GemmConfig) (*kernels.Impl, error) {
	a, b := in[0], in[1]
	if a.T == nil || b.Const == nil || a.T.DT != tensor.Float32 || b.Const.DType != tensor.Float32 || len(b.Const.Shape) != 2 || len(a.T.Shape) < 2 {
		return nil, notApplicable("float32 A of rank ≥ 2 times a constant 2-D float32 B")
	}
	transB, alpha, beta := false, float32(1), float32(1)
	var c *te.Tensor
	if n.Op == graph.OpGemm {
		ga := n.Attrs.(*graph.GemmAttrs)
		if ga.TransA != 0 {
			return nil, notApplicable("Gemm with transA")
		}
		transB, alpha, beta = ga.TransB != 0, ga.Alpha, ga.Beta
		if len(in) > 2 && in[2].T != nil && beta != 0 {
			c = in[2].T
			if len(c.Shape) > 2 {
				return nil, notApplicable("Gemm C of rank %d", len(c.Shape))
			}
		}
	}
	k, cols := int64(b.Const.Shape[0]), int64(b.Const.Shape[1])
	if transB {
		k, cols = cols, k
	}
	lead, ak := a.T.Shape[:len(a.T.Shape)-1], a.T.Shape[len(a.T.Shape)-1]
	if c, ok := ak.(*loopir.IntImm); !ok || c.V != k {
		return nil, notApplicable("A %v times B with %d rows", a.T.Shape, k)
	}
	rows := int64(0)
	if r, ok := rowsOf(lead).(*loopir.IntImm); ok {
		rows = r.V
	}
	g := intrin.GemmTileMatMul(t, cols, rows)
	a2 := te.Placeholder("a", tensor.Float32, rowsOf(lead), loopir.Int(k))
	bp := te.Placeholder("bp", tensor.Float32, kernels.Static((cols+g.NR-1)/g.NR, k, g.NR)...)
	params := []*te.Tensor{a2, bp}
	feeds := []kernels.Param{{Input: 0}, {Input: 1, Layout: fmt.Sprintf("B%s→[N/%d,K,%d]·%g", map[bool]string{true: "ᵀ"}[transB], g.NR, g.NR, alpha),
		Prepack: func(v *tensor.Tensor) (*tensor.Tensor, error) { return PackMatMulB(v, transB, g.NR, alpha) }}}
	var bias *te.Tensor
	if c != nil {
		bias = c
		if beta != 1 {
			bias = te.Compute("beta_c", c.Shape, func(i []loopir.Expr) loopir.Expr {
				return te.Mul(c.At(i...), loopir.Float(float64(beta), tensor.Float32))
			})
		}
		params, feeds = append(params, c), append(feeds, kernels.Param{Input: 2})
	}
	out := MatMulPrepacked(a2, bp, bias, cols)
	flat := false
	if len(epi) > 0 {
		if ot := n.Outputs[0].Type; ot.Kind != graph.KindTensor || ot.UnknownRank || ot.Block != 0 || len(ot.Shape) != len(a.T.Shape) {
			return nil, notApplicable("epilogue on a matmul output of type %v", n.Outputs[0].Type)
		}
		oshape := append(append([]loopir.Expr{}, lead...), loopir.Int(cols))
		var eparams []*te.Tensor
		var efeeds []kernels.Param
		var err error
		if _, static := rowsOf(lead).(*loopir.IntImm); static {
			// the epilogues run on the product's own [rows, cols] (the kernel's output
			// is that view of the node's), so that they can run on each tile
			var last *te.Tensor
			last, eparams, efeeds, err = flatEpilogues(reg, out, oshape, epi)
			if err == nil {
				out, flat = last, true
			} else if !errors.Is(err, kernels.ErrNotApplicable) {
				return nil, err
			}
		}
		if !flat {
			// the epilogues see the product under the node's own shape: view the 2-D
			// rows back as the output's extents
			prod := out
			view := te.Compute("rows", oshape, func(i []loopir.Expr) loopir.Expr {
				row := loopir.Expr(loopir.Int(0))
				for k := 0; k < len(i)-1; k++ {
					row = loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, row, oshape[k]), i[k])
				}
				return prod.At(row, i[len(i)-1])
			})
			out, eparams, efeeds, err = kernels.ApplyEpilogues(reg, view, epi)
		}
		if err != nil {
			return nil, err
		}
		params, feeds = append(params, eparams...), append(feeds, efeeds...)
	}
	f, err := te.Lower(kernels.KernelName(n), params, []*te.Tensor{out})
	if err != nil {
		return nil, err
	}
	s := schedule.New(f)
	last, err := inlineChain(s, "matmul")
	if err != nil {
		return nil, err
	}
	epilogue := ""
	if flat && last != "matmul" {
		epilogue = last
	}
	moved, err := ScheduleMatMulPackedEpilogue(s, g, cfg, epilogue)
	if err != nil {
		return nil, err
	}
	if last != "matmul" && !moved {
		if err := scheduleNest(s, last); err != nil {
			return nil, err
		}
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// flatEpilogues applies the epilogues to the product over its flattened rows, prod
// [rows, cols], for a node whose output has the static shape oshape: a run-time input of
// rank ≥ 2 is read through a [rows, cols] view of itself under the broadcast (an axis of
// extent 1 read at 0), inputs of rank 0 or 1 broadcast along the columns as they are.
// It returns the last stage and, as ApplyEpilogues, the placeholders it reads and their
// sources.
func flatEpilogues(reg *kernels.Registry, prod *te.Tensor, oshape []loopir.Expr, epi []kernels.Epilogue) (*te.Tensor, []*te.Tensor, []kernels.Param, error) {
	ext := make([]int64, len(oshape))
	for k, e := range oshape {
		ext[k] = e.(*loopir.IntImm).V
	}
	return viewEpilogues(reg, prod, epi, func(x *te.Tensor) (*te.Tensor, bool, error) {
		if len(x.Shape) < 2 {
			return nil, false, nil
		}
		v, err := rowsView(x, ext)
		return v, err == nil, err
	})
}

// viewEpilogues applies the epilogues to base, a kernel's result under other extents
// than the node's output, reading each run-time input through view (ok false: as it
// is). It returns the last stage and, as ApplyEpilogues, the placeholders it reads and
// their sources.
func viewEpilogues(reg *kernels.Registry, base *te.Tensor, epi []kernels.Epilogue, view func(*te.Tensor) (*te.Tensor, bool, error)) (*te.Tensor, []*te.Tensor, []kernels.Param, error) {
	flat := make([]kernels.Epilogue, len(epi))
	for k, e := range epi {
		flat[k] = e
		flat[k].In = append([]kernels.Input{}, e.In...)
		for i, x := range e.In {
			if e.From[i] >= 0 || x.T == nil {
				continue
			}
			v, ok, err := view(x.T)
			if err != nil {
				return nil, nil, nil, err
			}
			if ok {
				flat[k].In[i] = kernels.Input{T: v}
			}
		}
	}
	last, _, _, err := kernels.ApplyEpilogues(reg, base, flat)
	if err != nil {
		return nil, nil, nil, err
	}
	read := map[*te.Tensor]bool{}
	for _, t := range te.Inputs(last) {
		read[t] = true
	}
	var params []*te.Tensor
	var feeds []kernels.Param
	for k, e := range epi {
		for i, x := range e.In {
			if e.From[i] < 0 && x.T != nil && read[x.T] {
				params = append(params, x.T)
				feeds = append(feeds, kernels.Param{Node: k + 1, Input: i})
				delete(read, x.T)
			}
		}
	}
	return last, params, feeds, nil
}

// rowsView reads x (broadcast against an output of static extents ext) as [rows, cols]
// with rows the product of ext's leading extents.
func rowsView(x *te.Tensor, ext []int64) (*te.Tensor, error) {
	off := len(ext) - len(x.Shape)
	if off < 0 {
		return nil, notApplicable("epilogue input of rank %d on an output of rank %d", len(x.Shape), len(ext))
	}
	xe := make([]int64, len(x.Shape))
	for k, e := range x.Shape {
		c, ok := e.(*loopir.IntImm)
		if !ok || (c.V != 1 && c.V != ext[off+k]) {
			return nil, notApplicable("epilogue input %v on an output of extents %v", x.Shape, ext)
		}
		xe[k] = c.V
	}
	rows := int64(1)
	for _, e := range ext[:len(ext)-1] {
		rows *= e
	}
	return te.Compute("rows_"+x.Name, []loopir.Expr{loopir.Int(rows), loopir.Int(ext[len(ext)-1])}, func(i []loopir.Expr) loopir.Expr {
		idx := make([]loopir.Expr, len(x.Shape))
		stride := int64(1) // of output axis k within a row index
		for k := len(ext) - 2; k >= 0; k-- {
			if xk := k - off; xk >= 0 {
				idx[xk] = loopir.Int(0)
				if xe[xk] != 1 {
					idx[xk] = loopir.Bin(loopir.Mod, loopir.Bin(loopir.Div, i[0], loopir.Int(stride)), loopir.Int(ext[k]))
				}
			}
			stride *= ext[k]
		}
		idx[len(idx)-1] = loopir.Int(0)
		if xe[len(xe)-1] != 1 {
			idx[len(idx)-1] = i[1]
		}
		return x.At(idx...)
	}), nil
}

// rowsOf is the product of A's leading extents: a constant when they all are, else an
// expression over the dims.
func rowsOf(lead []loopir.Expr) loopir.Expr {
	rows, static := int64(1), true
	for _, e := range lead {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			static = false
			break
		}
		rows *= c.V
	}
	if static {
		return loopir.Int(rows)
	}
	out := lead[0]
	for _, e := range lead[1:] {
		out = loopir.Bin(loopir.Mul, out, e)
	}
	return out
}

// broadcastExtents returns the static extents of v, an epilogue input broadcast against
// an output of extents ext, and the output axis its first axis aligns with; an error
// wrapping ErrNotApplicable when v does not broadcast so.
func broadcastExtents(v *te.Tensor, ext []int64) (off int, ve []int64, err error) {
	off = len(ext) - len(v.Shape)
	if off < 0 {
		return 0, nil, notApplicable("epilogue input of rank %d on an output of rank %d", len(v.Shape), len(ext))
	}
	ve = make([]int64, len(v.Shape))
	for k, e := range v.Shape {
		c, ok := e.(*loopir.IntImm)
		if !ok || (c.V != 1 && c.V != ext[off+k]) {
			return 0, nil, notApplicable("epilogue input %v on an output of extents %v", v.Shape, ext)
		}
		ve[k] = c.V
	}
	return off, ve, nil
}

// splitView reads v, an epilogue input broadcast against an NCHW output of extents ext,
// as [N, M/mb, mb, OH, OW] (the blocked convolution's split result, mb its SplitBlock); ok is false where v
// needs no view (a scalar).
func splitView(v *te.Tensor, ext []int64, mb int64) (*te.Tensor, bool, error) {
	if len(v.Shape) == 0 {
		return nil, false, nil
	}
	off, ve, err := broadcastExtents(v, ext)
	if err != nil {
		return nil, false, err
	}
	return te.Compute("split_"+v.Name, kernels.Static(ext[0], ext[1]/mb, mb, ext[2], ext[3]), func(i []loopir.Expr) loopir.Expr {
		full := []loopir.Expr{i[0], add(mul(i[1], i64(mb)), i[2]), i[3], i[4]}
		idx := make([]loopir.Expr, len(v.Shape))
		for k := range idx {
			idx[k] = full[off+k]
			if ve[k] == 1 {
				idx[k] = loopir.Int(0)
			}
		}
		return v.At(idx...)
	}), true, nil
}

// rowsInnerMaxBytes is the largest channel block's map (output rows × columns × block
// floats) that the default SplitK schedule keeps whole in a local buffer (RowsInner):
// 7×7 maps in blocks of 64 (12.25 KiB). Measured on an AVX-512 Xeon (Granite
// Rapids class, 2 MiB L2), one thread: resnet50's 3×3 512→512 layer at 7×7, whose
// 9.4 MB of weights come from memory at every inference, in a C harness (thread CPU
// time, medians, caches flushed through 1 GiB) 2.2 ms with RowsInner and the panel
// prefetch (intrin's Update form) against 2.6 with neither, and with RowsInner alone
// 1.56 against 1.80 ms warm; whole models, p50 of
// alternating runs: resnet50 0.93× at one thread and 0.89× at two, resnet18 0.89×,
// EfficientNet-B0 0.95×, GoogLeNet, MobileNetV2 and SqueezeNet within noise.
const rowsInnerMaxBytes = 16 << 10

// rowsInnerMinBlocks: the fewest (batch, output channel block) units, the parallel loop
// of the RowsInner form, for which the default takes it: fewer would leave a thread
// idle for a large share of the kernel (EfficientNet's 1152→192 layer at 7×7 has 3).
const rowsInnerMinBlocks = 8

// rowsInnerWeightBytes and rowsInnerLargeMapBytes: a channel block whose weights
// (input channels × kernel window × block floats) reach rowsInnerWeightBytes takes
// RowsInner over maps up to rowsInnerLargeMapBytes too. Row by row, such a block's
// weights no longer stay in L2 from one output row to the next and stream from memory
// once per row: FCN-ResNet50's dilated 3×3 512→512 layers at 28×28 (1.2 MB a block, a
// 200 KiB map) stream about 260 MB of weights per launch that way (8 blocks × 28 rows ×
// 1.2 MB, counted). Measured at two threads on an AVX-512 Xeon (2 MiB L2), per kernel
// in the whole model: those layers 16.1 → 14.1 and 15.2 → 14.0 ms, and its 2048→512
// head on the direct strategy 57.7 → 48.6 ms.
const (
	rowsInnerWeightBytes   = 1 << 20
	rowsInnerLargeMapBytes = 256 << 10
)

// rowsInnerByDefault reports whether the default SplitK schedule of the blocked
// convolution n runs every output row under each weight panel (RowsInner): when one
// channel block's whole map fits rowsInnerMaxBytes (or rowsInnerLargeMapBytes, where
// the block's weights reach rowsInnerWeightBytes) and there are at least
// rowsInnerMinBlocks channel blocks to share among the threads.
func rowsInnerByDefault(n *graph.Node, g intrin.Gemm) bool {
	if len(n.Inputs) < 2 || n.Inputs[1] == nil || n.Inputs[1].Const == nil || len(n.Inputs[1].Const.Shape) != 4 {
		return false
	}
	ext, ok := n.Outputs[0].Type.ConstShape()
	if !ok || len(ext) < 4 {
		return false
	}
	ws := n.Inputs[1].Const.Shape
	m := int64(ws[0])
	blocks := int64(ext[0]) * ((m + g.NR - 1) / g.NR)
	mapBytes := int64(ext[2]) * int64(ext[3]) * g.NR * 4
	limit := int64(rowsInnerMaxBytes)
	if int64(ws[1])*int64(ws[2])*int64(ws[3])*g.NR*4 >= rowsInnerWeightBytes {
		limit = rowsInnerLargeMapBytes
	}
	return mapBytes <= limit && blocks >= rowsInnerMinBlocks
}
