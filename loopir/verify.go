package loopir

import (
	"errors"
	"fmt"
)

// ErrVerify is wrapped by every verifier finding.
var ErrVerify = errors.New("loopir verification failed")

// Verify checks that texture parameters are valid (checkTexture) and each is either
// read or written by the kernel, never both, and that every Var used is bound (a dim, an enclosing loop variable, or an
// iterator of the enclosing block), that loop variables are not rebound, that every
// buffer accessed is a parameter or allocated in scope, that index counts match buffer
// ranks (or are flat), that blocks bind each iterator exactly once, and that loops bound
// to GPU thread axes form one launch: each axis bound by at most one loop, and no
// parallel (host thread) loop in the same function. Allocations are local or shared, a
// shared one outside every loop bound to a threadIdx axis; a Barrier is outside blocks
// and vector or parallel loops, and every thread of a block reaches it (no enclosing
// condition or loop bound depends on a threadIdx loop).
func Verify(f *PrimFunc) error {
	v := &verifier{f: f, vars: map[*Var]bool{}, bufs: map[*Buffer]bool{}, varying: map[*Var]bool{}}
	if err := v.launch(); err != nil {
		return err
	}
	if err := v.textures(); err != nil {
		return err
	}
	for _, d := range f.Dims {
		v.vars[d] = true
	}
	for _, p := range f.Params {
		v.bufs[p] = true
		for _, e := range p.Shape {
			if err := v.expr(e); err != nil {
				return fmt.Errorf("shape of %s: %w", p.Name, err)
			}
		}
	}
	return v.stmt(f.Body)
}

type verifier struct {
	f    *PrimFunc
	vars map[*Var]bool
	bufs map[*Buffer]bool
	sync syncScope
	// varying holds the variables whose value differs between the threads of a block:
	// loops bound to threadIdx axes and what is derived from them.
	varying map[*Var]bool
}

func (v *verifier) errf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrVerify, v.f.Name, fmt.Sprintf(format, args...))
}

func (v *verifier) access(b *Buffer, idx []Expr) error {
	if !v.bufs[b] {
		return v.errf("buffer %s is neither a parameter nor allocated here", b.Name)
	}
	if len(idx) != len(b.Shape) && (len(idx) != 1 || b.Scope == ScopeTexture) {
		return v.errf("buffer %s of rank %d indexed with %d indices", b.Name, len(b.Shape), len(idx))
	}
	for _, i := range idx {
		if err := v.expr(i); err != nil {
			return err
		}
	}
	return nil
}

func (v *verifier) expr(e Expr) error {
	var err error
	MapExpr(e, func(x Expr) Expr {
		if err != nil {
			return x
		}
		switch x := x.(type) {
		case *Var:
			if !v.vars[x] {
				err = v.errf("variable %s is not bound", x.Name)
			}
		case *Load:
			err = v.access(x.Buf, x.Index)
		case *Address:
			if x.Buf.Scope == ScopeTexture {
				err = v.errf("address of an element of texture %s", x.Buf.Name)
			} else {
				err = v.access(x.Buf, x.Index)
			}
		case *TexRead:
			err = v.texel(x.Buf, x.X, x.Y, x.Lane)
		case *Reduce:
			err = v.errf("reduction left in the loop nest")
		}
		return x
	})
	return err
}

func (v *verifier) bind(x *Var) error {
	if v.vars[x] {
		return v.errf("variable %s is bound twice", x.Name)
	}
	v.vars[x] = true
	return nil
}

func (v *verifier) stmt(s Stmt) error {
	switch s := s.(type) {
	case nil:
		return nil
	case Seq:
		for _, c := range s {
			if err := v.stmt(c); err != nil {
				return err
			}
		}
		return nil
	case *For:
		if err := v.expr(s.Min); err != nil {
			return err
		}
		if err := v.expr(s.Extent); err != nil {
			return err
		}
		if err := v.bind(s.Var); err != nil {
			return err
		}
		defer delete(v.vars, s.Var)
		defer v.enterLoop(s)()
		return v.stmt(s.Body)
	case *Block:
		if len(s.Bindings) != len(s.Iters) {
			return v.errf("block %s has %d iterators and %d bindings", s.Name, len(s.Iters), len(s.Bindings))
		}
		for _, b := range s.Bindings {
			if err := v.expr(b); err != nil {
				return fmt.Errorf("block %s binding: %w", s.Name, err)
			}
		}
		if s.Predicate != nil {
			if err := v.expr(s.Predicate); err != nil {
				return fmt.Errorf("block %s predicate: %w", s.Name, err)
			}
		}
		for _, it := range s.Iters {
			if err := v.bind(it.Var); err != nil {
				return err
			}
		}
		defer v.enterBlock(s)()
		defer func() {
			for _, it := range s.Iters {
				delete(v.vars, it.Var)
			}
		}()
		if err := v.stmt(s.Init); err != nil {
			return err
		}
		return v.stmt(s.Body)
	case *Store:
		if err := v.access(s.Buf, s.Index); err != nil {
			return err
		}
		return v.expr(s.Value)
	case *IfThenElse:
		if err := v.expr(s.Cond); err != nil {
			return err
		}
		defer v.diverge(s.Cond, "condition "+ExprString(s.Cond))()
		if err := v.stmt(s.Then); err != nil {
			return err
		}
		return v.stmt(s.Else)
	case *IntrinCall:
		if s.Intrin == nil || s.Intrin.Desc == nil {
			return v.errf("call of an undeclared intrinsic")
		}
		if want := intrinArity(s.Intrin); len(s.Args) != want {
			return v.errf("intrinsic %s called with %d arguments, its convention takes %d", s.Intrin.Name, len(s.Args), want)
		}
		for _, a := range s.Args {
			if err := v.expr(a); err != nil {
				return fmt.Errorf("intrinsic %s: %w", s.Intrin.Name, err)
			}
		}
		return nil
	case *Allocate:
		for _, e := range s.Buf.Shape {
			if err := v.expr(e); err != nil {
				return err
			}
		}
		if err := v.allocation(s.Buf); err != nil {
			return err
		}
		v.bufs[s.Buf] = true
		defer delete(v.bufs, s.Buf)
		return v.stmt(s.Body)
	case *Barrier:
		return v.barrier()
	case *TexWrite:
		if err := v.texel(s.Buf, s.X, s.Y); err != nil {
			return err
		}
		for _, x := range s.Value {
			if err := v.expr(x); err != nil {
				return err
			}
		}
		return nil
	}
	return v.errf("unknown statement %T", s)
}

// launch checks the loops bound to thread axes: one loop per axis, no parallel loops
// beside them.
func (v *verifier) launch() error {
	var bound [NumThreadAxes]*Var
	var parallel *Var
	var err error
	MapStmt(v.f.Body, func(e Expr) Expr { return e }, func(s Stmt) Stmt {
		l, ok := s.(*For)
		if !ok || err != nil {
			return nil
		}
		if l.Kind == Parallel {
			parallel = l.Var
		}
		if a, ok := l.Kind.Thread(); ok {
			if bound[a] != nil {
				err = v.errf("loops %s and %s are both bound to %v", bound[a].Name, l.Var.Name, a)
			}
			bound[a] = l.Var
		}
		return nil
	})
	if err != nil {
		return err
	}
	if parallel != nil {
		for a, b := range bound {
			if b != nil {
				return v.errf("parallel loop %s in a kernel whose loop %s is bound to %v", parallel.Name, b.Name, ThreadAxis(a))
			}
		}
	}
	return nil
}
