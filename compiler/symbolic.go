package compiler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// Symbolic dims: a symbol left unbound by Options.Dims stays in the types; the
// entry function reads its value from the first input whose shape names it (ShapeOf,
// shape.dim), checks that later inputs naming it agree (shape.expect), and keeps it in a
// host register. Extents, byte counts and ShapeExpr values are polynomials over those
// registers, evaluated by shape.eval; kernels take the symbols they use as runtime dims.
// A tensor of a symbolic shape gets a storage of its own, sized at run time.

// errDataDependent: a dim no input's shape determines (NonZero's length, a Loop's
// carried shape): the generic engine cannot size it yet.
var errDataDependent = errors.New("a dim that depends on data")

// bindSymbols emits the prologue that reads every symbol of the parameters' shapes.
func (e *emitter) bindSymbols(params []*graph.Value) {
	for _, p := range params {
		if p.Type.Kind != graph.KindTensor || p.Type.UnknownRank {
			continue
		}
		shape := vm.Reg(-1)
		for k, d := range p.Type.Shape {
			name, ok := d.IsSym()
			if !ok {
				continue
			}
			if shape < 0 {
				shape = e.newReg()
				e.use(e.reg[p])
				e.emit(vm.Instr{Op: vm.ShapeOf, Dst: shape, Args: []vm.Reg{e.reg[p]}})
				e.host[shape] = true
			}
			axis := e.newReg()
			e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: axis, Imm: int64(k)})
			v := e.newReg()
			e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: v, Args: []vm.Reg{shape, axis}, Imm: e.builtin(vm.BuiltinShapeDim)})
			e.host[v] = true
			if old, seen := e.sym[name]; seen {
				chk := e.newReg()
				e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: chk, Args: []vm.Reg{v, old}, Imm: e.builtin(vm.BuiltinShapeExpect)})
				continue
			}
			e.sym[name] = v
		}
	}
}

// bindDerived computes the derived symbols (graph.SymbolDef) that m's types use, and
// those their definitions name, once the input symbols are bound: shape.eval of the
// numerator, then shape.derive. A definition naming a symbol no input binds stays
// unbound (a kernel that needs it then fails to lower, naming it). Unused definitions
// (left by passes that rewrote the nodes) are not computed.
func (e *emitter) bindDerived(m *graph.Module) error {
	defs := m.SymbolDefs()
	if len(defs) == 0 {
		return nil
	}
	needed := map[string]bool{}
	m.Main.Funcs(func(f *graph.Func) {
		note := func(v *graph.Value) {
			if v != nil {
				typeSymbols(v.Type, needed)
			}
		}
		for _, v := range f.Params {
			note(v)
		}
		for _, n := range f.Nodes {
			for _, v := range n.Outputs {
				note(v)
			}
			if a, ok := n.Attrs.(*graph.ShapeExprAttrs); ok && a.Value != nil {
				typeSymbols(*a.Value, needed)
			}
		}
	})
	for i := len(defs) - 1; i >= 0; i-- {
		if needed[defs[i].Name] {
			for _, s := range defs[i].Num.Symbols() {
				needed[s] = true
			}
		}
	}
	e.defs = nil
	for _, d := range defs {
		if needed[d.Name] {
			e.defs = append(e.defs, d)
		}
	}
	return e.bindDefs()
}

// bindDefs computes each derived symbol of e.defs not bound yet whose numerator's
// symbols are.
func (e *emitter) bindDefs() error {
	for _, d := range e.defs {
		if _, bound := e.sym[d.Name]; bound || !e.allBound([]graph.Dim{d.Num}) {
			continue
		}
		num, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{d.Num})
		if err != nil {
			return err
		}
		div, add := e.constInt(d.Div), e.constInt(d.Add)
		for _, a := range []vm.Reg{num, div, add} {
			e.use(a)
		}
		v := e.newReg()
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: v, Args: []vm.Reg{num, div, add}, Imm: e.builtin(vm.BuiltinShapeDerive)})
		e.host[v] = true
		e.sym[d.Name] = v
	}
	return nil
}

// unbindDerivedOf forgets the derived symbols computed from any of names (rebound for a
// sequence item), and those computed from them, so that bindDefs computes them anew.
func (e *emitter) unbindDerivedOf(names map[string]bool) {
	for _, d := range e.defs {
		for _, s := range d.Num.Symbols() {
			if names[s] {
				names[d.Name] = true
				delete(e.sym, d.Name)
				break
			}
		}
	}
}

