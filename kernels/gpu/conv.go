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

// Stage names of the implicit GEMM a convolution is built as (buildConvStages): the
// input gathered as im2col's K×P matrix per image, and its product with the weights.
const (
	convGather  = "conv_im2col"
	convProduct = "conv_gemm"
)

// ConvGEMMStrategy is gpu-conv-gemm for Conv: a 2-D float32 convolution of one group as
// an implicit GEMM on the tiled matrix product's schedule, with elementwise epilogues.
// It is not in Strategies: on an H200 (CUDA) it ran resnet18 at 3.32 ms and resnet50 at
// 5.18 ms against gpu-reduce's 1.60 and 3.55 ms, and on PoCL 2 to 2.5 times slower too
// (its im2col gather divides by constants per element, and the 512×7·7 layers fill 128
// blocks with K unsplit); a table puts it first with Strategies.First.
func ConvGEMMStrategy(reg *kernels.Registry) kernels.Strategy {
	build := func(n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
		impl, err := buildConvGEMM(reg, n, in, epi, t)
		if errors.Is(err, schedule.ErrSchedule) || errors.Is(err, kernels.ErrNoKernel) {
			return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
		}
		return impl, err
	}
	return kernels.Strategy{Name: "gpu-conv-gemm",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return build(n, in, nil, t)
		},
		Fused: build,
	}
}

// convShape is what the implicit GEMM needs of a convolution: batch n (maybe
// symbolic), channels c, input h×w, output channels m, window kh×kw, output oh×ow, and
// per spatial axis stride, dilation and padding before the first input element.
type convShape struct {
	n                          loopir.Expr
	c, h, w, m, kh, kw, oh, ow int64
	stride, dil, pad           [2]int64
}

// convShapeOf checks that n is a convolution the rule takes: 2-D, float32, group 1,
// static channels, spatial extents and weights (the batch may be symbolic).
func convShapeOf(n *graph.Node, in []kernels.Input) (convShape, error) {
	var cs convShape
	a, ok := n.Attrs.(*graph.ConvAttrs)
	if !ok || n.Op != graph.OpConv {
		return cs, fmt.Errorf("op %v", n.Op)
	}
	if len(in) < 2 || in[0].T == nil || in[1].T == nil {
		return cs, errors.New("no operands")
	}
	x, w := in[0].T, in[1].T
	if len(in) > 2 && in[2].T != nil && (in[2].T.DT != tensor.Float32 || len(in[2].T.Shape) != 1) {
		return cs, fmt.Errorf("bias %v%v", in[2].T.DT, in[2].T.Shape)
	}
	if x.DT != tensor.Float32 || w.DT != tensor.Float32 {
		return cs, fmt.Errorf("%v input with %v weights (float32 only)", x.DT, w.DT)
	}
	if len(x.Shape) != 4 || len(w.Shape) != 4 {
		return cs, fmt.Errorf("input of rank %d with weights of rank %d (2-D convolutions only)", len(x.Shape), len(w.Shape))
	}
	if a.Group != 1 {
		return cs, fmt.Errorf("group %d (one group only: gpu-reduce takes grouped and depthwise convolutions)", a.Group)
	}
	var xe []int64
	for d, e := range x.Shape[1:] {
		c, ok := e.(*loopir.IntImm)
		if !ok {
			return cs, fmt.Errorf("input extent %d is symbolic (%s): only the batch may be", d+1, loopir.ExprString(e))
		}
		xe = append(xe, c.V)
	}
	we, err := kernels.Extents(w)
	if err != nil {
		return cs, err
	}
	if len(a.KernelShape) != 0 && (len(a.KernelShape) != 2 || a.KernelShape[0] != we[2] || a.KernelShape[1] != we[3]) {
		return cs, fmt.Errorf("kernel_shape %v does not match weights %v", a.KernelShape, we)
	}
	if xe[0] != we[1] {
		return cs, fmt.Errorf("%d input channels with weights %v", xe[0], we)
	}
	if len(in) > 2 && in[2].T != nil && !kernels.ExtentsAgree(in[2].T.Shape[0], loopir.Int(we[0])) {
		return cs, fmt.Errorf("bias %v for %d output channels", in[2].T.Shape, we[0])
	}
	win, err := graph.ConvWindow(a, we[2:])
	if err != nil {
		return cs, err
	}
	geo, err := kernels.ResolveConv(xe[1:], win, 1)
	if err != nil {
		return cs, err
	}
	cs = convShape{n: x.Shape[0], c: xe[0], h: xe[1], w: xe[2], m: we[0], kh: we[2], kw: we[3], oh: geo.Out[0], ow: geo.Out[1]}
	for d := range 2 {
		cs.stride[d], cs.dil[d], cs.pad[d] = geo.Strides[d], geo.Dilations[d], geo.PadBegin[d]
	}
	if cs.oh <= 0 || cs.ow <= 0 || cs.m <= 0 || cs.c <= 0 {
		return cs, fmt.Errorf("an empty convolution (output %d×%d×%d)", cs.m, cs.oh, cs.ow)
	}
	return cs, nil
}

