package gpu

import (
	"fmt"
	"math"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TexPool2D is max or average pooling over an input in NCHW4c ([N, C/4, H, W, 4], C a
// multiple of 4) into an NCHW4c output ([N, C/4, OH, OW, 4]), or a plain global one
// ([N, C, OH, OW]) when PlainOut; global pooling is a window of the whole input. The
// output extents are the graph's (ceil_mode is its inference's). Pads are top, left,
// bottom, right.
type TexPool2D struct {
	Name            string
	N, C, H, W      int64
	KH, KW          int64
	Strides         [2]int64
	Dilations       [2]int64
	Pads            [4]int64
	OutH, OutW      int64
	Max             bool // else average
	CountIncludePad bool // average: divide by KH·KW, else by the taps inside the input
	PlainOut        bool
	// GlobalX and GlobalY keep X and a blocked Y in global buffers of the same blocked
	// shapes instead of textures (annotate-scopes left them global).
	GlobalX, GlobalY bool
	Block            int64 // threads per block
}

// Func is the pooling kernel: one thread per output texel (four channels of one
// pixel), threads fused over (n, c/4, oh, ow) and bound like TexConv2D's; a tap outside
// the input is skipped, never read. Parameters: X, Y. Refused (ErrNotTexture): channels
// not a multiple of 4, a non-positive extent, stride, dilation or window, a negative pad.
func (p *TexPool2D) Func() (*loopir.PrimFunc, error) {
	if p.C%loopir.TexelLanes != 0 {
		return nil, fmt.Errorf("%w: %s: %d channels are not a multiple of %d", ErrNotTexture, p.Name, p.C, loopir.TexelLanes)
	}
	for _, v := range []int64{p.N, p.C, p.H, p.W, p.KH, p.KW, p.Strides[0], p.Strides[1], p.Dilations[0], p.Dilations[1], p.OutH, p.OutW, p.Block} {
		if v < 1 {
			return nil, fmt.Errorf("%w: %s: an extent, stride, dilation, window or block of %d", ErrNotTexture, p.Name, v)
		}
	}
	for _, v := range p.Pads {
		if v < 0 {
			return nil, fmt.Errorf("%w: %s: a pad of %d", ErrNotTexture, p.Name, v)
		}
	}
	I := loopir.Int
	f32 := tensor.Float32
	c4 := p.C / loopir.TexelLanes
	buf := func(name string, global bool, dims ...int64) *loopir.Buffer {
		shape := make([]loopir.Expr, len(dims))
		for i, d := range dims {
			shape[i] = I(d)
		}
		b := &loopir.Buffer{Name: name, DT: f32, Shape: shape, Scope: loopir.ScopeGlobal}
		if !global {
			b.Scope, b.Packing = loopir.ScopeTexture, loopir.PackNCHW4c
		}
		return b
	}
	x := buf("X", p.GlobalX, p.N, c4, p.H, p.W, loopir.TexelLanes)
	y := buf("Y", p.GlobalY, p.N, c4, p.OutH, p.OutW, loopir.TexelLanes)
	if p.PlainOut {
		y = buf("Y", true, p.N, p.C, p.OutH, p.OutW)
	}
	acc := &loopir.Buffer{Name: "acc", DT: f32, Shape: []loopir.Expr{I(loopir.TexelLanes)}, Scope: loopir.ScopeLocal}
	cnt := &loopir.Buffer{Name: "cnt", DT: f32, Shape: []loopir.Expr{I(1)}, Scope: loopir.ScopeLocal}

	add, mul, div, mod, bin := loopir.Add, loopir.Mul, loopir.Div, loopir.Mod, loopir.Bin
	blk, thr := loopir.NewVar("b"), loopir.NewVar("t")
	texels := p.N * c4 * p.OutH * p.OutW
	block := min(p.Block, texels)
	i := bin(add, bin(mul, blk, I(block)), thr)
	n := bin(div, i, I(c4*p.OutH*p.OutW))
	q := bin(mod, bin(div, i, I(p.OutH*p.OutW)), I(c4))
	oh := bin(mod, bin(div, i, I(p.OutW)), I(p.OutH))
	ow := bin(mod, i, I(p.OutW))
	l, kh, kw := loopir.NewVar("l"), loopir.NewVar("kh"), loopir.NewVar("kw")
	loop := func(v *loopir.Var, ext int64, k loopir.ForKind, body loopir.Stmt) *loopir.For {
		return &loopir.For{Var: v, Min: I(0), Extent: I(ext), Kind: k, Body: body}
	}
	ih := bin(add, bin(mul, oh, I(p.Strides[0])), bin(loopir.Sub, bin(mul, kh, I(p.Dilations[0])), I(p.Pads[0])))
	iw := bin(add, bin(mul, ow, I(p.Strides[1])), bin(loopir.Sub, bin(mul, kw, I(p.Dilations[1])), I(p.Pads[1])))
	inside := bin(loopir.And, bin(loopir.And, bin(loopir.GE, ih, I(0)), bin(loopir.LT, ih, I(p.H))),
		bin(loopir.And, bin(loopir.GE, iw, I(0)), bin(loopir.LT, iw, I(p.W))))
	at := func(j loopir.Expr) *loopir.Load { return &loopir.Load{Buf: acc, Index: []loopir.Expr{j}} }
	xv := &loopir.Load{Buf: x, Index: []loopir.Expr{n, q, ih, iw, l}}
	init, step := loopir.Float(0, f32), bin(add, at(l), xv)
	if p.Max {
		init, step = loopir.Float(math.Inf(-1), f32), bin(loopir.Max, at(l), xv)
	}
	count := &loopir.Load{Buf: cnt, Index: []loopir.Expr{I(0)}}
	tap := loopir.Seq{
		loop(l, loopir.TexelLanes, loopir.Unrolled, &loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: step}),
		&loopir.Store{Buf: cnt, Index: []loopir.Expr{I(0)}, Value: bin(add, count, loopir.Float(1, f32))},
	}
	l2 := loopir.NewVar("l")
	var v loopir.Expr = at(l2)
	switch {
	case p.Max:
	case p.CountIncludePad:
		v = bin(div, v, loopir.Float(float64(p.KH*p.KW), f32))
	default:
		v = bin(div, v, count)
	}
	yi := []loopir.Expr{n, q, oh, ow, l2}
	if p.PlainOut {
		yi = []loopir.Expr{n, bin(add, bin(mul, q, I(loopir.TexelLanes)), l2), oh, ow}
	}
	body := &loopir.Allocate{Buf: acc, Body: &loopir.Allocate{Buf: cnt, Body: loopir.Seq{
		loop(l, loopir.TexelLanes, loopir.Unrolled, &loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: init}),
		&loopir.Store{Buf: cnt, Index: []loopir.Expr{I(0)}, Value: loopir.Float(0, f32)},
		loop(kh, p.KH, loopir.Serial, loop(kw, p.KW, loopir.Serial, &loopir.IfThenElse{Cond: inside, Then: tap})),
		loop(l2, loopir.TexelLanes, loopir.Serial, &loopir.Store{Buf: y, Index: yi, Value: v}),
	}}}
	grid := (texels + block - 1) / block
	var thread loopir.Stmt = body
	if grid*block != texels {
		thread = &loopir.IfThenElse{Cond: bin(loopir.LT, i, I(texels)), Then: body}
	}
	f := &loopir.PrimFunc{Name: p.Name, Params: []*loopir.Buffer{x, y},
		Body: loop(blk, grid, loopir.Bound(loopir.BlockIdxX), loop(thr, block, loopir.Bound(loopir.ThreadIdxX), thread))}
	if err := loopir.Verify(f); err != nil {
		return nil, fmt.Errorf("BUG: TexPool2D %s: %v", p.Name, err)
	}
	return f, nil
}