// checkBroadcasts guards what shape inference took on trust: where an operand's free
// extent meets a different extent that it must equal or broadcast to (graph.
// BroadcastDims keeps one of them; Concat's other axes and a product's reduced extent
// keep the first operand's), the kernel reads the operand as if they were equal, so
// before it runs shape.agree fails the call when they differ (vm.ErrGenericShape; a
// free extent of 1 broadcast included) instead of a wrong answer or a read past the
// operand. The nodes: the Broadcast pattern's (inside a fused node too), MatMul's batch
// axes and reduced extent, Gemm's reduced extent and C, Concat's axes other than its
// own. (Expand over a free extent broadcasts at run time: expandIndex.)
func (e *emitter) checkBroadcasts(n *graph.Node) error {
	nodes := []*graph.Node{n}
	if a, ok := n.Attrs.(*graph.FusedAttrs); ok {
		nodes = a.Body.Nodes
	}
	for _, m := range nodes {
		if len(m.Outputs) == 0 || !ranked(m.Outputs[0]) {
			continue
		}
		out := m.Outputs[0].Type.Shape
		var err error
		switch a := m.Attrs.(type) {
		case *graph.GemmAttrs:
			if len(m.Inputs) >= 2 && ranked(m.Inputs[0]) && ranked(m.Inputs[1]) && len(m.Inputs[0].Type.Shape) == 2 && len(m.Inputs[1].Type.Shape) == 2 {
				ta, tb := 0, 0 // the attributes' truth, as ONNX reads them
				if a.TransA != 0 {
					ta = 1
				}
				if a.TransB != 0 {
					tb = 1
				}
				ka, kb := m.Inputs[0].Type.Shape[1-ta], m.Inputs[1].Type.Shape[tb]
				err = e.agreeDim(m, m.Inputs[1], kb, ka, false)
			}
			if err == nil && len(m.Inputs) == 3 {
				err = e.agreeAligned(m, m.Inputs[2], out, 0)
			}
		case *graph.AxisAttrs:
			if m.Op != graph.OpConcat {
				continue
			}
			for _, v := range m.Inputs {
				if err != nil || !ranked(v) || len(v.Type.Shape) != len(out) {
					continue
				}
				ax := int(a.Axis)
				if ax < 0 {
					ax += len(out)
				}
				for k, d := range v.Type.Shape {
					if k != ax && err == nil {
						err = e.agreeDim(m, v, d, out[k], false)
					}
				}
			}
		default:
			switch {
			case m.Op == graph.OpExpand: // over a free extent it broadcasts at run time
			case m.Op == graph.OpMatMul && len(m.Inputs) == 2:
				x, y := m.Inputs[0], m.Inputs[1]
				for _, v := range m.Inputs {
					if err == nil {
						err = e.agreeAligned(m, v, out, 2)
					}
				}
				if err == nil && ranked(x) && ranked(y) && len(y.Type.Shape) >= 2 && len(x.Type.Shape) >= 1 {
					err = e.agreeDim(m, y, y.Type.Shape[len(y.Type.Shape)-2], x.Type.Shape[len(x.Type.Shape)-1], false)
				}
			case m.Op.Info() != nil && m.Op.Info().Pattern == graph.Broadcast:
				for _, v := range m.Inputs {
					if err == nil {
						err = e.agreeAligned(m, v, out, 0)
					}
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ranked reports a present tensor value of known rank.
func ranked(v *graph.Value) bool {
	return v != nil && v.Type.Kind == graph.KindTensor && !v.Type.UnknownRank
}

// agreeAligned checks v's extents, all but its last tail, against out's aligned to the
// right (numpy broadcasting: an extent of 1 that is static broadcasts).
func (e *emitter) agreeAligned(n *graph.Node, v *graph.Value, out []graph.Dim, tail int) error {
	if !ranked(v) || len(v.Type.Shape) > len(out) || len(v.Type.Shape) < tail {
		return nil
	}
	in := v.Type.Shape
	off := len(out) - len(in)
	for k, d := range in[:len(in)-tail] {
		if err := e.agreeDim(n, v, d, out[off+k], true); err != nil {
			return err
		}
	}
	return nil
}

// agreeDim emits shape.agree(got, want) before node n, naming n and its operand v,
// unless the two are the same expression, both static, got a static 1 that
// broadcasts, or not computable here (a symbol bound later).
func (e *emitter) agreeDim(n *graph.Node, v *graph.Value, got, want graph.Dim, broadcasts bool) error {
	if got.Equal(want) || got.IsConst() && want.IsConst() || !e.allBound([]graph.Dim{got, want}) {
		return nil
	}
	if c, ok := got.Value(); ok && c == 1 && broadcasts {
		return nil
	}
	return e.agree(n, v, got, want)
}

// agree emits shape.agree(got, want) before node n, naming n and its operand v.
func (e *emitter) agree(n *graph.Node, v *graph.Value, got, want graph.Dim) error {
	g, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{got})
	if err != nil {
		return err
	}
	w, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{want})
	if err != nil {
		return err
	}
	e.use(g)
	e.use(w)
	r := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: r, Args: []vm.Reg{g, w}, Imm: e.builtin(vm.BuiltinShapeAgree), Str: fmt.Sprintf("%v: operand %q", n, v.Name)})
	e.host[r] = true
	return nil
}

// typeSymbols adds the symbols of t's extents and known values (its element type's
// too) to into.
func typeSymbols(t graph.Type, into map[string]bool) {
	if t.Elem != nil {
		typeSymbols(*t.Elem, into)
	}
	for _, ds := range [][]graph.Dim{t.Shape, t.Known} {
		for _, d := range ds {
			for _, s := range d.Symbols() {
				into[s] = true
			}
		}
	}
}

// symbolic reports whether a type has an extent that is not a constant.
func symbolicType(t graph.Type) bool {
	if t.Kind != graph.KindTensor || t.UnknownRank {
		return false
	}
	for _, d := range t.Shape {
		if !d.IsConst() {
			return true
		}
	}
	return false
}

// shapeEval emits shape.eval for dims (a tensor of the given element type and shape)
// and returns the host register holding the result.
func (e *emitter) shapeEval(dt tensor.DType, shape []int64, dims []graph.Dim) (vm.Reg, error) {
	var syms []string
	for _, d := range dims {
		syms = append(syms, d.Symbols()...)
	}
	slices.Sort(syms)
	syms = slices.Compact(syms)
	args := []vm.Reg{0}
	index := map[string]int{}
	for i, s := range syms {
		r, ok := e.sym[s]
		if !ok {
			return 0, fmt.Errorf("%w: %q (no input's shape names it)", errDataDependent, s)
		}
		index[s] = i
		args = append(args, r)
	}
	args[0] = e.loadConst(shapeProgram(dt, shape, dims, index))
	for _, a := range args {
		e.use(a)
	}
	r := e.newReg()
	e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: r, Args: args, Imm: e.builtin(vm.BuiltinShapeEval)})
	e.host[r] = true
	return r, nil
}