// k and p are the GEMM's reduction and column extents: C·KH·KW and OH·OW.
func (cs convShape) k() int64 { return cs.c * cs.kh * cs.kw }
func (cs convShape) p() int64 { return cs.oh * cs.ow }

// pointwise: a 1×1 window at stride 1 without padding, whose im2col is the input.
func (cs convShape) pointwise() bool {
	return cs.kh == 1 && cs.kw == 1 && cs.stride == [2]int64{1, 1} && cs.pad == [2]int64{} && cs.oh == cs.h && cs.ow == cs.w
}

// buildConvStages defines the convolution of x [N, C, H, W] by w (bias b [M] or nil)
// as an implicit GEMM over a [N, M, OH·OW] view of the output, the weights read as the
// M×K matrix wm ([M, C, KH, KW] in its own order: K = C·KH·KW, k = (c·KH + kh)·KW + kw):
//
//	conv_im2col[n, k, p] = x[n, c, ih, iw] when (ih, iw) is inside the input, else 0,
//	                       ih = (p / OW)·sh + kh·dh − ph (iw alike), read at indices
//	                       clamped into the input
//	conv_gemm[n, m, p]   = Σ_k wm[m, k] · conv_im2col[n, k, p]
//
// and the bias as a stage after it. A pointwise convolution (1×1, stride 1, no
// padding) reads x as its [N, C, H·W] view xp itself: no gather.
func buildConvStages(x, xp, wm, b *te.Tensor, cs convShape) *te.Tensor {
	K, P := loopir.Int(cs.k()), loopir.Int(cs.p())
	col := xp
	if col == nil {
		col = gather(x, cs)
	}
	r := te.RAxis("rk", K)
	out := te.Compute(convProduct, []loopir.Expr{cs.n, loopir.Int(cs.m), P}, func(ix []loopir.Expr) loopir.Expr {
		return te.Sum(te.Mul(wm.At(ix[1], r.Var), col.At(ix[0], r.Var, ix[2])), r)
	})
	if b == nil {
		return out
	}
	return te.Compute(convProduct+"_bias", out.Shape, func(ix []loopir.Expr) loopir.Expr {
		return te.Add(out.At(ix...), b.At(ix[1]))
	})
}

// gather is conv_im2col (see buildConvStages).
func gather(x *te.Tensor, cs convShape) *te.Tensor {
	K, P := loopir.Int(cs.k()), loopir.Int(cs.p())
	taps := cs.kh * cs.kw
	i := loopir.Int
	return te.Compute(convGather, []loopir.Expr{cs.n, K, P}, func(ix []loopir.Expr) loopir.Expr {
		k, p := ix[1], ix[2]
		c := te.Div(k, i(taps))
		kh, kw := loopir.Bin(loopir.Mod, te.Div(k, i(cs.kw)), i(cs.kh)), loopir.Bin(loopir.Mod, k, i(cs.kw))
		oh, ow := te.Div(p, i(cs.ow)), loopir.Bin(loopir.Mod, p, i(cs.ow))
		var cond loopir.Expr
		// the input index of output o and tap j on spatial axis d, guarded and clamped
		// on the sides it can leave the input
		at := func(o, j loopir.Expr, d int) loopir.Expr {
			out, taps, in := [2]int64{cs.oh, cs.ow}[d], [2]int64{cs.kh, cs.kw}[d], [2]int64{cs.h, cs.w}[d]
			v := te.Sub(te.Add(te.Mul(o, i(cs.stride[d])), te.Mul(j, i(cs.dil[d]))), i(cs.pad[d]))
			if cs.pad[d] > 0 {
				cond = and(cond, loopir.Bin(loopir.GE, v, i(0)))
				v = te.MaxOf(v, i(0))
			}
			if (out-1)*cs.stride[d]+(taps-1)*cs.dil[d]-cs.pad[d] >= in {
				cond = and(cond, loopir.Bin(loopir.LT, v, i(in)))
				v = te.MinOf(v, i(in-1))
			}
			return v
		}
		ih, iw := at(oh, kh, 0), at(ow, kw, 1)
		v := x.At(ix[0], c, ih, iw)
		if cond == nil {
			return v
		}
		return te.Select(cond, v, loopir.Float(0, tensor.Float32))
	})
}

