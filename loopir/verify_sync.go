package loopir

// syncScope is what the verifier knows, at a statement, about the threads of a GPU
// block: the innermost enclosing loop bound to a threadIdx axis, the innermost enclosing
// block, a vector or parallel loop around it, and why the threads of a block may not
// all run it (a condition or loop bound that depends on a threadIdx loop).
type syncScope struct {
	thread    *For
	block     string
	hostLoop  *For
	divergent string
}

// enterLoop records loop l for the statements below it and returns the restore.
func (v *verifier) enterLoop(l *For) func() {
	saved := v.sync
	if a, ok := l.Kind.Thread(); ok && !a.IsBlock() {
		v.sync.thread = l
		v.varying[l.Var] = true
	} else if v.uses(l.Min) || v.uses(l.Extent) {
		v.varying[l.Var] = true
		if v.sync.divergent == "" {
			v.sync.divergent = "the bounds of loop " + l.Var.Name
		}
	}
	if l.Kind == Parallel || l.Kind == Vectorized {
		v.sync.hostLoop = l
	}
	return func() {
		v.sync = saved
		delete(v.varying, l.Var)
	}
}

// enterBlock records block b for the statements below it and returns the restore.
func (v *verifier) enterBlock(b *Block) func() {
	saved := v.sync
	v.sync.block = b.Name
	return func() { v.sync = saved }
}

// diverge marks the statements under a condition as divergent when it depends on a
// threadIdx loop, and returns the restore.
func (v *verifier) diverge(cond Expr, what string) func() {
	saved := v.sync
	if v.sync.divergent == "" && v.uses(cond) {
		v.sync.divergent = what
	}
	return func() { v.sync = saved }
}

// uses reports whether e reads a variable that differs between the threads of a block.
func (v *verifier) uses(e Expr) bool {
	found := false
	MapExpr(e, func(x Expr) Expr {
		if y, ok := x.(*Var); ok && v.varying[y] {
			found = true
		}
		return x
	})
	return found
}

// allocation checks an allocated buffer's scope.
func (v *verifier) allocation(b *Buffer) error {
	switch b.Scope {
	case ScopeLocal:
	case ScopeShared:
		if v.sync.thread != nil {
			a, _ := v.sync.thread.Kind.Thread()
			return v.errf("shared buffer %s is allocated under loop %s bound to %v: it is one buffer per block", b.Name, v.sync.thread.Var.Name, a)
		}
	default:
		return v.errf("buffer %s is allocated in scope %q (want %q or %q)", b.Name, b.Scope, ScopeLocal, ScopeShared)
	}
	return nil
}

// barrier checks that every thread of a block reaches a barrier here.
func (v *verifier) barrier() error {
	switch {
	case v.sync.block != "":
		return v.errf("barrier inside block %s", v.sync.block)
	case v.sync.hostLoop != nil:
		return v.errf("barrier inside %v loop %s", v.sync.hostLoop.Kind, v.sync.hostLoop.Var.Name)
	case v.sync.divergent != "":
		return v.errf("barrier under %s, which depends on a threadIdx loop: not every thread of a block reaches it", v.sync.divergent)
	}
	return nil
}