// TexPool2DOf is the texture pooling of node n: MaxPool (one output), AveragePool,
// GlobalMaxPool or GlobalAveragePool over a static 4-D float32 input whose channels
// are a multiple of 4, 2-D windows with explicit pads (auto_pad NOTSET), no ceil_mode
// with an average that counts pads, no storage_order; anything else is ErrNotTexture.
// Its output is plain (PlainOut) unless n's output type is stored in blocks.
func TexPool2DOf(n *graph.Node) (*TexPool2D, error) {
	refuse := func(format string, args ...any) (*TexPool2D, error) {
		return nil, fmt.Errorf("%w: %v: %s", ErrNotTexture, n, fmt.Sprintf(format, args...))
	}
	switch n.Op {
	case graph.OpMaxPool, graph.OpAveragePool, graph.OpGlobalMaxPool, graph.OpGlobalAveragePool:
	default:
		return refuse("not a pooling")
	}
	if len(n.Inputs) != 1 || n.Inputs[0] == nil || len(n.Outputs) != 1 {
		return refuse("not one input and one output")
	}
	xs, ok := n.Inputs[0].Type.ConstShape()
	ys, ok2 := n.Outputs[0].Type.ConstShape()
	if !ok || !ok2 || len(xs) != 4 || len(ys) != 4 || n.Inputs[0].Type.DType != tensor.Float32 {
		return refuse("input %v is not a static 4-D float32 tensor", n.Inputs[0].Type)
	}
	p := &TexPool2D{Name: kernels.KernelName(n), N: int64(xs[0]), C: int64(xs[1]), H: int64(xs[2]), W: int64(xs[3]),
		KH: int64(xs[2]), KW: int64(xs[3]), Strides: [2]int64{1, 1}, Dilations: [2]int64{1, 1},
		OutH: int64(ys[2]), OutW: int64(ys[3]), Max: n.Op == graph.OpMaxPool || n.Op == graph.OpGlobalMaxPool,
		Block: DefaultBlock, PlainOut: n.Outputs[0].Type.Block == 0}
	if a, ok := n.Attrs.(*graph.PoolAttrs); ok {
		if a.AutoPad != "" && a.AutoPad != "NOTSET" || a.StorageOrder != 0 || len(a.KernelShape) != 2 {
			return refuse("auto_pad %q, storage_order %d, a %d-D window", a.AutoPad, a.StorageOrder, len(a.KernelShape))
		}
		p.KH, p.KW = a.KernelShape[0], a.KernelShape[1]
		p.CountIncludePad = a.CountIncludePad != 0
		if a.CeilMode != 0 && !p.Max && p.CountIncludePad {
			return refuse("an average over a ceil_mode window that counts pads")
		}
		if len(a.Strides) == 2 {
			p.Strides = [2]int64{a.Strides[0], a.Strides[1]}
		}
		if len(a.Dilations) == 2 {
			p.Dilations = [2]int64{a.Dilations[0], a.Dilations[1]}
		}
		if len(a.Pads) == 4 {
			copy(p.Pads[:], a.Pads)
		} else if len(a.Pads) != 0 {
			return refuse("%d pads", len(a.Pads))
		}
	} else if n.Op == graph.OpMaxPool || n.Op == graph.OpAveragePool {
		return refuse("no pooling attributes")
	}
	if _, err := p.Func(); err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	return p, nil
}