func and(a, b loopir.Expr) loopir.Expr {
	if a == nil {
		return b
	}
	return loopir.Bin(loopir.And, a, b)
}

// buildConvGEMM builds n (and its epilogues) as the implicit GEMM of buildConvStages,
// lowers it and schedules it with ScheduleConvGEMM.
func buildConvGEMM(reg *kernels.Registry, n *graph.Node, in []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
	if t.Kind != target.CUDA && t.Kind != target.OpenCL {
		return nil, notApplicable(n, "%v is not a GPU target", t.Kind)
	}
	cs, err := convShapeOf(n, in)
	if err != nil {
		return nil, notApplicable(n, "%v", err)
	}
	tile, err := ChooseConvTile(t, cs.m, cs.p(), cs.n)
	if err != nil {
		return nil, notApplicable(n, "%v", err)
	}
	var b *te.Tensor
	if len(in) > 2 {
		b = in[2].T
	}
	// views over the same elements: the weights as an M×K matrix, a pointwise
	// convolution's input as [N, C, H·W]
	ops := append([]kernels.Input{}, in...)
	ops[1].T = te.Placeholder(in[1].T.Name+"_mk", tensor.Float32, loopir.Int(cs.m), loopir.Int(cs.k()))
	var xp *te.Tensor
	if cs.pointwise() {
		xp = te.Placeholder(in[0].T.Name+"_pixels", tensor.Float32, cs.n, loopir.Int(cs.c), loopir.Int(cs.p()))
		ops[0].T = xp
	}
	out := buildConvStages(in[0].T, xp, ops[1].T, b, cs)
	out, eparams, efeeds, err := convEpilogues(reg, out, epi, cs)
	if err != nil {
		return nil, err
	}
	params, feeds, err := kernels.KernelParams(n, []*te.Tensor{out}, ops, eparams, efeeds)
	if err != nil {
		return nil, err
	}
	f, err := te.Lower(kernels.KernelName(n), params, []*te.Tensor{out})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	s := schedule.New(f)
	if err := ScheduleConvGEMM(s, tile); err != nil {
		return nil, fmt.Errorf("%v: schedule: %w", n, err)
	}
	if err := launchable(s.Func(), t); errors.Is(err, passes.ErrLaunch) {
		return nil, notApplicable(n, "%v", err)
	} else if err != nil {
		return nil, err
	}
	return &kernels.Impl{Func: s.Func(), Trace: s.Trace(), Params: feeds}, nil
}

// ScheduleConvGEMM is ScheduleMatMulTiled over the implicit GEMM of a convolution
// (rows: output channels, columns: output pixels of one image, the batch on
// blockIdx.z), whose gather stage (conv_im2col) is not inlined into the product but
// into its shared tile's cooperative copy: each k step's copy gathers its im2col tile
// from the input (padding taps as zeros, never read); the weight tile is copied from
// the weights' M×K view.
func ScheduleConvGEMM(s *schedule.Schedule, tile MatMulTile) error {
	return scheduleTiled(s, convProduct, tile, map[string]bool{convGather: true})
}

// convEpilogues composes the epilogues onto the GEMM's [N, M, OH·OW] output, each an
// elementwise or broadcasting op: an operand that is not a stage of the kernel (a
// residual, a per-channel scale) is read through a view of the same [N, M, OH·OW]
// shape (its own axes broadcast to the convolution's output, then the pixels
// flattened), a scalar as it is. It returns the last stage with the placeholders the
// epilogues read and where each comes from, as kernels.ApplyEpilogues does.
func convEpilogues(reg *kernels.Registry, out *te.Tensor, epi []kernels.Epilogue, cs convShape) (*te.Tensor, []*te.Tensor, []kernels.Param, error) {
	stages := []*te.Tensor{out}
	var params []*te.Tensor
	var feeds []kernels.Param
	full := []loopir.Expr{cs.n, loopir.Int(cs.m), loopir.Int(cs.oh), loopir.Int(cs.ow)}
	for k, e := range epi {
		if len(e.From) != len(e.In) {
			return nil, nil, nil, fmt.Errorf("BUG: epilogue %v has %d sources for %d inputs", e.Node, len(e.From), len(e.In))
		}
		if e.Node.Op.Info().Pattern > graph.Broadcast {
			return nil, nil, nil, kernels.Unsupported("epilogue %v is not elementwise", e.Node)
		}
		in := append([]kernels.Input{}, e.In...)
		for i, f := range e.From {
			switch {
			case f > k:
				return nil, nil, nil, fmt.Errorf("BUG: epilogue %v reads stage %d before it is computed", e.Node, f)
			case f >= 0:
				in[i] = kernels.Input{T: stages[f]}
			case e.In[i].T != nil && len(e.In[i].T.Shape) > 0:
				v, err := pixelView(e.In[i].T, full)
				if err != nil {
					return nil, nil, nil, kernels.Unsupported("epilogue %v: %v", e.Node, err)
				}
				in[i] = kernels.Input{T: v}
				params = append(params, e.In[i].T)
				feeds = append(feeds, kernels.Param{Node: k + 1, Input: i})
			case e.In[i].T != nil:
				params = append(params, e.In[i].T)
				feeds = append(feeds, kernels.Param{Node: k + 1, Input: i})
			}
		}
		outs, err := reg.Build(e.Node, in)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(outs) != 1 || !sameShape(outs[0].Shape, out.Shape) {
			return nil, nil, nil, kernels.Unsupported("epilogue %v does not keep the convolution's shape", e.Node)
		}
		stages = append(stages, outs[0])
	}
	return stages[len(stages)-1], params, feeds, nil
}

