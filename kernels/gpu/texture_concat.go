package gpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TexConcat joins NCHW4c inputs ([N, C_k/4, H, W, 4], each C_k a multiple of 4) along
// the channels into an NCHW4c output, or a plain global one when PlainOut. Global[k]
// keeps input k in a global buffer of its blocked shape; GlobalY a blocked output.
type TexConcat struct {
	Name     string
	N, H, W  int64
	C        []int64 // each input's channels
	Global   []bool
	PlainOut bool
	GlobalY  bool
	Block    int64
}

// Func is the concatenation's kernel: one thread per output texel, which copies the
// texel of the input whose channel blocks hold it. Parameters: one X per input, Y.
func (c *TexConcat) Func() (*loopir.PrimFunc, error) {
	if len(c.C) == 0 || len(c.Global) != len(c.C) || c.N < 1 || c.H < 1 || c.W < 1 || c.Block < 1 {
		return nil, fmt.Errorf("%w: %s: %d inputs over %dx%dx%d", ErrNotTexture, c.Name, len(c.C), c.N, c.H, c.W)
	}
	I, f32 := loopir.Int, tensor.Float32
	var total int64
	params := make([]*loopir.Buffer, 0, len(c.C)+1)
	for k, ck := range c.C {
		if ck < 1 || ck%loopir.TexelLanes != 0 {
			return nil, fmt.Errorf("%w: %s: input %d has %d channels, not a multiple of %d", ErrNotTexture, c.Name, k, ck, loopir.TexelLanes)
		}
		b := &loopir.Buffer{Name: fmt.Sprintf("X%d", k), DT: f32, Shape: []loopir.Expr{I(c.N), I(ck / loopir.TexelLanes), I(c.H), I(c.W), I(loopir.TexelLanes)}, Scope: loopir.ScopeGlobal}
		if !c.Global[k] {
			b.Scope, b.Packing = loopir.ScopeTexture, loopir.PackNCHW4c
		}
		params = append(params, b)
		total += ck
	}
	t4 := total / loopir.TexelLanes
	y := &loopir.Buffer{Name: "Y", DT: f32, Shape: []loopir.Expr{I(c.N), I(t4), I(c.H), I(c.W), I(loopir.TexelLanes)}, Scope: loopir.ScopeTexture, Packing: loopir.PackNCHW4c}
	if c.GlobalY || c.PlainOut {
		y.Scope, y.Packing = loopir.ScopeGlobal, 0
	}
	if c.PlainOut {
		y.Shape = []loopir.Expr{I(c.N), I(total), I(c.H), I(c.W)}
	}
	params = append(params, y)

	add, mul, div, mod, bin := loopir.Add, loopir.Mul, loopir.Div, loopir.Mod, loopir.Bin
	blk, thr := loopir.NewVar("b"), loopir.NewVar("t")
	texels := c.N * t4 * c.H * c.W
	block := min(c.Block, texels)
	i := bin(add, bin(mul, blk, I(block)), thr)
	n := bin(div, i, I(t4*c.H*c.W))
	q := bin(mod, bin(div, i, I(c.H*c.W)), I(t4))
	h := bin(mod, bin(div, i, I(c.W)), I(c.H))
	w := bin(mod, i, I(c.W))
	var body loopir.Seq
	var off int64
	for k, ck := range c.C {
		l := loopir.NewVar("l")
		src := &loopir.Load{Buf: params[k], Index: []loopir.Expr{n, bin(loopir.Sub, q, I(off/loopir.TexelLanes)), h, w, l}}
		yi := []loopir.Expr{n, q, h, w, l}
		if c.PlainOut {
			yi = []loopir.Expr{n, bin(add, bin(mul, q, I(loopir.TexelLanes)), l), h, w}
		}
		in := bin(loopir.And, bin(loopir.GE, q, I(off/loopir.TexelLanes)), bin(loopir.LT, q, I((off+ck)/loopir.TexelLanes)))
		body = append(body, &loopir.IfThenElse{Cond: in, Then: &loopir.For{Var: l, Min: I(0), Extent: I(loopir.TexelLanes), Kind: loopir.Serial,
			Body: &loopir.Store{Buf: y, Index: yi, Value: src}}})
		off += ck
	}
	grid := (texels + block - 1) / block
	var thread loopir.Stmt = body
	if grid*block != texels {
		thread = &loopir.IfThenElse{Cond: bin(loopir.LT, i, I(texels)), Then: body}
	}
	loop := func(v *loopir.Var, ext int64, k loopir.ForKind, b loopir.Stmt) *loopir.For {
		return &loopir.For{Var: v, Min: I(0), Extent: I(ext), Kind: k, Body: b}
	}
	f := &loopir.PrimFunc{Name: c.Name, Params: params,
		Body: loop(blk, grid, loopir.Bound(loopir.BlockIdxX), loop(thr, block, loopir.Bound(loopir.ThreadIdxX), thread))}
	if err := loopir.Verify(f); err != nil {
		return nil, fmt.Errorf("BUG: TexConcat %s: %v", c.Name, err)
	}
	return f, nil
}

