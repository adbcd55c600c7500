package gpu

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TexConv2D is a direct 2-D convolution over textures (group 1): input X in NCHW4c
// ([N, C/4, H, W, 4]), weight W in OIHW4o ([M/4, C, KH, KW, 4]), an optional bias B in
// a global buffer ([M]), output Y in NCHW4c ([N, M/4, OH, OW, 4]), or in a plain
// global buffer when PlainOut. Pads are top, left, bottom, right.
type TexConv2D struct {
	Name          string
	N, C, H, W, M int64
	KH, KW        int64
	Strides       [2]int64
	Dilations     [2]int64
	Pads          [4]int64
	Bias          bool
	PlainOut      bool // Y is a global buffer [N, M, OH, OW] (a result no reader wants blocked)
	// PlainX reads X from a plain global buffer [N, C, H, W] (C need not be a multiple
	// of 4: a network's first convolution, over 3 colour channels).
	PlainX bool
	// Depthwise is a convolution of group C = M: each output channel reads its own input
	// channel, through a plain global weight [M, 1, KH, KW].
	Depthwise bool
	// GlobalX, GlobalW and GlobalY keep X, W and a blocked Y in global buffers of the
	// same blocked shapes instead of textures (annotate-scopes left them global).
	GlobalX, GlobalW, GlobalY bool
	Block                     int64 // threads per block
	// Epilogue is applied to each accumulated output element before it is written,
	// in order: an activation or the addition of a residual operand (an NCHW4c tensor
	// of the output's blocked shape, a parameter after B, one per TexAdd step).
	Epilogue   []TexEpilogue
	OutH, OutW int64 // set by Func
}

// TexEpilogueKind is one elementwise step of the texture convolution's epilogue.
type TexEpilogueKind uint8

const (
	TexRelu TexEpilogueKind = iota // max(v, 0)
	TexClip                        // min(max(v, Lo), Hi)
	TexAdd                         // v + the residual operand's element at the same index
)

// TexEpilogue is one step of TexConv2D.Epilogue. Global keeps a TexAdd's operand in a
// global buffer of the output's blocked shape instead of a texture.
type TexEpilogue struct {
	Kind   TexEpilogueKind
	Lo, Hi float32
	Global bool
}

