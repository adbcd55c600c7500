package te

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// ErrLower is wrapped by lowering errors (a definition that cannot become a loop nest).
var ErrLower = errors.New("cannot lower tensor expression")

// Lower builds the naive loop nest computing outputs from inputs: one loop nest and one
// Block per computation, in dependency order. Computations that are neither inputs nor
// outputs get local buffers. Parameters are inputs then outputs.
func Lower(name string, inputs, outputs []*Tensor) (*loopir.PrimFunc, error) {
	isInput := map[*Tensor]bool{}
	for _, t := range inputs {
		if !t.IsPlaceholder() {
			return nil, fmt.Errorf("%w: input %s is a computation", ErrLower, t.Name)
		}
		isInput[t] = true
	}
	var order []*Tensor
	state := map[*Tensor]int{} // 1 visiting, 2 done
	var visit func(t *Tensor) error
	visit = func(t *Tensor) error {
		switch state[t] {
		case 1:
			return fmt.Errorf("%w: cycle through %s", ErrLower, t.Name)
		case 2:
			return nil
		}
		if t.IsPlaceholder() {
			if !isInput[t] {
				return fmt.Errorf("%w: placeholder %s is not among the inputs", ErrLower, t.Name)
			}
			state[t] = 2
			return nil
		}
		state[t] = 1
		for _, dep := range reads(t.body) {
			if err := visit(dep); err != nil {
				return err
			}
		}
		state[t] = 2
		order = append(order, t)
		if t.arg != nil { // both tensors of a pair come from one block
			for _, o := range []*Tensor{t.arg.index, t.arg.value} {
				if state[o] != 2 {
					state[o] = 2
					order = append(order, o)
				}
			}
		}
		return nil
	}
	isOutput := map[*Tensor]bool{}
	for _, t := range outputs {
		if t.IsPlaceholder() {
			return nil, fmt.Errorf("%w: output %s is a placeholder", ErrLower, t.Name)
		}
		isOutput[t] = true
		if err := visit(t); err != nil {
			return nil, err
		}
	}
	f := &loopir.PrimFunc{Name: name}
	for _, t := range append(append([]*Tensor{}, inputs...), outputs...) {
		f.Params = append(f.Params, t.buf)
	}
	seen := map[*loopir.Var]bool{}
	for _, t := range append(append([]*Tensor{}, inputs...), order...) {
		for _, e := range t.Shape {
			for _, v := range freeVars(e) {
				if !seen[v] {
					seen[v] = true
					f.Dims = append(f.Dims, v)
				}
			}
		}
	}
	// block names must be unique within a function (schedules find blocks by name):
	// a second computation of one name (two Adds fused into one kernel) gets a suffix
	names := map[string]bool{}
	for _, t := range inputs {
		names[t.Name] = true
	}
	for _, t := range order {
		base := t.Name
		for k := 1; names[t.Name]; k++ {
			t.Name = fmt.Sprintf("%s_%d", base, k)
		}
		t.buf.Name = t.Name
		names[t.Name] = true
	}
	var stmts loopir.Seq
	var locals []*loopir.Buffer
	for _, t := range order {
		var s loopir.Stmt
		switch {
		case t.arg != nil && t == t.arg.index:
			s = lowerArg(t.arg)
		case t.arg != nil:
			// the value of a pair: written by the index's block
		default:
			var err error
			if s, err = lowerCompute(t); err != nil {
				return nil, err
			}
		}
		if s != nil {
			stmts = append(stmts, s)
		}
		if !isOutput[t] {
			t.buf.Scope = "local"
			locals = append(locals, t.buf)
		}
	}
	var body loopir.Stmt = stmts
	for i := len(locals) - 1; i >= 0; i-- {
		body = &loopir.Allocate{Buf: locals[i], Body: body}
	}
	f.Body = body
	return f, nil
}