// shapeProgram encodes dims as a shape.eval program over the symbols at index.
func shapeProgram(dt tensor.DType, shape []int64, dims []graph.Dim, index map[string]int) *tensor.Tensor {
	elems := make([]vm.ShapePoly, len(dims))
	for i, d := range dims {
		c, terms := d.Poly()
		elems[i].C = c
		for _, t := range terms {
			st := vm.ShapeTerm{Coef: t.Coef}
			for _, s := range t.Syms {
				st.Syms = append(st.Syms, index[s])
			}
			elems[i].Terms = append(elems[i].Terms, st)
		}
	}
	return vm.EncodeShapeProgram(dt, shape, elems)
}

// memPlanSite is the mem.plan check the prologue reserves once the symbols are bound
// (vm.BuiltinMemPlan): its program is known when the whole function is emitted.
type memPlanSite struct {
	constIdx int            // the program's slot in the constant table
	call     int            // pc of the CallBuiltin
	index    map[string]int // each symbol's argument position
}

// reserveMemPlan emits the mem.plan call after the symbols' prologue, with a program to
// be filled in by finishMemPlan. Executables without symbols have none: their plan is
// static and checked when they are compiled and loaded.
func (e *emitter) reserveMemPlan() {
	if len(e.sym) == 0 {
		return
	}
	syms := slices.Sorted(maps.Keys(e.sym))
	site := &memPlanSite{index: map[string]int{}}
	prog := e.newReg()
	site.constIdx = e.constant(tensor.Scalar(int64(0))) // a fresh slot, replaced at the end
	e.emit(vm.Instr{Op: vm.LoadConst, Dst: prog, Imm: int64(site.constIdx)})
	args := []vm.Reg{prog}
	for i, s := range syms {
		site.index[s] = i
		args = append(args, e.sym[s])
	}
	chk := e.newReg()
	e.host[chk] = true
	site.call = e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: chk, Args: args, Imm: e.builtin(vm.BuiltinMemPlan)})
	e.memPlan = site
}

