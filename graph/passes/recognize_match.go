package passes

import (
	"math"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// The matching helpers of Recognize. They look at single nodes and values; whether the
// intermediates of a whole pattern are read only by it is matchState.closed's job.

// def returns v's producer when it is a live single-output node with op.
func (st *matchState) def(v *graph.Value, op graph.Op) *graph.Node {
	if v == nil || v.Def == nil || v.Def.Op != op || len(v.Def.Outputs) != 1 || !st.live[v.Def] {
		return nil
	}
	return v.Def
}

// single: v is produced by a live node, read exactly once and no result.
func (st *matchState) single(v *graph.Value) bool {
	return v.Def != nil && st.live[v.Def] && st.uses[v] == 1 && !st.results[v]
}

// mulFactors flattens a product: v's Mul (when root, or when v is read only once) into
// the factors of both operands, and Pow(a, 2 or 3) read once into 2 or 3 factors a. It
// returns the factors and the nodes it expanded. A value read more than once (the
// pattern's input) is a factor, never expanded.
//
// No pattern has more than maxMulFactors factors, so the walk stops after expanding that
// many nodes and returns more factors than any pattern takes: a long chain of products
// costs a few steps per node asking, not the chain's length.
func (st *matchState) mulFactors(v *graph.Value, root bool) ([]*graph.Value, []*graph.Node) {
	p := &product{}
	st.expand(p, v, root)
	if p.over {
		return make([]*graph.Value, maxMulFactors+1), nil
	}
	return p.factors, p.nodes
}

// maxMulFactors is the most factors a pattern's product has (the tanh GELU's cube term).
const maxMulFactors = 4

type product struct {
	factors  []*graph.Value
	nodes    []*graph.Node
	expanded int
	over     bool // more nodes than maxMulFactors were expanded
}

func (st *matchState) expand(p *product, v *graph.Value, root bool) {
	if p.over {
		return
	}
	if v == nil || !root && !st.single(v) {
		p.factors = append(p.factors, v)
		return
	}
	n := st.def(v, graph.OpMul)
	pow := st.def(v, graph.OpPow)
	e, ok := 0.0, false
	if pow != nil {
		e, ok = recScalar(pow.Inputs[1])
	}
	if n == nil && !(ok && (e == 2 || e == 3)) {
		p.factors = append(p.factors, v)
		return
	}
	if p.expanded++; p.expanded > maxMulFactors {
		p.over = true
		return
	}
	if n != nil {
		st.expand(p, n.Inputs[0], false)
		st.expand(p, n.Inputs[1], false)
		p.nodes = append(p.nodes, n)
		return
	}
	p.factors = append(p.factors, slices.Repeat([]*graph.Value{pow.Inputs[0]}, int(e))...)
	p.nodes = append(p.nodes, pow)
}

// isSquareOf: sq is Pow(d, 2) or Mul(d, d).
func (st *matchState) isSquareOf(sq *graph.Node, d *graph.Value) bool {
	if len(sq.Outputs) != 1 || !st.live[sq] || len(sq.Inputs) != 2 || sq.Inputs[0] != d {
		return false
	}
	switch sq.Op {
	case graph.OpPow:
		e, ok := recScalar(sq.Inputs[1])
		return ok && recNear(e, 2)
	case graph.OpMul:
		return sq.Inputs[1] == d
	}
	return false
}

// affine returns y's only reader when it is op(y, p) or op(p, y) with p a constant of x's
// dtype and shape [last], and p; nil when there is none.
func (st *matchState) affine(y *graph.Value, op graph.Op, x *graph.Value, last int64) (*graph.Node, *graph.Value) {
	if !st.single(y) || len(st.liveReaders(y)) != 1 {
		return nil, nil
	}
	n := st.readers[y][0]
	if n.Op != op || len(n.Inputs) != 2 || len(n.Outputs) != 1 || !st.live[n] {
		return nil, nil
	}
	p := n.Inputs[0]
	if p == y {
		p = n.Inputs[1]
	}
	if p == y || p == nil || p.Const == nil || p.Const.DType != x.Type.DType || !p.Const.Shape.Equal(tensor.Shape{int(last)}) {
		return nil, nil
	}
	return n, p
}

// erfOf matches t = Erf(x/√2) or Erf(x·(1/√2)) and returns its nodes.
func (st *matchState) erfOf(t, x *graph.Value) []*graph.Node {
	erf := st.def(t, graph.OpErf)
	if erf == nil {
		return nil
	}
	u := erf.Inputs[0]
	if div := st.def(u, graph.OpDiv); div != nil {
		if c, ok := recScalar(div.Inputs[1]); ok && div.Inputs[0] == x && recNear(c, math.Sqrt2) {
			return []*graph.Node{erf, div}
		}
		return nil
	}
	fs, nodes := st.mulFactors(u, true)
	if len(nodes) == 0 || len(fs) != 2 {
		return nil
	}
	for k := range 2 {
		if c, ok := recScalar(fs[k]); ok && fs[1-k] == x && recNear(c, 1/math.Sqrt2) {
			return append(nodes, erf)
		}
	}
	return nil
}

// tanhOf matches t = Tanh(√(2/π)·(x + 0.044715·x³)) and returns its nodes.
func (st *matchState) tanhOf(t, x *graph.Value) []*graph.Node {
	th := st.def(t, graph.OpTanh)
	if th == nil {
		return nil
	}
	fs, nodes := st.mulFactors(th.Inputs[0], true)
	if len(fs) != 2 {
		return nil
	}
	for k := range 2 {
		c, ok := recScalar(fs[k])
		add := st.def(fs[1-k], graph.OpAdd)
		if !ok || !recNear(c, math.Sqrt(2/math.Pi)) || add == nil {
			continue
		}
		for j := range 2 {
			if add.Inputs[j] != x {
				continue
			}
			cube, cn := st.mulFactors(add.Inputs[1-j], true)
			if isCubeTerm(cube, x) {
				return slices.Concat([]*graph.Node{th, add}, nodes, cn)
			}
		}
	}
	return nil
}

// isCubeTerm: the factors are 0.044715 and x three times.
func isCubeTerm(fs []*graph.Value, x *graph.Value) bool {
	if len(fs) != 4 {
		return false
	}
	consts := 0
	for _, f := range fs {
		switch c, ok := recScalar(f); {
		case ok && recNear(c, 0.044715):
			consts++
		case f != x:
			return false
		}
	}
	return consts == 1
}

// recConstOperand splits a binary node into its non-constant operand and the value of
// its one-element constant operand (either order).
func recConstOperand(n *graph.Node) (*graph.Value, float64, bool) {
	if len(n.Inputs) != 2 {
		return nil, 0, false
	}
	for k := 1; k >= 0; k-- {
		if c, ok := recScalar(n.Inputs[k]); ok {
			return n.Inputs[1-k], c, n.Inputs[1-k] != nil && n.Inputs[1-k].Const == nil
		}
	}
	return nil, 0, false
}

// recScalar reads a one-element numeric constant.
func recScalar(v *graph.Value) (float64, bool) {
	if v == nil || v.Const == nil || v.Const.Len() != 1 || !v.Const.DType.IsNumeric() {
		return 0, false
	}
	return v.Const.Float64s()[0], true
}

// recAllOnes: v is a numeric constant whose elements are all exactly 1.
func recAllOnes(v *graph.Value) bool {
	if v == nil || v.Const == nil || v.Const.Len() == 0 || !v.Const.DType.IsNumeric() {
		return false
	}
	for _, x := range v.Const.Float64s() {
		if x != 1 {
			return false
		}
	}
	return true
}

// recMask: m is a tensor of a dtype an attention mask may have (bool, integer, f32, f64).
func recMask(m *graph.Value) bool {
	dt := m.Type.DType
	return m.Type.Kind == graph.KindTensor && (dt == tensor.Bool || dt.IsInt() || dt == tensor.Float32 || dt == tensor.Float64)
}

// recNear: a equals want within 1e-6 relative.
func recNear(a, want float64) bool { return math.Abs(a-want) <= 1e-6*math.Abs(want) }

// recFloat: x is a ranked f32 or f64 tensor.
func recFloat(x *graph.Value) bool {
	if x == nil {
		return false
	}
	t := x.Type
	return t.Kind == graph.KindTensor && !t.UnknownRank && (t.DType == tensor.Float32 || t.DType == tensor.Float64)
}

// recAxis returns the one axis (normalized to x's rank) that the keepdims reduction n
// reduces, read from its constant axes input.
func recAxis(n *graph.Node, x *graph.Value) (int64, bool) {
	a, ok := n.Attrs.(*graph.ReduceAttrs)
	axes := n.ConstInput(1)
	rank := int64(x.Type.Rank())
	if !ok || a.KeepDims != 1 || axes == nil || axes.Len() != 1 || !axes.DType.IsInt() || rank < 1 {
		return 0, false
	}
	ax := axes.Int64s()[0]
	if ax < 0 {
		ax += rank
	}
	return ax, ax >= 0 && ax < rank
}

// recLastAxis: n reduces x over its last axis only, keeping it, and that extent is static.
func recLastAxis(n *graph.Node, x *graph.Value) bool {
	ax, ok := recAxis(n, x)
	if !ok || ax != int64(x.Type.Rank()-1) {
		return false
	}
	_, static := x.Type.Shape[ax].Value()
	return static
}