// pixelView is t, which broadcasts to full ([N, M, OH, OW]), seen as [N, M, OH·OW].
func pixelView(t *te.Tensor, full []loopir.Expr) (*te.Tensor, error) {
	r := len(t.Shape)
	if r > len(full) {
		return nil, fmt.Errorf("operand %s of rank %d", t.Name, r)
	}
	for d, e := range t.Shape {
		f := full[len(full)-r+d]
		if c, ok := e.(*loopir.IntImm); !(ok && c.V == 1) && !kernels.ExtentsAgree(e, f) {
			return nil, fmt.Errorf("operand %s%v does not broadcast to the output", t.Name, t.Shape)
		}
	}
	ow := full[3]
	shape := []loopir.Expr{full[0], full[1], loopir.Int(full[2].(*loopir.IntImm).V * ow.(*loopir.IntImm).V)}
	return te.Compute(t.Name+"_pixels", shape, func(ix []loopir.Expr) loopir.Expr {
		at := []loopir.Expr{ix[0], ix[1], te.Div(ix[2], ow), loopir.Bin(loopir.Mod, ix[2], ow)}[len(full)-r:]
		idx := make([]loopir.Expr, r)
		for d, e := range t.Shape {
			idx[d] = at[d]
			if c, ok := e.(*loopir.IntImm); ok && c.V == 1 {
				idx[d] = loopir.Int(0)
			}
		}
		return t.At(idx...)
	}), nil
}

func sameShape(a, b []loopir.Expr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !kernels.ExtentsAgree(a[i], b[i]) {
			return false
		}
	}
	return true
}

// ChooseConvTile picks the implicit GEMM's tile for m output channels and p output
// pixels per image (n images, maybe symbolic: one counted): among MatMulTiles of at
// least MinConvThreads threads that the target's limits allow, the largest that still
// gives ComputeUnits blocks or more, else the smallest of them (a late layer's
// 512 channels × 7·7 pixels fill 8 blocks of 64×64 but 128 of 16×16; a split of K
// across blocks is not done).
func ChooseConvTile(t target.Target, m, p int64, n loopir.Expr) (MatMulTile, error) {
	if _, err := BlockSize(t); err != nil {
		return MatMulTile{}, err
	}
	images := int64(1)
	if c, ok := n.(*loopir.IntImm); ok && c.V > 1 {
		images = c.V
	}
	var fit []MatMulTile
	for _, tile := range MatMulTiles {
		if tile.Threads() >= MinConvThreads && tile.Threads() <= int64(t.GPU.MaxWorkGroup) && tile.SharedBytes() <= t.GPU.LocalMemBytes {
			fit = append(fit, tile)
		}
	}
	if len(fit) == 0 {
		return MatMulTile{}, fmt.Errorf("no convolution tile fits %d threads and %d bytes of local memory per block", t.GPU.MaxWorkGroup, t.GPU.LocalMemBytes)
	}
	for _, tile := range fit {
		if images*ceilDiv(m, tile.BM)*ceilDiv(p, tile.BN) >= int64(t.GPU.ComputeUnits) {
			return tile, nil
		}
	}
	return fit[len(fit)-1], nil
}

// MinConvThreads is the fewest threads of a convolution's block: smaller blocks (the
// 8×8 tile's 16 threads) leave a compute unit mostly idle.
const MinConvThreads = 64

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