// Func is the convolution's kernel: one thread per output texel (the four output
// channels of one pixel), threads fused over (n, m/4, oh, ow), split by Block and bound
// to blockIdx.x and threadIdx.x (a guard for the tail). The thread accumulates its four
// channels in a private four-element buffer, from the bias or zero, over the input's
// channel blocks (its channels with PlainX; its own four channels when Depthwise) and
// the window's taps (a tap in the padding is skipped, never read:
// an image read outside the image is undefined without an addressing mode), then
// writes them as one texel (or as four elements of a plain output), through the
// epilogue. Parameters: X, W, B (when Bias), one R per TexAdd step, Y. Refused
// (ErrNotTexture): channels that are not multiples of 4 (output channels; input
// channels unless PlainX), a depthwise convolution with C != M or a plain input, a
// non-positive extent, stride or dilation, a negative pad, an output that would be
// empty.
func (c *TexConv2D) Func() (*loopir.PrimFunc, error) {
	if c.Depthwise && (c.C != c.M || c.PlainX) {
		return nil, fmt.Errorf("%w: %s: a depthwise convolution of %d to %d channels (plain input %v)", ErrNotTexture, c.Name, c.C, c.M, c.PlainX)
	}
	if (!c.PlainX && c.C%loopir.TexelLanes != 0) || c.M%loopir.TexelLanes != 0 {
		return nil, fmt.Errorf("%w: %s: channels %d and %d are not multiples of %d", ErrNotTexture, c.Name, c.C, c.M, loopir.TexelLanes)
	}
	for _, v := range []int64{c.N, c.C, c.H, c.W, c.M, c.KH, c.KW, c.Strides[0], c.Strides[1], c.Dilations[0], c.Dilations[1], c.Block} {
		if v < 1 {
			return nil, fmt.Errorf("%w: %s: an extent, stride, dilation or block of %d", ErrNotTexture, c.Name, v)
		}
	}
	for _, p := range c.Pads {
		if p < 0 {
			return nil, fmt.Errorf("%w: %s: a pad of %d", ErrNotTexture, c.Name, p)
		}
	}
	c.OutH = (c.H+c.Pads[0]+c.Pads[2]-c.Dilations[0]*(c.KH-1)-1)/c.Strides[0] + 1
	c.OutW = (c.W+c.Pads[1]+c.Pads[3]-c.Dilations[1]*(c.KW-1)-1)/c.Strides[1] + 1
	if c.OutH < 1 || c.OutW < 1 {
		return nil, fmt.Errorf("%w: %s: an empty output %dx%d", ErrNotTexture, c.Name, c.OutH, c.OutW)
	}
	I := loopir.Int
	f32 := tensor.Float32
	tex := func(name string, global bool, p loopir.Packing, dims ...int64) *loopir.Buffer {
		shape := make([]loopir.Expr, len(dims))
		for i, d := range dims {
			shape[i] = I(d)
		}
		if global {
			return &loopir.Buffer{Name: name, DT: f32, Shape: shape, Scope: loopir.ScopeGlobal}
		}
		return &loopir.Buffer{Name: name, DT: f32, Shape: shape, Scope: loopir.ScopeTexture, Packing: p}
	}
	c4, m4 := c.C/loopir.TexelLanes, c.M/loopir.TexelLanes
	x := tex("X", c.GlobalX, loopir.PackNCHW4c, c.N, c4, c.H, c.W, loopir.TexelLanes)
	if c.PlainX {
		x = tex("X", true, 0, c.N, c.C, c.H, c.W)
	}
	w := tex("W", c.GlobalW, loopir.PackOIHW4o, m4, c.C, c.KH, c.KW, loopir.TexelLanes)
	if c.Depthwise {
		w = tex("W", true, 0, c.M, 1, c.KH, c.KW)
	}
	y := tex("Y", c.GlobalY, loopir.PackNCHW4c, c.N, m4, c.OutH, c.OutW, loopir.TexelLanes)
	if c.PlainOut {
		y = &loopir.Buffer{Name: "Y", DT: f32, Shape: []loopir.Expr{I(c.N), I(c.M), I(c.OutH), I(c.OutW)}, Scope: loopir.ScopeGlobal}
	}
	params := []*loopir.Buffer{x, w}
	var bias *loopir.Buffer
	if c.Bias {
		bias = &loopir.Buffer{Name: "B", DT: f32, Shape: []loopir.Expr{I(c.M)}, Scope: loopir.ScopeGlobal}
		params = append(params, bias)
	}
	var residuals []*loopir.Buffer
	for k, e := range c.Epilogue {
		if e.Kind != TexAdd {
			continue
		}
		if c.PlainOut {
			return nil, fmt.Errorf("%w: %s: a residual operand of a plain output", ErrNotTexture, c.Name)
		}
		r := tex(fmt.Sprintf("R%d", k), e.Global, loopir.PackNCHW4c, c.N, m4, c.OutH, c.OutW, loopir.TexelLanes)
		residuals = append(residuals, r)
		params = append(params, r)
	}
	params = append(params, y)
	acc := &loopir.Buffer{Name: "acc", DT: f32, Shape: []loopir.Expr{I(loopir.TexelLanes)}, Scope: loopir.ScopeLocal}

	add, mul, div, mod := loopir.Add, loopir.Mul, loopir.Div, loopir.Mod
	bin := loopir.Bin
	blk, thr := loopir.NewVar("b"), loopir.NewVar("t")
	texels := c.N * m4 * c.OutH * c.OutW
	block := min(c.Block, texels)
	i := bin(add, bin(mul, blk, I(block)), thr)
	n := bin(div, i, I(m4*c.OutH*c.OutW))
	o4 := bin(mod, bin(div, i, I(c.OutH*c.OutW)), I(m4))
	oh := bin(mod, bin(div, i, I(c.OutW)), I(c.OutH))
	ow := bin(mod, i, I(c.OutW))

	l, ci, kh, kw, cl := loopir.NewVar("l"), loopir.NewVar("ci"), loopir.NewVar("kh"), loopir.NewVar("kw"), loopir.NewVar("cl")
	loop := func(v *loopir.Var, ext int64, k loopir.ForKind, body loopir.Stmt) *loopir.For {
		return &loopir.For{Var: v, Min: I(0), Extent: I(ext), Kind: k, Body: body}
	}
	var init loopir.Expr = loopir.Float(0, f32)
	if bias != nil {
		init = &loopir.Load{Buf: bias, Index: []loopir.Expr{bin(add, bin(mul, o4, I(loopir.TexelLanes)), l)}}
	}
	ih := bin(add, bin(mul, oh, I(c.Strides[0])), bin(loopir.Sub, bin(mul, kh, I(c.Dilations[0])), I(c.Pads[0])))
	iw := bin(add, bin(mul, ow, I(c.Strides[1])), bin(loopir.Sub, bin(mul, kw, I(c.Dilations[1])), I(c.Pads[1])))
	inside := bin(loopir.And, bin(loopir.And, bin(loopir.GE, ih, I(0)), bin(loopir.LT, ih, I(c.H))),
		bin(loopir.And, bin(loopir.GE, iw, I(0)), bin(loopir.LT, iw, I(c.W))))
	at := func(j loopir.Expr) *loopir.Load { return &loopir.Load{Buf: acc, Index: []loopir.Expr{j}} }
	xv := &loopir.Load{Buf: x, Index: []loopir.Expr{n, ci, ih, iw, cl}}
	wv := &loopir.Load{Buf: w, Index: []loopir.Expr{o4, bin(add, bin(mul, ci, I(loopir.TexelLanes)), cl), kh, kw, l}}
	var tap loopir.Stmt = loop(cl, loopir.TexelLanes, loopir.Unrolled, loop(l, loopir.TexelLanes, loopir.Unrolled,
		&loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: bin(add, at(l), bin(mul, xv, wv))}))
	channels := c4 // the loop over input channels: blocks of 4, channels, or none
	switch {
	case c.Depthwise:
		xv = &loopir.Load{Buf: x, Index: []loopir.Expr{n, o4, ih, iw, l}}
		wv = &loopir.Load{Buf: w, Index: []loopir.Expr{bin(add, bin(mul, o4, I(loopir.TexelLanes)), l), I(0), kh, kw}}
		tap = loop(l, loopir.TexelLanes, loopir.Unrolled, &loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: bin(add, at(l), bin(mul, xv, wv))})
		channels = 1
	case c.PlainX:
		xv = &loopir.Load{Buf: x, Index: []loopir.Expr{n, ci, ih, iw}}
		wv = &loopir.Load{Buf: w, Index: []loopir.Expr{o4, ci, kh, kw, l}}
		tap = loop(l, loopir.TexelLanes, loopir.Unrolled, &loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: bin(add, at(l), bin(mul, xv, wv))})
		channels = c.C
	}
	l2 := loopir.NewVar("l")
	yi := []loopir.Expr{n, o4, oh, ow, l2}
	if c.PlainOut {
		yi = []loopir.Expr{n, bin(add, bin(mul, o4, I(loopir.TexelLanes)), l2), oh, ow}
	}
	var v loopir.Expr = at(l2)
	next := 0
	for _, e := range c.Epilogue {
		switch e.Kind {
		case TexRelu:
			v = bin(loopir.Max, v, loopir.Float(0, f32))
		case TexClip:
			v = bin(loopir.Min, bin(loopir.Max, v, loopir.Float(float64(e.Lo), f32)), loopir.Float(float64(e.Hi), f32))
		case TexAdd:
			v = bin(add, v, &loopir.Load{Buf: residuals[next], Index: []loopir.Expr{n, o4, oh, ow, l2}})
			next++
		default:
			return nil, fmt.Errorf("BUG: TexConv2D %s: epilogue kind %d", c.Name, e.Kind)
		}
	}
	out := loop(l2, loopir.TexelLanes, loopir.Serial, &loopir.Store{Buf: y, Index: yi, Value: v})
	body := &loopir.Allocate{Buf: acc, Body: loopir.Seq{
		loop(l, loopir.TexelLanes, loopir.Unrolled, &loopir.Store{Buf: acc, Index: []loopir.Expr{l}, Value: init}),
		loop(ci, channels, loopir.Serial, loop(kh, c.KH, loopir.Serial, loop(kw, c.KW, loopir.Serial,
			&loopir.IfThenElse{Cond: inside, Then: tap}))),
		out,
	}}
	grid := (texels + block - 1) / block
	var thread loopir.Stmt = body
	if grid*block != texels {
		thread = &loopir.IfThenElse{Cond: bin(loopir.LT, i, I(texels)), Then: body}
	}
	f := &loopir.PrimFunc{Name: c.Name, Params: params,
		Body: loop(blk, grid, loopir.Bound(loopir.BlockIdxX), loop(thr, block, loopir.Bound(loopir.ThreadIdxX), thread))}
	if err := loopir.Verify(f); err != nil {
		return nil, fmt.Errorf("BUG: TexConv2D %s: %v", c.Name, err)
	}
	return f, nil
}
