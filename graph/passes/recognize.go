package passes

import (
	"fmt"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// Recognize rewrites decomposed subgraphs into the single ops they compute, in every
// Func:
//   - LayerNorm over the last axis as PyTorch exports it below opset 17:
//     d = x − ReduceMean(x); y = d / Sqrt(ReduceMean(d² or d·d) + ε), optionally ·γ then
//     +β (constant 1-D of the last extent) → LayerNormalization(x, γ or ones, β){axis=-1,
//     epsilon=ε};
//   - GELU, erf form 0.5·x·(1 + Erf(x/√2 or x·(1/√2))) in any association and operand
//     order → Gelu; tanh form 0.5·x·(1 + Tanh(√(2/π)·(x + 0.044715·x³))), the cube as
//     Mul chains or Pow(x, 3) → Gelu{approximate="tanh"};
//   - softmax: e = Exp(x − ReduceMax(x)) or Exp(x); y = e / ReduceSum(e), over one axis
//     with keepdims → Softmax{axis} (graph Softmax always has opset-13 single-axis
//     semantics: the loader rewrote older forms, so the module's opset does not matter);
//   - the BERT attention mask: y = (1 − Cast(m){to=f32 or f64})·K or K·(1 − ...), the 1 a
//     constant of ones (scalar, or of a shape that does not broadcast the Cast's output)
//     and K a one-element constant → kiln.AttentionMask(m){value=K, to}, for a mask m of
//     any bool, integer, f32 or f64 dtype; the 1 must be exactly 1 and K exactly a float32
//     value, so that the op computes what the chain does for every mask value;
//   - HardSwish as x·Clip(x + 3, 0, 6) / 6 or ·(1/6), operands in either order →
//     HardSwish (x·clamp(x/6 + 1/2, 0, 1): a multiply where the chain divides).
//
// A pattern matches on the dataflow only: constants are compared by value (relative
// tolerance 1e-6 unless said otherwise), every intermediate value is read only by the
// pattern itself (as often as the pattern reads it; readers that dce would remove do not
// count) and is no Func result, the input is f32 or f64 (the attention mask's is its
// mask), and the pattern's output has the input's type (the attention mask's has its
// mask's shape and the Cast's dtype). The new node takes the name of the pattern's last
// node and produces its output Value, so readers need no rewiring; the rest of the
// pattern is left for dce.
func Recognize(_ *Context, m *graph.Module) error {
	if !hasAnchors(m) {
		return nil
	}
	return newMatchState(m).rewriteAll(m, matchLayerNorm, matchGelu, matchSoftmax, matchAttentionMask, matchHardSwish)
}

// matcher proposes the rewrite of a pattern ending at a node, or nil.
type matcher func(*matchState, *graph.Node) *rewrite

// rewriteAll visits every live node of every Func in order and applies the first
// matcher's rewrite whose pattern is closed.
func (st *matchState) rewriteAll(m *graph.Module, matchers ...matcher) error {
	var err error
	m.Main.Funcs(func(f *graph.Func) {
		for i := 0; i < len(f.Nodes) && err == nil; i++ {
			n := f.Nodes[i]
			if !st.live[n] {
				continue
			}
			for _, match := range matchers {
				if r := match(st, n); r != nil && st.closed(r) {
					err = st.apply(r)
					break
				}
			}
		}
	})
	return err
}

// hasAnchors reports a node where a pattern can end (every pattern ends in a Div or a
// Mul), so that a module without one costs one scan.
func hasAnchors(m *graph.Module) bool {
	found := false
	m.Main.Funcs(func(f *graph.Func) {
		for _, n := range f.Nodes {
			found = found || n.Op == graph.OpDiv || n.Op == graph.OpMul
		}
	})
	return found
}

// rewrite is one match: the pattern's nodes (final among them, in no particular order)
// and what the node that replaces final is made of.
type rewrite struct {
	nodes  []*graph.Node
	final  *graph.Node
	op     graph.Op
	attrs  any
	inputs []*graph.Value
	consts []*graph.Value // new constants the inputs read
	name   string         // the new node's name when not final's (the operator it stands for)
}

// matchState holds the facts matching needs, kept current as rewrites are applied.
type matchState struct {
	results map[*graph.Value]bool
	live    map[*graph.Node]bool
	fn      map[*graph.Node]*graph.Func    // the Func holding each node
	pos     map[*graph.Node]int            // each node's index in its Func's Nodes
	uses    map[*graph.Value]int           // reads by live nodes
	readers map[*graph.Value][]*graph.Node // readers, dead ones dropped lazily (liveReaders)
	names   *freshNames                    // value names in use
}

// newMatchState finds the live nodes (those whose outputs reach a result, as dce would
// keep them) and counts the reads of each value by live nodes.
func newMatchState(m *graph.Module) *matchState {
	l := newLiveness(true)
	l.fn(m.Main)
	st := &matchState{results: resultSet(m), live: l.live, fn: map[*graph.Node]*graph.Func{}, pos: map[*graph.Node]int{},
		uses: map[*graph.Value]int{}, readers: map[*graph.Value][]*graph.Node{}, names: moduleNames(m)}
	m.Main.Funcs(func(f *graph.Func) {
		for i, n := range f.Nodes {
			st.fn[n], st.pos[n] = f, i
			if st.live[n] {
				st.read(n, 1)
			}
		}
	})
	return st
}

// read counts (delta 1) or uncounts (-1) n's reads of its inputs. An uncounted node is
// dead already (apply), and liveReaders drops it from the reader lists when they are
// next looked at, so that a value with many readers costs no scan per removal.
func (st *matchState) read(n *graph.Node, delta int) {
	for _, v := range n.Inputs {
		if v == nil {
			continue
		}
		st.uses[v] += delta
		if delta > 0 {
			st.readers[v] = append(st.readers[v], n)
		}
	}
}

// liveReaders returns v's live readers, once per read.
func (st *matchState) liveReaders(v *graph.Value) []*graph.Node {
	rs := slices.DeleteFunc(st.readers[v], func(r *graph.Node) bool { return !st.live[r] })
	st.readers[v] = rs
	return rs
}

// closed reports whether every intermediate value of r (an output of a pattern node
// other than the final one) is read by pattern nodes only, as often as they read it, and
// is not a result, and whether the whole pattern lies in one Func.
func (st *matchState) closed(r *rewrite) bool {
	reads := map[*graph.Value]int{}
	seen := map[*graph.Node]bool{}
	for _, n := range r.nodes {
		if seen[n] || !st.live[n] || st.fn[n] != st.fn[r.final] {
			return false // a node twice in the list would count its reads twice
		}
		seen[n] = true
		for _, v := range n.Inputs {
			reads[v]++
		}
	}
	if !seen[r.final] {
		return false
	}
	for _, n := range r.nodes {
		if n == r.final {
			continue
		}
		for _, o := range n.Outputs {
			if st.results[o] || st.uses[o] != reads[o] {
				return false
			}
		}
	}
	return true
}

// apply replaces r.final in its Func by the new node (final's name unless the rewrite gives one, same output Values)
// and forgets the pattern's other nodes, which nobody reads any more.
func (st *matchState) apply(r *rewrite) error {
	f := st.fn[r.final]
	i, ok := st.pos[r.final]
	if !ok || i >= len(f.Nodes) || f.Nodes[i] != r.final {
		return fmt.Errorf("BUG: recognized %v is not a node of @%s", r.final, f.Name)
	}
	name := r.final.Name
	if r.name != "" {
		name = r.name
	}
	n := &graph.Node{Op: r.op, Name: name, Inputs: r.inputs, Outputs: r.final.Outputs, Attrs: r.attrs}
	for _, o := range n.Outputs {
		o.Def = n
	}
	f.Nodes[i] = n
	f.Consts = append(f.Consts, r.consts...)
	for _, p := range r.nodes {
		st.read(p, -1)
		st.live[p] = false
	}
	st.live[n], st.fn[n], st.pos[n] = true, f, i
	st.read(n, 1)
	return nil
}

// newConst makes a constant named after base, with a name no value of the module has.
func (st *matchState) newConst(base string, t *tensor.Tensor) *graph.Value {
	return graph.NewConst(st.names.fresh(base), t)
}

// matchLayerNorm anchors at the Div of d / Sqrt(var + ε) and extends over ·γ and +β.
func matchLayerNorm(st *matchState, div *graph.Node) *rewrite {
	if div.Op != graph.OpDiv || len(div.Inputs) != 2 {
		return nil
	}
	sub, sqrt := st.def(div.Inputs[0], graph.OpSub), st.def(div.Inputs[1], graph.OpSqrt)
	if sub == nil || sqrt == nil {
		return nil
	}
	x, d := sub.Inputs[0], div.Inputs[0]
	mean := st.def(sub.Inputs[1], graph.OpReduceMean)
	if !recFloat(x) || mean == nil || mean.Inputs[0] != x || !recLastAxis(mean, x) {
		return nil
	}
	add := st.def(sqrt.Inputs[0], graph.OpAdd)
	if add == nil {
		return nil
	}
	v, eps, ok := recConstOperand(add)
	vmean := st.def(v, graph.OpReduceMean)
	if !ok || eps < 0 || vmean == nil || !recLastAxis(vmean, x) {
		return nil
	}
	sq := vmean.Inputs[0].Def
	if sq == nil || !st.isSquareOf(sq, d) {
		return nil
	}
	r := &rewrite{nodes: []*graph.Node{mean, sub, sq, vmean, add, sqrt, div}, op: graph.OpLayerNormalization}
	last, _ := x.Type.Shape[len(x.Type.Shape)-1].Value()
	mul, gamma := st.affine(div.Outputs[0], graph.OpMul, x, last)
	if mul != nil {
		r.nodes = append(r.nodes, mul)
	}
	plus, beta := st.affine(r.nodes[len(r.nodes)-1].Outputs[0], graph.OpAdd, x, last)
	if plus != nil {
		r.nodes = append(r.nodes, plus)
	}
	r.final = r.nodes[len(r.nodes)-1]
	if !r.final.Outputs[0].Type.Equal(x.Type) {
		return nil
	}
	scale := gamma
	if scale == nil {
		ones := make([]float64, last)
		for i := range ones {
			ones[i] = 1
		}
		scale = st.newConst(r.final.Outputs[0].Name+"_ln_scale", tensor.FromFloat64s(x.Type.DType, tensor.Shape{int(last)}, ones))
		r.consts = append(r.consts, scale)
	}
	r.inputs = []*graph.Value{x, scale}
	if beta != nil {
		r.inputs = append(r.inputs, beta)
	}
	a := graph.OpLayerNormalization.NewAttrs().(*graph.LayerNormAttrs)
	a.Axis, a.Epsilon = -1, float32(eps)
	r.attrs = a
	return r
}

// matchGelu anchors at the outermost Mul of 0.5·x·(1 + Erf(...) or Tanh(...)).
func matchGelu(st *matchState, n *graph.Node) *rewrite {
	if n.Op != graph.OpMul {
		return nil
	}
	factors, nodes := st.mulFactors(n.Outputs[0], true)
	if len(factors) != 3 {
		return nil
	}
	for h, f := range factors {
		if c, ok := recScalar(f); !ok || !recNear(c, 0.5) {
			continue
		}
		rest := slices.Delete(slices.Clone(factors), h, h+1)
		for k := range 2 {
			x, sum := rest[k], rest[1-k]
			add := st.def(sum, graph.OpAdd)
			if add == nil || !recFloat(x) || !n.Outputs[0].Type.Equal(x.Type) {
				continue
			}
			t, one, ok := recConstOperand(add)
			if !ok || !recNear(one, 1) {
				continue
			}
			approx, inner := "none", st.erfOf(t, x)
			if inner == nil {
				approx, inner = "tanh", st.tanhOf(t, x)
			}
			if inner == nil {
				continue
			}
			a := graph.OpGelu.NewAttrs().(*graph.GeluAttrs)
			a.Approximate = approx
			return &rewrite{nodes: slices.Concat(nodes, []*graph.Node{add}, inner), final: n, op: graph.OpGelu, attrs: a, inputs: []*graph.Value{x}}
		}
	}
	return nil
}

// matchSoftmax anchors at the Div of e / ReduceSum(e), e = Exp(x − ReduceMax(x)) or Exp(x).
func matchSoftmax(st *matchState, div *graph.Node) *rewrite {
	if div.Op != graph.OpDiv || len(div.Inputs) != 2 {
		return nil
	}
	e := div.Inputs[0]
	exp, sum := st.def(e, graph.OpExp), st.def(div.Inputs[1], graph.OpReduceSum)
	if exp == nil || sum == nil || sum.Inputs[0] != e {
		return nil
	}
	x := exp.Inputs[0]
	nodes := []*graph.Node{exp, sum, div}
	if sub := st.def(x, graph.OpSub); sub != nil && sub.Inputs[1] != nil && sub.Inputs[1].Def != nil && sub.Inputs[1].Def.Op == graph.OpReduceMax {
		// x − ReduceMax(x) must be over the same axis; another axis stays as it is
		rmax := st.def(sub.Inputs[1], graph.OpReduceMax)
		if rmax == nil || rmax.Inputs[0] != sub.Inputs[0] {
			return nil
		}
		ax1, ok1 := recAxis(rmax, sub.Inputs[0])
		ax2, ok2 := recAxis(sum, sub.Inputs[0])
		if !ok1 || !ok2 || ax1 != ax2 {
			return nil
		}
		x = sub.Inputs[0]
		nodes = append(nodes, sub, rmax)
	}
	axis, ok := recAxis(sum, x)
	if !ok || !recFloat(x) || !div.Outputs[0].Type.Equal(x.Type) {
		return nil
	}
	if axis == int64(x.Type.Rank()-1) {
		axis = -1
	}
	a := graph.OpSoftmax.NewAttrs().(*graph.SoftmaxAttrs)
	a.Axis = axis
	return &rewrite{nodes: nodes, final: div, op: graph.OpSoftmax, attrs: a, inputs: []*graph.Value{x}}
}

// matchAttentionMask anchors at the Mul of (1 − Cast(m))·K, either operand order.
func matchAttentionMask(st *matchState, mul *graph.Node) *rewrite {
	if mul.Op != graph.OpMul || len(mul.Inputs) != 2 {
		return nil
	}
	for k := range 2 {
		sub := st.def(mul.Inputs[k], graph.OpSub)
		scale, ok := recScalar(mul.Inputs[1-k])
		if sub == nil || !ok || len(sub.Inputs) != 2 {
			continue
		}
		cast := st.def(sub.Inputs[1], graph.OpCast)
		if cast == nil || !recAllOnes(sub.Inputs[0]) {
			continue
		}
		// the result has the Cast's type (no constant broadcasts the mask up), both
		// constants its dtype, and K is a float32 value, as the attribute holds it
		m, c := cast.Inputs[0], cast.Outputs[0].Type
		to := tensor.DType(cast.Attrs.(*graph.CastAttrs).To)
		if to != tensor.Float32 && to != tensor.Float64 || m == nil || !recMask(m) || c.UnknownRank ||
			!mul.Outputs[0].Type.Equal(c) || sub.Inputs[0].Const.DType != to ||
			mul.Inputs[1-k].Const.DType != to || float64(float32(scale)) != scale {
			continue
		}
		a := graph.OpAttentionMask.NewAttrs().(*graph.AttentionMaskAttrs)
		a.Value, a.To = float32(scale), int64(to)
		return &rewrite{nodes: []*graph.Node{cast, sub, mul}, final: mul, op: graph.OpAttentionMask, attrs: a, inputs: []*graph.Value{m}}
	}
	return nil
}
