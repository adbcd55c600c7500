package gpu

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/schedule"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// LayoutOIHW4o names the weight rewrite of the texture convolution (kernels.Param.Layout).
const LayoutOIHW4o = "oihw4o"

// TextureConvStrategy is the texture convolution as a strategy: a Conv node that
// TexConv2DOf takes, its input stored in blocks of 4, becomes TexConv2D's kernel with
// each operand in a texture when its type's scope is texture and in a global buffer
// otherwise (GlobalX, GlobalW, GlobalY; PlainOut when the output is not blocked). The
// weight is rewritten on the host into OIHW4o (PackOIHW4o; the Param's Prepack). Its
// fused form takes a chain of Relu, Clip with constant bounds and Add of a residual
// tensor blocked like the output (texStepOf) as TexConv2D's epilogue. Any other node
// or chain is kernels.ErrNotApplicable. It is not in Strategies: the OpenCL backend
// puts it first on its texture path.
func TextureConvStrategy() kernels.Strategy {
	return kernels.Strategy{Name: "gpu-texture-conv",
		Build: func(n *graph.Node, _ []kernels.Input, t target.Target) (*kernels.Impl, error) {
			return texConvImpl(n, nil, t)
		},
		Fused: func(n *graph.Node, _ []kernels.Input, epi []kernels.Epilogue, t target.Target) (*kernels.Impl, error) {
			chain := make([]*graph.Node, len(epi))
			for k, e := range epi {
				chain[k] = e.Node
			}
			return texConvImpl(n, chain, t)
		},
	}
}

// texConvImpl is the texture convolution of conv followed by chain (each member
// reading the previous one's output, the first the convolution's).
func texConvImpl(conv *graph.Node, chain []*graph.Node, t target.Target) (*kernels.Impl, error) {
	c, err := TexConv2DOf(conv)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
	}
	if want := inputBlock(c); conv.Inputs[0].Type.Block != want {
		return nil, fmt.Errorf("%w: %v: input not stored in blocks of %d", kernels.ErrNotApplicable, conv, want)
	}
	if c.Block, err = BlockSize(t); err != nil {
		return nil, fmt.Errorf("%v: %w: %v", conv, kernels.ErrNotApplicable, err)
	}
	prev := conv.Outputs[0]
	var residuals []kernels.Param
	for k, m := range chain {
		st, err := texStepOf(m, prev)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
		}
		c.Epilogue = append(c.Epilogue, st.step)
		if st.step.Kind == TexAdd {
			r := m.Inputs[st.operand].Type
			if r.Scope == graph.ScopeTexture && r.Packing != graph.PackNCHW4c {
				return nil, fmt.Errorf("%w: %v: a residual in a %v texture", kernels.ErrNotApplicable, m, r.Packing)
			}
			residuals = append(residuals, kernels.Param{Node: k + 1, Input: st.operand})
		}
		prev = m.Outputs[0]
	}
	out := prev.Type
	c.PlainOut = out.Block == 0
	c.GlobalX = c.PlainX || conv.Inputs[0].Type.Scope != graph.ScopeTexture
	c.GlobalW = c.Depthwise || conv.Inputs[1].Type.Scope != graph.ScopeTexture
	c.GlobalY = out.Scope != graph.ScopeTexture
	x, w := conv.Inputs[0].Type, conv.Inputs[1].Type
	if out.Scope == graph.ScopeTexture && out.Packing != graph.PackNCHW4c ||
		x.Scope == graph.ScopeTexture && (c.PlainX || x.Packing != graph.PackNCHW4c) ||
		w.Scope == graph.ScopeTexture && (c.Depthwise || w.Packing != graph.PackOIHW4o) {
		return nil, fmt.Errorf("%w: %v: a texture packing the convolution does not take", kernels.ErrNotApplicable, conv)
	}
	f, err := c.Func()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
	}
	params := []kernels.Param{{Input: 0}, {Input: 1, Prepack: PackOIHW4o, Layout: LayoutOIHW4o}}
	if c.Depthwise {
		params[1] = kernels.Param{Input: 1} // read as it is: [M, 1, KH, KW]
	}
	if c.Bias {
		params = append(params, kernels.Param{Input: 2})
	}
	return &kernels.Impl{Func: f, Params: append(params, residuals...)}, nil
}

