package kernels

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// PhysicalShape is how a value of type t is stored: its static shape, or
// [N, C/b, H, W, b] for a 4-D value stored in channel blocks of b (graph.Type.Block).
// Placeholders of kernel inputs take this shape.
func PhysicalShape(t graph.Type) ([]int64, error) {
	s, ok := t.ConstShape()
	if !ok || t.Kind != graph.KindTensor {
		return nil, fmt.Errorf("type %v is not a static tensor", t)
	}
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	if t.Block == 0 {
		return out, nil
	}
	if err := graph.CheckBlock(t, t.Block); err != nil {
		return nil, err
	}
	return []int64{out[0], out[1] / t.Block, out[2], out[3], t.Block}, nil
}

// layoutComputes: the storage-order change between plain NCHW and channel blocks.
func layoutComputes() map[graph.Op]ComputeFunc {
	return map[graph.Op]ComputeFunc{graph.OpLayoutTransform: computeLayoutTransform}
}

// computeLayoutTransform reads the input's storage (plain or blocked) at each element of
// the output's storage.
func computeLayoutTransform(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	src, dst := n.Inputs[0].Type, n.Outputs[0].Type
	shape, err := PhysicalShape(dst)
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	x := in[0].T
	out := te.Compute("layout", Static(shape...), func(i []loopir.Expr) loopir.Expr {
		// the logical (n, c, h, w) of this output element
		c := i[1]
		if dst.Block != 0 {
			c = add(mul(i[1], i64(dst.Block)), i[4])
		}
		if src.Block == 0 {
			return x.At(i[0], c, i[2], i[3])
		}
		return x.At(i[0], div(c, i64(src.Block)), i[2], i[3], loopir.Bin(loopir.Mod, c, i64(src.Block)))
	})
	return []*te.Tensor{out}, nil
}

// isBlocked reports a node with an input stored in channel blocks.
func isBlocked(n *graph.Node) bool {
	for _, v := range n.Inputs {
		if v != nil && v.Type.Block != 0 {
			return true
		}
	}
	return false
}

// broadcastOps are the ops whose definitions broadcast their inputs numpy-style (a Map
// over all of them), so that any operand can be handed to them as a view.
var broadcastOps = []graph.Op{
	graph.OpAdd, graph.OpSub, graph.OpMul, graph.OpDiv, graph.OpMod, graph.OpPow, graph.OpPRelu,
	graph.OpBitShift, graph.OpAnd, graph.OpOr, graph.OpXor,
	graph.OpEqual, graph.OpGreater, graph.OpGreaterOrEqual, graph.OpLess, graph.OpLessOrEqual,
	graph.OpSum, graph.OpMean, graph.OpMax, graph.OpMin, graph.OpWhere,
}

// BroadcastsOnBlocked reports whether op, with its output stored in channel blocks,
// reads operands that broadcast onto the output (per channel [1,C,1,1] or [C,1,1], per
// row, per image), plain or blocked, through views of the blocked index.
func BroadcastsOnBlocked(op graph.Op) bool {
	for _, o := range broadcastOps {
		if o == op {
			return true
		}
	}
	return false
}

// blockedBroadcasts wraps the definitions of broadcastOps: when the node's output is
// stored in channel blocks of b, each input that does not already broadcast against the
// output's storage [N, C/b, H, W, b] is given to the plain definition as a view of rank
// 5 (BlockedView), and the result must be exactly that storage.
func blockedBroadcasts(r *Registry) {
	for _, op := range broadcastOps {
		plain := r.compute[op]
		if plain == nil {
			panic("BUG: no compute definition for " + op.String())
		}
		r.compute[op] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
			if len(n.Outputs) != 1 || n.Outputs[0].Type.Block == 0 {
				return plain(n, in)
			}
			out := n.Outputs[0].Type
			views, viewed := append([]Input{}, in...), false
			for i, v := range n.Inputs {
				if v == nil || i >= len(in) || !in[i].Present() {
					continue
				}
				t, err := BlockedView(in[i].T, v.Type, out)
				if err != nil {
					return nil, fmt.Errorf("input %d: %w", i, err)
				}
				views[i].T, viewed = t, viewed || t != in[i].T
			}
			if !viewed {
				return plain(n, in)
			}
			outs, err := plain(n, views)
			if err != nil {
				return nil, err
			}
			want, err := PhysicalShape(out)
			if err != nil {
				return nil, Unsupported("%v", err)
			}
			if got, err := Extents(outs[0]); err != nil || !slices.Equal(got, want) {
				return nil, Unsupported("%v: broadcast operands give %v, not the blocked output's storage %v", n.Op, outs[0].Shape, want)
			}
			return outs, nil
		}
	}
}

