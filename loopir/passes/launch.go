package passes

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
)

// ErrLaunch is wrapped by every refusal of a GPU kernel's launch geometry.
var ErrLaunch = errors.New("GPU launch refused")

// DeriveLaunch computes the geometry a GPU kernel runs with from its bound loops (see
// loopir.Bound) and returns the kernel to print with it. A loop bound to a block axis
// gives the grid's extent on that dimension: its own extent, an expression of the
// runtime dims. A loop bound to a thread axis gives the block's extent: a constant, its
// extent when that is one, otherwise its constant upper bound under the enclosing loops
// (a tail that varies from block to block); the loop then runs to that bound and its
// body gets a guard (if v < extent), so the threads past the tail do nothing. A
// dimension no loop is bound to has extent 1.
//
// Refused (ErrLaunch, naming the kernel): a bound loop not starting at 0; a store or
// tensor intrinsic call that does not run under every bound loop (it would run once per
// thread of the axes it is outside of); a local allocation enclosing a bound loop (one
// buffer would be shared by every thread; a shared allocation does enclose them: one
// per block); a thread loop that needs a guard around a barrier (the threads past its
// extent would not reach the barrier).
func DeriveLaunch(f *loopir.PrimFunc) (*loopir.PrimFunc, loopir.Launch, error) {
	d := &launchDeriver{f: f, an: loopir.NewAnalyzer(f.Dims), guard: map[*loopir.Var]loopir.Expr{}}
	for i := range 3 {
		d.launch.Grid[i], d.launch.Block[i] = loopir.Int(1), loopir.Int(1)
	}
	d.walk(f.Body, nil, 0)
	if d.err != nil {
		return nil, loopir.Launch{}, d.err
	}
	for _, w := range d.writes {
		if w != d.nBound {
			return nil, loopir.Launch{}, d.errf("a store runs outside %d of its %d bound loops", d.nBound-w, d.nBound)
		}
	}
	body := loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		l, ok := s.(*loopir.For)
		if !ok {
			return nil
		}
		ext, ok := d.guard[l.Var]
		if !ok {
			return nil
		}
		return &loopir.For{Var: l.Var, Min: l.Min, Extent: ext, Kind: l.Kind, Annotations: l.Annotations,
			Body: &loopir.IfThenElse{Cond: loopir.Bin(loopir.LT, l.Var, l.Extent), Then: l.Body}}
	})
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}, d.launch, nil
}

type launchDeriver struct {
	f      *loopir.PrimFunc
	an     *loopir.Analyzer
	launch loopir.Launch
	nBound int
	writes []int                       // per store or intrinsic call: the bound loops above it
	guard  map[*loopir.Var]loopir.Expr // thread loops that run to a larger constant extent
	err    error
}

func (d *launchDeriver) errf(format string, args ...any) error {
	return fmt.Errorf("%w: kernel %s: %s", ErrLaunch, d.f.Name, fmt.Sprintf(format, args...))
}

// walk visits s under the enclosing loops, bound of which are bound to thread axes.
func (d *launchDeriver) walk(s loopir.Stmt, enclosing []*loopir.For, bound int) {
	if d.err != nil {
		return
	}
	switch s := s.(type) {
	case loopir.Seq:
		for _, c := range s {
			d.walk(c, enclosing, bound)
		}
	case *loopir.For:
		d.an.BindLoop(s.Var, s.Min, s.Extent)
		if a, ok := s.Kind.Thread(); ok {
			d.bind(s, a)
			bound++
		}
		d.walk(s.Body, append(enclosing, s), bound)
	case *loopir.IfThenElse:
		d.walk(s.Then, enclosing, bound)
		d.walk(s.Else, enclosing, bound)
	case *loopir.Allocate:
		loopir.MapStmt(s.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
			if l, ok := x.(*loopir.For); ok && d.err == nil && s.Buf.Scope != loopir.ScopeShared {
				if a, ok := l.Kind.Thread(); ok {
					d.err = d.errf("local buffer %s encloses loop %s bound to %v", s.Buf.Name, l.Var.Name, a)
				}
			}
			return nil
		})
		d.walk(s.Body, enclosing, bound)
	case *loopir.Block:
		d.walk(s.Init, enclosing, bound)
		d.walk(s.Body, enclosing, bound)
	case *loopir.Store, *loopir.IntrinCall, *loopir.TexWrite:
		d.writes = append(d.writes, bound)
	}
}