// inputBlock is the block the convolution's input is stored in: plain for PlainX,
// else blocks of 4 channels.
func inputBlock(c *TexConv2D) int64 {
	if c.PlainX {
		return 0
	}
	return loopir.TexelLanes
}

// PackOIHW4o rewrites a float32 weight [O, I, KH, KW] (O a multiple of 4) into
// [O/4, I, KH, KW, 4], the order of its OIHW4o texture's texels.
func PackOIHW4o(w *tensor.Tensor) (*tensor.Tensor, error) {
	s := w.Shape
	if w.DType != tensor.Float32 || len(s) != 4 || s[0]%loopir.TexelLanes != 0 {
		return nil, fmt.Errorf("an OIHW4o weight is a float32 [O, I, KH, KW] with O a multiple of 4, not %v%v", w.DType, s)
	}
	v := w.Float64s()
	out := make([]float64, len(v))
	inner := s[1] * s[2] * s[3]
	for o := range s[0] {
		for r := range inner {
			out[((o/4)*inner+r)*4+o%4] = v[o*inner+r]
		}
	}
	return tensor.FromFloat64s(tensor.Float32, tensor.Shape{s[0] / 4, s[1], s[2], s[3], 4}, out), nil
}

// TextureInjectiveStrategy is the injective rule over textures as a strategy: an
// elementwise or broadcasting node TextureLayoutPolicy keeps in blocks of 4 (its output
// stored so) is its compute definition over the blocked shapes (the placeholders in in
// are kernels.PhysicalShape's) scheduled by ScheduleTextureInjective, with each
// parameter whose value annotate-scopes put in a texture moved into an NCHW4c texture
// (Texturize). Any other node is kernels.ErrNotApplicable. It is not in Strategies.
func TextureInjectiveStrategy(reg *kernels.Registry) kernels.Strategy {
	return kernels.Strategy{Name: "gpu-texture-injective",
		Build: func(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
			if len(n.Outputs) != 1 || n.Outputs[0].Type.Block != loopir.TexelLanes {
				return nil, fmt.Errorf("%w: %v: output not stored in blocks of %d", kernels.ErrNotApplicable, n, loopir.TexelLanes)
			}
			if _, ok := texAccepts(reg, n, blocksOf(n)); !ok {
				return nil, fmt.Errorf("%w: %v: not elementwise over blocks of %d", kernels.ErrNotApplicable, n, loopir.TexelLanes)
			}
			block, err := BlockSize(t)
			if err != nil {
				return nil, fmt.Errorf("%v: %w: %v", n, kernels.ErrNotApplicable, err)
			}
			impl, err := kernels.Generic(reg, kernels.KernelName(n), n, in, func(s *schedule.Schedule) error {
				return ScheduleTextureInjective(s, block)
			})
			if err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			packings := map[int]loopir.Packing{}
			for i, p := range impl.Params {
				v := n.Inputs[p.Input]
				if v.Type.Scope == graph.ScopeTexture {
					if v.Type.Packing != graph.PackNCHW4c {
						return nil, fmt.Errorf("%w: %v: input %d in a %v texture", kernels.ErrNotApplicable, n, p.Input, v.Type.Packing)
					}
					packings[i] = loopir.PackNCHW4c
				}
			}
			if out := n.Outputs[0].Type; out.Scope == graph.ScopeTexture {
				if out.Packing != graph.PackNCHW4c {
					return nil, fmt.Errorf("%w: %v: output in a %v texture", kernels.ErrNotApplicable, n, out.Packing)
				}
				packings[len(impl.Func.Params)-1] = loopir.PackNCHW4c
			}
			if impl.Func, err = Texturize(impl.Func, packings); err != nil {
				return nil, fmt.Errorf("%w: %v", kernels.ErrNotApplicable, err)
			}
			return impl, nil
		},
	}
}
