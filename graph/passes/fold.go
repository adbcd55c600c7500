package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// FoldConstants evaluates, on the host, every node whose inputs are all constants
// (Shape and Size need only a static input type) and turns its outputs into constants
// of the Func that held the node. An integer result whose value the types already know
// (shape arithmetic over Shape) becomes a constant when that value is constant, and a
// kiln.ShapeExpr node when it uses symbols (shape folding: the chain that computed it
// is left for dce). Every node's output types are inferred again first (refine), since
// its inputs may have become constants. Subgraphs fold too, with the constants of
// their enclosing Funcs, when their node is reached: then the node is inferred again
// from its folded subgraphs, so an If whose condition folding decided (a rank guard on
// an extent a folded pads chain fixed) gets its branch's types for the nodes after it.
// Nodes with subgraphs, random nodes and host-only nodes (sequences, optionals) are not
// evaluated, and neither is a result larger than both ctx.FoldLimit and the node's
// inputs together. A node reading a tensor taken out of a sequence or optional never
// becomes a ShapeExpr: its extents are that item's, known only at run time.
//
// Folding is bounded per node (ctx.FoldWork) and per run: the operations of all folds
// together (ctx.FoldBudget) and the elements they create (four times the module's
// constant elements, at least 1<<24), since every folded result stays in memory until
// dce; a chain of elementwise ops on a large constant would otherwise copy it once per
// node. Nodes past a bound stay nodes.
func FoldConstants(ctx *Context, m *graph.Module) error {
	if ctx.Eval == nil {
		return nil
	}
	fo := &folder{ctx: ctx, ic: &graph.InferCtx{M: m}, limit: ctx.FoldLimit, work: float64(ctx.FoldBudget)}
	if fo.limit <= 0 {
		fo.limit = 1 << 16
	}
	if fo.work <= 0 {
		fo.work = defaultFoldBudget
	}
	m.Main.Funcs(func(f *graph.Func) {
		for _, c := range f.Consts {
			fo.grow += 4 * int64(c.Const.Len())
		}
	})
	fo.grow = max(fo.grow, 1<<24)
	fo.subst, fo.inputSyms = map[string]graph.Dim{}, map[string]bool{}
	for _, p := range m.Main.Params {
		for _, d := range p.Type.Shape {
			for _, s := range d.Symbols() {
				fo.inputSyms[s] = true
			}
		}
	}
	if err := fo.fold(m.Main); err != nil {
		return err
	}
	fo.substitute(m)
	return nil
}

// defaultFoldBudget is Context.FoldBudget's default: some seconds of the reference
// evaluator.
const defaultFoldBudget = 1 << 32

// folder is one FoldConstants run.
type folder struct {
	ctx   *Context
	ic    *graph.InferCtx
	limit int64   // FoldLimit
	work  float64 // operations the run may still spend
	grow  int64   // elements the run may still create
	// subst maps each fresh symbol that refine found to equal another extent (an
	// output's extent inferred again from folded inputs) to that extent; inputSyms are
	// the symbols of the main function's parameters, which are never substituted
	subst     map[string]graph.Dim
	inputSyms map[string]bool
}

func (fo *folder) fold(f *graph.Func) error {
	kept := f.Nodes[:0:0]
	for _, n := range f.Nodes {
		if err := fo.ctx.stopped(); err != nil {
			return fmt.Errorf("at %v: %w", n, err)
		}
		for _, sub := range n.Subgraphs() {
			if err := fo.fold(sub); err != nil {
				return err
			}
		}
		fo.refine(n)
		outs, err := fo.node(n)
		if err != nil {
			return err
		}
		if outs == nil {
			outs = knownValue(n)
		}
		if outs == nil {
			if t, ok := shapeExpr(n, fo.inputSyms); ok {
				n.Op, n.Inputs, n.Attrs = graph.OpShapeExpr, nil, &graph.ShapeExprAttrs{Value: &t}
			}
			kept = append(kept, n)
			continue
		}
		for i, o := range n.Outputs {
			c := graph.NewConst(o.Name, outs[i])
			o.Type, o.Const, o.Def = c.Type, outs[i], nil
			f.Consts = append(f.Consts, o)
		}
	}
	f.Nodes = kept
	return nil
}