// finishMemPlan writes the reserved mem.plan program: for each run-time sized storage
// of the straight-line part, the bytes held when it is allocated (every such storage
// allocated earlier and not yet freed after its last use; the results' storages are
// never freed) and its own bytes. kept holds the results' storages.
func (e *emitter) finishMemPlan(kept map[*root]bool) {
	site := e.memPlan
	if site == nil {
		return
	}
	// a storage sized by a symbol bound later (a value-dependent shape, hostshape.go)
	// is checked when it is allocated
	var dyn []*root
	for _, rt := range e.dyn {
		early := true
		for _, s := range rt.bytes.Symbols() {
			_, ok := site.index[s]
			early = early && ok
		}
		if early {
			dyn = append(dyn, rt)
		}
	}
	held := make([]graph.Dim, len(dyn))
	sizes := make([]graph.Dim, len(dyn))
	names := make([]string, len(dyn))
	for i, rt := range dyn {
		sum := graph.Const(0)
		for _, o := range dyn {
			if o.alloc <= rt.alloc && (kept[o] || o.lastUse >= rt.alloc) {
				sum = sum.Add(o.bytes)
			}
		}
		held[i], sizes[i], names[i] = sum, rt.bytes, rt.what
	}
	e.consts[site.constIdx] = shapeProgram(tensor.Int64, []int64{2, int64(len(dyn))}, append(held, sizes...), site.index)
	e.code[site.call].Str = strings.Join(names, "\n")
}

// allocDynamic allocates a tensor of a symbolic shape in a storage of its own.
func (e *emitter) allocDynamic(dt tensor.DType, dims []graph.Dim, what string, dev int) (vm.Reg, error) {
	shape, err := e.shapeEval(tensor.Int64, []int64{int64(len(dims))}, dims)
	if err != nil {
		return 0, err
	}
	size := graph.Const(int64(dt.Size()))
	for _, d := range dims {
		size = size.Mul(d)
	}
	bytes, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{size})
	if err != nil {
		return 0, err
	}
	s, r := e.newReg(), e.newReg()
	e.use(bytes)
	pc := e.emit(vm.Instr{Op: vm.AllocStorage, Dst: s, Args: []vm.Reg{bytes}, Device: dev, Str: what})
	e.dev[r] = dev
	e.use(shape)
	e.emit(vm.Instr{Op: vm.AllocTensorReg, Dst: r, Args: []vm.Reg{s, shape}, DType: dt, Str: what})
	if e.depth == 0 { // freed after its last use (killDynamic); inside control flow at the end
		rt := &root{alloc: pc, dev: dev, lastUse: pc + 1, storage: s, bytes: size, what: what}
		e.dyn = append(e.dyn, rt)
		e.rootOf[r] = []*root{rt}
	}
	return r, nil
}

// killDynamic inserts, after the last use of each run-time sized tensor of the
// straight-line part (its views and moves included, extended to the end of a loop that
// reads it), a KillRegister of its storage, which returns the memory to the VM's pool
// so that later tensors of the same call reuse it. Relative jumps are adjusted for the
// inserted instructions, and so are the planned allocations' positions. The results'
// storages stay until the call ends. A kill inside a
// branch not taken does not run: that storage is freed when the call ends.
func (e *emitter) killDynamic(results []vm.Reg) {
	kept := map[*root]bool{} // the results' storages: the call's end frees them
	for _, r := range results {
		for _, rt := range e.rootOf[r] {
			kept[rt] = true
		}
	}
	e.finishMemPlan(kept)
	if len(e.dyn) == 0 {
		return
	}
	after := map[int][]vm.Reg{} // old pc → storages dead after it
	for _, rt := range e.dyn {
		if kept[rt] {
			continue
		}
		after[rt.lastUse] = append(after[rt.lastUse], rt.storage)
	}
	newPC := make([]int, len(e.code)+1)
	var code []vm.Instr
	for pc, in := range e.code {
		newPC[pc] = len(code)
		code = append(code, in)
		for _, s := range after[pc] {
			code = append(code, vm.Instr{Op: vm.KillRegister, Args: []vm.Reg{s}})
		}
	}
	newPC[len(e.code)] = len(code)
	// a jump lands before the kills of the instruction ahead of its target: leaving a
	// loop frees what the loop read (their kills follow its back edge)
	land := func(t int) int {
		if t == 0 {
			return 0
		}
		return newPC[t-1] + 1
	}
	for pc, in := range e.code {
		if in.Op == vm.If || in.Op == vm.Goto {
			code[newPC[pc]].Imm = int64(land(pc+int(in.Imm)) - newPC[pc])
		}
	}
	for _, rt := range e.roots {
		rt.alloc, rt.lastUse = newPC[rt.alloc], newPC[rt.lastUse]
	}
	e.code = code
}