// TexturePoolStrategy is the texture pooling as a strategy: a node TexPool2DOf takes,
// its input stored in blocks of 4, with its input and a blocked output in textures or
// global buffers as annotate-scopes chose. Any other node is kernels.ErrNotApplicable.
// It is not in Strategies: the OpenCL backend puts it first on its texture path.
func TexturePoolStrategy() kernels.Strategy {
	return kernels.Strategy{Name: "gpu-texture-pool",
		Build: func(n *graph.Node, _ []kernels.Input, t target.Target) (*kernels.Impl, error) {
			p, err := TexPool2DOf(n)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			x, y := n.Inputs[0].Type, n.Outputs[0].Type
			if x.Block != loopir.TexelLanes {
				return nil, fmt.Errorf("%w: %v: input not stored in blocks of %d", kernels.ErrNotApplicable, n, loopir.TexelLanes)
			}
			if x.Scope == graph.ScopeTexture && x.Packing != graph.PackNCHW4c || y.Scope == graph.ScopeTexture && y.Packing != graph.PackNCHW4c {
				return nil, fmt.Errorf("%w: %v: a texture packing the pooling does not take", kernels.ErrNotApplicable, n)
			}
			if p.Block, err = BlockSize(t); err != nil {
				return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
			}
			p.GlobalX, p.GlobalY = x.Scope != graph.ScopeTexture, y.Scope != graph.ScopeTexture
			f, err := p.Func()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			return &kernels.Impl{Func: f, Params: []kernels.Param{{Input: 0}}}, nil
		},
	}
}