// node returns n's constant outputs, or nil when it does not fold.
func (fo *folder) node(n *graph.Node) ([]*tensor.Tensor, error) {
	ctx, limit := fo.ctx, fo.limit
	info := n.Op.Info()
	if info == nil || info.Flags&(graph.HasSubgraphs|graph.Stochastic|graph.HostOnly) != 0 {
		return nil, nil
	}
	for _, o := range n.Outputs {
		if o.Type.Kind != graph.KindTensor {
			return nil, nil
		}
	}
	if n.Op == graph.OpShape || n.Op == graph.OpSize {
		return foldShape(ctx, n, limit)
	}
	var in []*tensor.Tensor
	inElems := int64(0)
	for _, v := range n.Inputs {
		if v == nil {
			in = append(in, nil)
			continue
		}
		if v.Const == nil {
			return nil, nil
		}
		in = append(in, v.Const)
		inElems += int64(v.Const.Len())
	}
	if len(n.Inputs) == 0 && n.Op != graph.OpConstantOfShape {
		return nil, nil
	}
	cap := max(limit, inElems)
	outElems := int64(0)
	for _, o := range n.Outputs {
		s, ok := o.Type.ConstShape()
		if ok && int64(s.NumElements()) > cap {
			return nil, nil
		}
		if ok {
			outElems += int64(s.NumElements())
		}
	}
	work := foldWork(n, in, inElems, outElems)
	if work > float64(ctx.foldWork()) || work > fo.work || outElems > fo.grow {
		return nil, nil // it runs as a kernel instead, like any other node
	}
	outs, err := ctx.Eval(n, in)
	if err != nil {
		return nil, fmt.Errorf("folding %v: %w", n, err)
	}
	if len(outs) < len(n.Outputs) {
		return nil, fmt.Errorf("BUG: folding %v gave %d results for %d outputs", n, len(outs), len(n.Outputs))
	}
	for i, o := range n.Outputs {
		if outs[i] == nil || int64(outs[i].Len()) > cap {
			return nil, nil
		}
		if !typeFits(o.Type, outs[i]) {
			return nil, fmt.Errorf("BUG: folding %v gave %v%v for output typed %v", n, outs[i].DType, outs[i].Shape, o.Type)
		}
	}
	fo.work -= work
	for _, t := range outs[:len(n.Outputs)] {
		fo.grow -= int64(t.Len())
	}
	return outs[:len(n.Outputs)], nil
}

// defaultFoldWork is Context.FoldWork's default: about a second of the reference
// evaluator's multiply-adds.
const defaultFoldWork = 1 << 28

func (ctx *Context) foldWork() int64 {
	if ctx.FoldWork > 0 {
		return ctx.FoldWork
	}
	return defaultFoldWork
}

// foldWork estimates the operations evaluating n on in takes: a product's output times
// its reduction length, a convolution's output (or a transposed one's input) times the
// weights per output channel, the elements read and written for ops whose pattern is
// at most a reduction, and the input times the output elements for the rest (opaque
// ops, windows, recurrences: a bound, not an estimate).
func foldWork(n *graph.Node, in []*tensor.Tensor, inElems, outElems int64) float64 {
	arg := func(i int) *tensor.Tensor {
		if i < len(in) {
			return in[i]
		}
		return nil
	}
	out, all := float64(outElems), float64(inElems+outElems)
	a, w := arg(0), arg(1)
	switch n.Op {
	case graph.OpMatMul, graph.OpMatMulInteger, graph.OpQLinearMatMul:
		if a != nil && len(a.Shape) > 0 {
			return out * float64(a.Shape[len(a.Shape)-1])
		}
	case graph.OpGemm:
		if at, _ := n.Attrs.(*graph.GemmAttrs); a != nil && len(a.Shape) == 2 && at != nil {
			return out * float64(a.Shape[1-min(max(at.TransA, 0), 1)])
		}
	case graph.OpConv, graph.OpConvInteger:
		if w != nil && len(w.Shape) > 0 && w.Shape[0] > 0 {
			return out * float64(w.Len()/w.Shape[0])
		}
	case graph.OpQLinearConv:
		if w := arg(3); w != nil && len(w.Shape) > 0 && w.Shape[0] > 0 {
			return out * float64(w.Len()/w.Shape[0])
		}
	case graph.OpConvTranspose:
		if a != nil && w != nil && len(w.Shape) > 0 && w.Shape[0] > 0 {
			return float64(a.Len()) * float64(w.Len()/w.Shape[0])
		}
	}
	if info := n.Op.Info(); info != nil && info.Pattern <= graph.CommReduce {
		return all
	}
	return max(float64(inElems), 1) * max(out, 1)
}