// lowerCompute builds loops over the tensor's axes (and reduction axes) around its block.
func lowerCompute(t *Tensor) (loopir.Stmt, error) {
	idx := make([]loopir.Expr, len(t.axes))
	blk := &loopir.Block{Name: t.Name}
	loops := make([]*loopir.For, 0, len(t.axes))
	for k, ax := range t.axes {
		lv := loopir.NewVar(fmt.Sprintf("%s_l%d", t.Name, k))
		idx[k] = ax
		blk.Iters = append(blk.Iters, loopir.IterVar{Var: ax, Extent: t.Shape[k], Kind: loopir.Spatial})
		blk.Bindings = append(blk.Bindings, lv)
		loops = append(loops, &loopir.For{Var: lv, Min: loopir.Int(0), Extent: t.Shape[k]})
	}
	body := t.body
	if r, ok := body.(*loopir.Reduce); ok {
		for k, ax := range r.Axes {
			lv := loopir.NewVar(fmt.Sprintf("%s_r%d", t.Name, k))
			blk.Iters = append(blk.Iters, ax)
			blk.Bindings = append(blk.Bindings, lv)
			loops = append(loops, &loopir.For{Var: lv, Min: loopir.Int(0), Extent: ax.Extent})
		}
		if hasReduce(r.Source) {
			return nil, fmt.Errorf("%w: %s: nested reduction", ErrLower, t.Name)
		}
		blk.Init = &loopir.Store{Buf: t.buf, Index: idx, Value: r.Comb.Identity(t.DT)}
		blk.Body = &loopir.Store{Buf: t.buf, Index: idx, Value: r.Comb.Combine(&loopir.Load{Buf: t.buf, Index: idx}, r.Source)}
		body = r.Source
	} else {
		if hasReduce(body) {
			return nil, fmt.Errorf("%w: %s: a reduction must be the whole compute body", ErrLower, t.Name)
		}
		blk.Body = &loopir.Store{Buf: t.buf, Index: idx, Value: body}
	}
	for _, dep := range reads(body) {
		blk.Reads = append(blk.Reads, wholeRegion(dep.buf))
	}
	w := loopir.Region{Buf: t.buf}
	for _, i := range idx {
		w.Ranges = append(w.Ranges, [2]loopir.Expr{i, loopir.Int(1)})
	}
	blk.Writes = []loopir.Region{w}
	var s loopir.Stmt = blk
	for k := len(loops) - 1; k >= 0; k-- {
		loops[k].Body = s
		s = loops[k]
	}
	return s, nil
}

func wholeRegion(b *loopir.Buffer) loopir.Region {
	r := loopir.Region{Buf: b}
	for _, e := range b.Shape {
		r.Ranges = append(r.Ranges, [2]loopir.Expr{loopir.Int(0), e})
	}
	return r
}

// reads lists the tensors an expression loads from, in first-use order.
func reads(e loopir.Expr) []*Tensor {
	var out []*Tensor
	seen := map[*Tensor]bool{}
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if l, ok := x.(*loopir.Load); ok {
			t, ok := l.Buf.Producer.(*Tensor)
			if !ok {
				panic(fmt.Sprintf("BUG: buffer %s was not made by te", l.Buf.Name))
			}
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
		return x
	})
	return out
}

func hasReduce(e loopir.Expr) bool {
	found := false
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if _, ok := x.(*loopir.Reduce); ok {
			found = true
		}
		return x
	})
	return found
}

func freeVars(e loopir.Expr) []*loopir.Var {
	var out []*loopir.Var
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, ok := x.(*loopir.Var); ok {
			out = append(out, v)
		}
		return x
	})
	return out
}

// Inputs lists the placeholders the outputs read, directly or through other
// computations, in first-use order: the parameters a kernel computing them needs.
func Inputs(outputs ...*Tensor) []*Tensor {
	var out []*Tensor
	seen := map[*Tensor]bool{}
	var visit func(t *Tensor)
	visit = func(t *Tensor) {
		if seen[t] {
			return
		}
		seen[t] = true
		if t.IsPlaceholder() {
			out = append(out, t)
			return
		}
		for _, dep := range reads(t.body) {
			visit(dep)
		}
	}
	for _, t := range outputs {
		visit(t)
	}
	return out
}