// TexConcatOf is the texture concatenation of Concat node n: static 4-D float32
// inputs joined on the channel axis, each with channels a multiple of 4; anything else
// is ErrNotTexture. Its output is plain (PlainOut) unless n's output is blocked.
func TexConcatOf(n *graph.Node) (*TexConcat, error) {
	refuse := func(format string, args ...any) (*TexConcat, error) {
		return nil, fmt.Errorf("%w: %v: %s", ErrNotTexture, n, fmt.Sprintf(format, args...))
	}
	a, ok := n.Attrs.(*graph.AxisAttrs)
	if n.Op != graph.OpConcat || !ok || len(n.Outputs) != 1 || len(n.Inputs) == 0 {
		return refuse("not a concatenation")
	}
	if a.Axis != 1 && a.Axis != -3 {
		return refuse("axis %d, not the channels", a.Axis)
	}
	c := &TexConcat{Name: kernels.KernelName(n), Block: DefaultBlock, PlainOut: n.Outputs[0].Type.Block == 0}
	for k, v := range n.Inputs {
		if v == nil {
			return refuse("input %d is omitted", k)
		}
		s, ok := v.Type.ConstShape()
		if !ok || len(s) != 4 || v.Type.DType != tensor.Float32 {
			return refuse("input %d %v is not a static 4-D float32 tensor", k, v.Type)
		}
		if k == 0 {
			c.N, c.H, c.W = int64(s[0]), int64(s[2]), int64(s[3])
		} else if int64(s[0]) != c.N || int64(s[2]) != c.H || int64(s[3]) != c.W {
			return refuse("input %d %v differs from input 0 beside the channels", k, v.Type)
		}
		c.C = append(c.C, int64(s[1]))
		c.Global = append(c.Global, true)
	}
	if _, err := c.Func(); err != nil {
		return nil, fmt.Errorf("%v: %w", n, err)
	}
	return c, nil
}

// TextureConcatStrategy is the texture concatenation as a strategy: a Concat that
// TexConcatOf takes, every input stored in blocks of 4, each input and a blocked
// output in a texture or a global buffer as annotate-scopes chose. Any other node is
// kernels.ErrNotApplicable. It is not in Strategies.
func TextureConcatStrategy() kernels.Strategy {
	return kernels.Strategy{Name: "gpu-texture-concat",
		Build: func(n *graph.Node, _ []kernels.Input, t target.Target) (*kernels.Impl, error) {
			c, err := TexConcatOf(n)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			params := make([]kernels.Param, len(n.Inputs))
			for k, v := range n.Inputs {
				if v.Type.Block != loopir.TexelLanes || v.Type.Scope == graph.ScopeTexture && v.Type.Packing != graph.PackNCHW4c {
					return nil, fmt.Errorf("%w: %v: input %d is not blocked by %d in global memory or an NCHW4c texture", kernels.ErrNotApplicable, n, k, loopir.TexelLanes)
				}
				c.Global[k] = v.Type.Scope != graph.ScopeTexture
				params[k] = kernels.Param{Input: k}
			}
			y := n.Outputs[0].Type
			if y.Scope == graph.ScopeTexture && y.Packing != graph.PackNCHW4c {
				return nil, fmt.Errorf("%w: %v: output in a %v texture", kernels.ErrNotApplicable, n, y.Packing)
			}
			c.GlobalY = y.Scope != graph.ScopeTexture
			if c.Block, err = BlockSize(t); err != nil {
				return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
			}
			f, err := c.Func()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			return &kernels.Impl{Func: f, Params: params}, nil
		},
	}
}