// foldShape folds Shape (with start/end) and Size of a statically shaped input from its
// type alone.
func foldShape(ctx *Context, n *graph.Node, limit int64) ([]*tensor.Tensor, error) {
	t := n.Inputs[0].Type
	shape, ok := t.ConstShape()
	if !ok || t.Kind != graph.KindTensor {
		return nil, nil
	}
	if n.Op == graph.OpSize {
		return []*tensor.Tensor{tensor.Scalar(int64(shape.NumElements()))}, nil
	}
	dims := make([]int64, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	lo, hi := 0, len(dims)
	if a, _ := n.Attrs.(*graph.ShapeAttrs); a != nil {
		lo = clampRange(a.Start, len(dims))
		if a.End != math.MinInt64 {
			hi = clampRange(a.End, len(dims))
		}
	}
	hi = max(hi, lo)
	return []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{hi - lo}, slices.Clone(dims[lo:hi]))}, nil
}

func clampRange(v int64, rank int) int {
	if v < 0 {
		v += int64(rank)
	}
	return int(min(max(v, 0), int64(rank)))
}

// typeFits checks a folded tensor against the output's static type.
func typeFits(t graph.Type, v *tensor.Tensor) bool {
	if t.DType != v.DType || (!t.UnknownRank && len(t.Shape) != len(v.Shape)) {
		return false
	}
	for i, d := range t.Shape {
		if x, ok := d.Value(); ok && int(x) != v.Shape[i] {
			return false
		}
	}
	return true
}

// refine infers n's output types again now that inputs may have become constants (a
// Reshape whose shape was computed from Shape nodes): a result with fewer symbolic
// extents, or with known values where the old type had none, replaces the old type. A
// node with subgraphs is refined after its subgraphs have been folded (fold does them
// first): an If whose condition has become known (a
// rank guard on an extent that a folded Pad or Reshape fixed) takes its branch's
// types, and one whose condition is not known merges both branches' types.
//
// Where an output's old extent was a symbol of its own (not an input's) and the new
// type has another extent there, the two are the same run-time value: the symbol is
// recorded for substitute, since values folded earlier (a ShapeExpr made from the old
// extent, a Reshape to it) still name it.
func (fo *folder) refine(n *graph.Node) {
	types, err := graph.InferNode(fo.ic, n)
	if err != nil {
		return
	}
	for i, t := range types {
		old := n.Outputs[i].Type
		if t.Kind != old.Kind || t.DType != old.DType {
			continue
		}
		// fewer symbolic extents, or the same shape with its values now known (a Where
		// whose condition folding decided)
		if symbolic(t) < symbolic(old) || (old.Known == nil && t.Known != nil && t.Equal(old)) {
			n.Outputs[i].Type = t
			fo.learn(old, t)
		}
	}
}

// learn records, per axis, an old extent that is a symbol of its own and differs in the
// refined type t.
func (fo *folder) learn(old, t graph.Type) {
	if old.UnknownRank || t.UnknownRank || len(old.Shape) != len(t.Shape) {
		return
	}
	for k, d := range old.Shape {
		s, ok := d.IsSym()
		if !ok || fo.inputSyms[s] || d.Equal(t.Shape[k]) || slices.Contains(t.Shape[k].Symbols(), s) {
			continue
		}
		if _, seen := fo.subst[s]; !seen {
			fo.subst[s] = t.Shape[k]
		}
	}
}

// maxSubstRounds bounds how often substitute resolves a learned extent that names
// another learned symbol.
const maxSubstRounds = 8