// bind records the launch extent of loop l bound to axis a.
func (d *launchDeriver) bind(l *loopir.For, a loopir.ThreadAxis) {
	if c, ok := l.Min.(*loopir.IntImm); !ok || c.V != 0 {
		d.err = d.errf("loop %s bound to %v starts at %s, not 0", l.Var.Name, a, loopir.ExprString(l.Min))
		return
	}
	d.nBound++
	ext := d.an.Simplify(l.Extent)
	if a.IsBlock() {
		for _, v := range varsOf(ext) {
			if !d.isDim(v) {
				d.err = d.errf("the extent of loop %s bound to %v depends on %s, not only on the runtime dims", l.Var.Name, a, v.Name)
				return
			}
		}
		d.launch.Grid[a.Dim()] = ext
		return
	}
	if _, ok := ext.(*loopir.IntImm); ok {
		d.launch.Block[a.Dim()] = ext
		return
	}
	b := d.an.Bound(ext)
	if b.Max == math.MaxInt64 || b.Max < 1 {
		d.err = d.errf("the extent %s of loop %s bound to %v has no constant upper bound", loopir.ExprString(ext), l.Var.Name, a)
		return
	}
	if hasBarrier(l.Body) {
		d.err = d.errf("loop %s bound to %v runs %s of %d threads and its body has a barrier, which the threads past its extent would not reach", l.Var.Name, a, loopir.ExprString(ext), b.Max)
		return
	}
	d.launch.Block[a.Dim()] = loopir.Int(b.Max)
	d.guard[l.Var] = loopir.Int(b.Max)
}

func (d *launchDeriver) isDim(v *loopir.Var) bool {
	for _, x := range d.f.Dims {
		if x == v {
			return true
		}
	}
	return false
}

func varsOf(e loopir.Expr) []*loopir.Var {
	var out []*loopir.Var
	loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
		if v, ok := x.(*loopir.Var); ok {
			out = append(out, v)
		}
		return x
	})
	return out
}

// VerifyLaunch checks a kernel's launch against the target's limits: every block extent
// a positive constant, their product (threads per block) at most facts.MaxWorkGroup,
// the shared buffers of constant size and together at most facts.LocalMemBytes, and
// every grid extent an expression a kernel table can evaluate at run time (integer
// constants, the kernel's dims, + - * / % min max). Failures wrap ErrLaunch and name
// the kernel.
func VerifyLaunch(f *loopir.PrimFunc, l loopir.Launch, facts target.GPUFacts) error {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("%w: kernel %s: %s", ErrLaunch, f.Name, fmt.Sprintf(format, args...))
	}
	if facts.MaxWorkGroup < 1 {
		return errf("the target gives no work-group size limit")
	}
	threads := int64(1)
	for i, e := range l.Block {
		c, ok := e.(*loopir.IntImm)
		if !ok || c.V < 1 {
			return errf("block extent %d is %s, not a positive constant", i, loopir.ExprString(e))
		}
		if threads *= c.V; threads > int64(facts.MaxWorkGroup) {
			return errf("%s: %d threads per block, the target allows %d", l, threads, facts.MaxWorkGroup)
		}
	}
	if err := sharedBytes(f, facts); err != nil {
		return errf("%v", err)
	}
	dims := map[*loopir.Var]bool{}
	for _, d := range f.Dims {
		dims[d] = true
	}
	for i, e := range l.Grid {
		if err := launchExpr(e, dims); err != nil {
			return errf("grid extent %d (%s): %v", i, loopir.ExprString(e), err)
		}
	}
	return nil
}

// launchExpr checks that e uses only integer constants, dims and the operators of a
// run-time extent.
func launchExpr(e loopir.Expr, dims map[*loopir.Var]bool) error {
	switch x := e.(type) {
	case *loopir.IntImm:
		return nil
	case *loopir.Var:
		if !dims[x] {
			return fmt.Errorf("%s is not a runtime dim", x.Name)
		}
		return nil
	case *loopir.Binary:
		if x.Op > loopir.Max {
			return fmt.Errorf("operator %v", x.Op)
		}
		if err := launchExpr(x.A, dims); err != nil {
			return err
		}
		return launchExpr(x.B, dims)
	}
	return fmt.Errorf("%T is not a run-time extent", e)
}

// sharedBytes checks the kernel's shared buffers against the local memory of a block.
func sharedBytes(f *loopir.PrimFunc, facts target.GPUFacts) error {
	var total int64
	var names []string
	var err error
	walkStmts(f.Body, func(s loopir.Stmt) {
		a, ok := s.(*loopir.Allocate)
		if !ok || a.Buf.Scope != loopir.ScopeShared || err != nil {
			return
		}
		n, ok := loopir.NewAnalyzer(f.Dims).Simplify(a.Buf.Elements()).(*loopir.IntImm)
		if !ok {
			err = fmt.Errorf("shared buffer %s has no constant size", a.Buf.Name)
			return
		}
		total += n.V * int64(a.Buf.DT.Size())
		names = append(names, a.Buf.Name)
	})
	if err != nil || total == 0 {
		return err
	}
	if total > facts.LocalMemBytes {
		return fmt.Errorf("shared buffers %s take %d bytes of local memory, the target has %d per block", strings.Join(names, ", "), total, facts.LocalMemBytes)
	}
	return nil
}