// lowerShapeExpr evaluates a kiln.ShapeExpr on the host.
func (e *emitter) lowerShapeExpr(n *graph.Node) error {
	t := n.Attrs.(*graph.ShapeExprAttrs).Value
	shape, _ := t.ConstShape()
	r, err := e.shapeEval(t.DType, int64Shape(shape), t.Known)
	if err != nil {
		return fmt.Errorf("%v: %w", n, err)
	}
	e.reg[n.Outputs[0]] = r
	return nil
}

func int64Shape(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// extents are a value's kernel extents: constants, or expressions over one Var per
// symbol shared by every placeholder of the kernel being built (vars).
func extents(t graph.Type, vars map[string]*loopir.Var) ([]loopir.Expr, error) {
	if !symbolicType(t) {
		shape, err := kernels.PhysicalShape(t)
		if err != nil {
			return nil, err
		}
		out := make([]loopir.Expr, len(shape))
		for i, d := range shape {
			out[i] = loopir.Int(d)
		}
		return out, nil
	}
	if t.Block != 0 {
		return nil, fmt.Errorf("type %v: a channel-blocked layout needs static extents", t)
	}
	out := make([]loopir.Expr, len(t.Shape))
	for i, d := range t.Shape {
		out[i] = dimExpr(d, vars)
	}
	return out, nil
}

// dimExpr turns a polynomial dim into a loopir expression over vars.
func dimExpr(d graph.Dim, vars map[string]*loopir.Var) loopir.Expr {
	c, terms := d.Poly()
	var x loopir.Expr = loopir.Int(c)
	for _, t := range terms {
		var m loopir.Expr = loopir.Int(t.Coef)
		for _, s := range t.Syms {
			v, ok := vars[s]
			if !ok {
				v = te.Dim(s)
				vars[s] = v
			}
			m = loopir.Bin(loopir.Mul, m, v)
		}
		x = loopir.Bin(loopir.Add, x, m)
	}
	return x
}

// checkSliceEnds guards a Slice whose ends are symbolic (a causal mask sliced to seq):
// shape inference took each such end to lie within its static dim, so the entry checks
// it at run time (shape.at_most) and a longer input is an ErrInput, not a wrong shape.
func (e *emitter) checkSliceEnds(n *graph.Node) error {
	ends := graph.SymbolicSliceEnds(n)
	if n.Op != graph.OpSlice || ends == nil {
		return nil
	}
	x := e.c.resolve(n.Inputs[0]).Type
	axes := make([]int64, len(ends))
	for i := range axes {
		axes[i] = int64(i)
	}
	if n.Input(3) != nil {
		a, ok := graph.ConstInt64s(n, 3)
		if !ok || len(a) != len(ends) {
			return nil
		}
		axes = a
	}
	for i, end := range ends {
		ax := axes[i]
		if ax < 0 {
			ax += int64(len(x.Shape))
		}
		if end.IsConst() || ax < 0 || ax >= int64(len(x.Shape)) {
			continue
		}
		limit, ok := x.Shape[ax].Value()
		if !ok {
			continue
		}
		got, err := e.shapeEval(tensor.Int64, nil, []graph.Dim{end})
		if err != nil {
			return fmt.Errorf("%v: %w", n, err)
		}
		lim := e.newReg()
		e.emit(vm.Instr{Op: vm.LoadConstInt, Dst: lim, Imm: limit})
		chk := e.newReg()
		e.emit(vm.Instr{Op: vm.CallBuiltin, Dst: chk, Args: []vm.Reg{got, lim}, Imm: e.builtin(vm.BuiltinShapeAtMost)})
	}
	return nil
}