// BlockedView returns x, an operand of type t, as a tensor that numpy-broadcasts
// against the storage [N, C/b, H, W, b] of out (a 4-D type stored in channel blocks of
// b): x itself when it is stored in the same blocks (its extents broadcasting onto
// out's) or holds one element; otherwise a view of rank 5 whose element (n, cb, h, w, k)
// reads x at channel cb·b+k (0 when x has one channel), its axes aligned on the right
// as numpy aligns them. An operand that does not broadcast onto out is refused.
func BlockedView(x *te.Tensor, t, out graph.Type) (*te.Tensor, error) {
	b := out.Block
	os, ok1 := out.ConstShape()
	s, ok2 := t.ConstShape()
	if !ok1 || !ok2 || len(os) != 4 || len(s) > 4 || t.UnknownRank {
		return nil, Unsupported("operand %v of a blocked output %v: static shapes of rank at most 4 only", t, out)
	}
	s4 := make([]int64, 4)
	for k := range s4 {
		s4[k] = 1
		if j := k - (4 - len(s)); j >= 0 {
			s4[k] = int64(s[j])
		}
		if s4[k] != 1 && s4[k] != int64(os[k]) {
			return nil, Unsupported("operand %v does not broadcast onto %v", t, out)
		}
	}
	switch {
	case t.Block == b:
		if s4[1] != int64(os[1]) {
			return nil, Unsupported("blocked operand %v of %v", t, out)
		}
		return x, nil
	case t.Block != 0:
		return nil, Unsupported("operand in blocks of %d, output in blocks of %d", t.Block, b)
	case s4[0]*s4[1]*s4[2]*s4[3] == 1:
		return x, nil
	}
	cb, inner := int64(1), int64(1)
	if s4[1] != 1 {
		cb, inner = s4[1]/b, b
	}
	rank := len(s)
	return te.Compute("blocked_view", Static(s4[0], cb, s4[2], s4[3], inner), func(i []loopir.Expr) loopir.Expr {
		var c loopir.Expr = i64(0)
		if inner != 1 {
			c = add(mul(i[1], i64(b)), i[4])
		}
		idx := []loopir.Expr{i[0], c, i[2], i[3]}
		return x.At(idx[4-rank:]...)
	}), nil
}

// resizeTargets returns a Resize's constant sizes (input 3) or else its constant scales
// (input 2); both nil when the one it uses is not a constant.
func resizeTargets(n *graph.Node) (sizes []int64, scales []float64) {
	given := func(i int) bool {
		return i < len(n.Inputs) && n.Inputs[i] != nil && (n.Inputs[i].Const == nil || n.Inputs[i].Const.Len() > 0)
	}
	switch {
	case given(3):
		if c := n.Inputs[3].Const; c != nil {
			return c.Int64s(), nil
		}
	case given(2):
		if c := n.Inputs[2].Const; c != nil {
			return nil, c.Float64s()
		}
	}
	return nil, nil
}

// BlockedResizeSupported reports whether a Resize has a kernel on channel-blocked
// storage: a static 4-D input whose constant sizes or scales keep N and C, nearest or
// linear modes without antialias, no axes attribute, the stretch policy, no crop. The
// kernel resizes H and W of [N, C/b, H, W, b] in place, the block copied.
func BlockedResizeSupported(n *graph.Node) bool {
	a, ok := n.Attrs.(*graph.ResizeAttrs)
	if !ok || len(n.Inputs) == 0 || len(n.Outputs) != 1 || len(a.Axes) != 0 || a.Antialias != 0 ||
		a.KeepAspectRatioPolicy != "stretch" || a.CoordinateTransformationMode == "tf_crop_and_resize" ||
		a.Mode != "nearest" && a.Mode != "linear" {
		return false
	}
	s, ok := n.Inputs[0].Type.ConstShape()
	if !ok || len(s) != 4 {
		return false
	}
	sizes, scales := resizeTargets(n)
	switch {
	case len(sizes) == 4:
		return sizes[0] == int64(s[0]) && sizes[1] == int64(s[1])
	case len(scales) == 4:
		return scales[0] == 1 && scales[1] == 1
	}
	return false
}