// substitute rewrites every type of m (parameters, constants, node outputs, results of
// every function, and ShapeExpr values) with the learned symbols replaced.
func (fo *folder) substitute(m *graph.Module) {
	if len(fo.subst) == 0 {
		return
	}
	for range maxSubstRounds {
		changed := false
		for s, d := range fo.subst {
			if e := d.Subst(fo.subst); !e.Equal(d) && !slices.Contains(e.Symbols(), s) {
				fo.subst[s], changed = e, true
			}
		}
		if !changed {
			break
		}
	}
	m.SubstSymbolDefs(fo.subst)
	seen := map[*graph.Value]bool{}
	fix := func(v *graph.Value) {
		if v != nil && !seen[v] {
			seen[v] = true
			v.Type = v.Type.Subst(fo.subst)
		}
	}
	m.Main.Funcs(func(f *graph.Func) {
		for _, v := range f.Params {
			fix(v)
		}
		for _, v := range f.Consts {
			fix(v)
		}
		for _, n := range f.Nodes {
			for _, v := range n.Outputs {
				fix(v)
			}
			if a, ok := n.Attrs.(*graph.ShapeExprAttrs); ok && a.Value != nil {
				t := a.Value.Subst(fo.subst)
				a.Value = &t
			}
		}
		for _, v := range f.Results {
			fix(v)
		}
	})
}

// symbolic counts a type's non-constant extents (an unknown rank counts as many).
func symbolic(t graph.Type) int {
	if t.UnknownRank {
		return 1 << 20
	}
	k := 0
	for _, d := range t.Shape {
		if !d.IsConst() {
			k++
		}
	}
	return k
}

// knownValue returns the constant value of a single-output node whose integer result
// the types know entirely (a Gather of a static extent out of a partly symbolic Shape).
func knownValue(n *graph.Node) []*tensor.Tensor {
	if len(n.Outputs) != 1 || n.Op == graph.OpShapeExpr || len(n.Subgraphs()) > 0 {
		return nil
	}
	t := n.Outputs[0].Type
	if !intTensor(t) || graph.CheckShapeExpr(t) != nil {
		return nil
	}
	v, ok := graph.EvalKnown(t, nil)
	if !ok {
		return nil
	}
	return []*tensor.Tensor{v}
}

// shapeExpr returns the value type of a single-output node whose integer result is a
// known expression over the inputs' symbols. A value naming a symbol some node binds at
// run time (NonZero's count, a Slice's run-time bounds) stays a node: a ShapeExpr has
// no operands, so nothing would keep it after that node once fuse-ops moves the node
// to its group's place (Mask R-CNN's mask pasting read a Slice's extent before the
// Slice ran).
func shapeExpr(n *graph.Node, inputSyms map[string]bool) (graph.Type, bool) {
	if len(n.Outputs) != 1 || n.Op == graph.OpShapeExpr || len(n.Subgraphs()) > 0 || !intTensor(n.Outputs[0].Type) || readsItem(n) {
		return graph.Type{}, false
	}
	t, ok := graph.ShapeExprOf(n.Outputs[0].Type)
	if !ok {
		return graph.Type{}, false
	}
	for _, d := range t.Known {
		for _, s := range d.Symbols() {
			if !inputSyms[s] {
				return graph.Type{}, false
			}
		}
	}
	return t, true
}

// readsItem reports whether n reads a tensor taken out of a sequence or an optional:
// its symbolic extents are the item's, bound only from the item itself at run time, so
// the node must stay (and keep the item's producer alive).
func readsItem(n *graph.Node) bool {
	for _, v := range n.Inputs {
		if v == nil || v.Def == nil || v.Type.Kind != graph.KindTensor {
			continue
		}
		if info := v.Def.Op.Info(); info != nil && info.Flags&graph.HostOnly != 0 {
			return true
		}
	}
	return false
}

// intTensor is the cheap half of graph.CheckShapeExpr, which builds an error for every
// other type: only ranked integer tensors can have a known value.
func intTensor(t graph.Type) bool {
	return t.Kind == graph.KindTensor && !t.UnknownRank && t.DType.IsInt()
}