// blockedResize wraps Resize's definition: on an input stored in channel blocks of b
// (BlockedResizeSupported, the output in the same blocks), the plain definition runs
// on the storage [N, C/b, H, W, b] with sizes [N, C/b, H', W', b] or scales
// [1, 1, sh, sw, 1]: axes 0, 1 and 4 are copied, H and W resized as in NCHW.
func blockedResize(r *Registry) {
	plain := r.compute[graph.OpResize]
	r.compute[graph.OpResize] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
		if !isBlocked(n) {
			return plain(n, in)
		}
		b := n.Inputs[0].Type.Block
		if !BlockedResizeSupported(n) || n.Outputs[0].Type.Block != b {
			return nil, Unsupported("Resize on blocked storage with these attributes or targets")
		}
		in5 := append([]Input{}, in...)
		sizes, scales := resizeTargets(n)
		if sizes != nil {
			in5[3].Const = tensor.FromInt64s(tensor.Int64, tensor.Shape{5}, []int64{sizes[0], sizes[1] / b, sizes[2], sizes[3], b})
		} else {
			in5[2].Const = tensor.FromFloat64s(n.Inputs[2].Const.DType, tensor.Shape{5}, []float64{1, 1, scales[2], scales[3], 1})
		}
		return plain(n, in5)
	}
}

// blockedPools wraps the pooling definitions: an input stored in channel blocks is
// pooled in place (windows over H and W of [N, C/b, H, W, b], the block innermost and
// contiguous); a global pool writes [N, C, 1, 1] plain, or in the input's blocks
// [N, C/b, 1, 1, b] when its output is stored so.
func blockedPools(r *Registry) {
	for _, op := range []graph.Op{graph.OpMaxPool, graph.OpAveragePool, graph.OpGlobalAveragePool, graph.OpGlobalMaxPool} {
		plain := r.compute[op]
		r.compute[op] = func(n *graph.Node, in []Input) ([]*te.Tensor, error) {
			if !isBlocked(n) {
				return plain(n, in)
			}
			return computeBlockedPool(n, in)
		}
	}
}

// BlockedPoolSupported reports whether a pooling node has a blocked kernel: 2-D
// windows without dilation, explicit pads (or VALID; ceil mode too), one output; an
// AveragePool only without count_include_pad.
func BlockedPoolSupported(n *graph.Node) bool {
	switch n.Op {
	case graph.OpGlobalAveragePool, graph.OpGlobalMaxPool:
		return true
	case graph.OpMaxPool, graph.OpAveragePool:
		a, ok := n.Attrs.(*graph.PoolAttrs)
		if !ok || len(n.Outputs) != 1 || len(a.KernelShape) != 2 {
			return false
		}
		w, err := graph.PoolWindow(a)
		if err != nil || w.Mode.Same() || w.Dilations[0] != 1 || w.Dilations[1] != 1 {
			return false
		}
		return n.Op == graph.OpMaxPool || a.CountIncludePad == 0
	}
	return false
}

func computeBlockedPool(n *graph.Node, in []Input) ([]*te.Tensor, error) {
	if !BlockedPoolSupported(n) {
		return nil, Unsupported("%v on blocked storage with these attributes", n.Op)
	}
	x := in[0].T
	e, err := Extents(x)
	if err != nil || len(e) != 5 {
		return nil, Unsupported("blocked pooling of %v", x.Shape)
	}
	nb, cbs, h, w, b := e[0], e[1], e[2], e[3], e[4]
	dt := x.DT
	if n.Op == graph.OpGlobalAveragePool || n.Op == graph.OpGlobalMaxPool {
		ry, rx := te.RAxis("ry", i64(h)), te.RAxis("rx", i64(w))
		isMax := n.Op == graph.OpGlobalMaxPool
		red := te.Compute("gpool", Static(nb, cbs, b), func(i []loopir.Expr) loopir.Expr {
			v := x.At(i[0], i[1], ry.Var, rx.Var, i[2])
			if isMax {
				return te.Max(v, ry, rx)
			}
			return te.Sum(v, ry, rx)
		})
		scale := func(v loopir.Expr) loopir.Expr {
			if isMax {
				return v
			}
			return te.Div(v, loopir.Float(float64(h*w), dt))
		}
		switch ob := n.Outputs[0].Type.Block; ob {
		case 0:
			return []*te.Tensor{te.Compute("gpool_out", Static(nb, cbs*b, 1, 1), func(i []loopir.Expr) loopir.Expr {
				return scale(red.At(i[0], div(i[1], i64(b)), loopir.Bin(loopir.Mod, i[1], i64(b))))
			})}, nil
		case b:
			return []*te.Tensor{te.Compute("gpool_out", Static(nb, cbs, 1, 1, b), func(i []loopir.Expr) loopir.Expr {
				return scale(red.At(i[0], i[1], i[4]))
			})}, nil
		default:
			return nil, Unsupported("global pool from blocks of %d into blocks of %d", b, ob)
		}
	}
	pw, err := graph.PoolWindow(n.Attrs.(*graph.PoolAttrs))
	if err != nil {
		return nil, Unsupported("%v", err)
	}
	k, s := pw.Kernel, pw.Strides
	var p [4]int64 // top, left, bottom, right
	p[0], p[2], _ = pw.StaticPads(0)
	p[1], p[3], _ = pw.StaticPads(1)
	oh, ow := pw.Axis(0, h).Out, pw.Axis(1, w).Out
	if oh <= 0 || ow <= 0 {
		return nil, Unsupported("empty pooling output")
	}
	isMax := n.Op == graph.OpMaxPool
	fill := loopir.Float(0, dt)
	if isMax {
		fill = loopir.Float(-1.0/zero, dt)
	}
	// a padded copy makes every window read unguarded and contiguous along the block; in
	// ceil mode the last window may reach past the end pad, into more of the fill
	ph, pwd := max(h+p[0]+p[2], (oh-1)*s[0]+k[0]), max(w+p[1]+p[3], (ow-1)*s[1]+k[1])
	pad := te.Compute("pool_pad", Static(nb, cbs, ph, pwd, b), func(i []loopir.Expr) loopir.Expr {
		y, xx := sub(i[2], i64(p[0])), sub(i[3], i64(p[1]))
		ok := loopir.Bin(loopir.And, inside(y, i64(h)), inside(xx, i64(w)))
		return te.Select(ok, x.At(i[0], i[1], clampIndex(y, h), clampIndex(xx, w), i[4]), fill)
	})
	ry, rx := te.RAxis("ry", i64(k[0])), te.RAxis("rx", i64(k[1]))
	win := func(i []loopir.Expr) loopir.Expr {
		return pad.At(i[0], i[1], add(mul(i[2], i64(s[0])), ry.Var), add(mul(i[3], i64(s[1])), rx.Var), i[4])
	}
	shape := Static(nb, cbs, oh, ow, b)
	if isMax {
		return []*te.Tensor{te.Compute("pool", shape, func(i []loopir.Expr) loopir.Expr { return te.Max(win(i), ry, rx) })}, nil
	}
	sum := te.Compute("pool_sum", shape, func(i []loopir.Expr) loopir.Expr { return te.Sum(win(i), ry, rx) })
	// the divisor counts the window's positions inside the input (count_include_pad 0)
	return []*te.Tensor{te.Compute("pool", shape, func(i []loopir.Expr) loopir.Expr {
		rows := windowCount(i[2], s[0], k[0], p[0], h)
		cols := windowCount(i[3], s[1], k[1], p[1], w)
		return te.Div(sum.At(i...), te.Cast(dt, mul(rows, cols)))
	})}, nil
}

// windowCount is how many of a window's k positions starting at o·s - pad fall in [0, n).
func windowCount(o loopir.Expr, s, k, pad, n int64) loopir.Expr {
	lo := sub(mul(o, i64(s)), i64(pad))
	first := loopir.Bin(loopir.Max, lo, i64(0))
	last := loopir.Bin(loopir.Min, add(lo, i64(k)), i64(n))
	return sub(last, first)
}
