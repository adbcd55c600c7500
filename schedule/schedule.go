package schedule

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// ErrSchedule is wrapped by every primitive failure.
var ErrSchedule = errors.New("schedule primitive failed")

// LoopRV names a loop of the schedule.
type LoopRV string

// BlockRV names a block of the schedule.
type BlockRV string

// Schedule is a PrimFunc under transformation plus the trace of what was applied.
type Schedule struct {
	f      *loopir.PrimFunc
	loops  map[LoopRV]*loopir.Var // a loop is identified by its loop variable
	blocks map[BlockRV]string
	trace  *Trace
	next   int
}

// New starts a schedule on f (which it does not modify).
func New(f *loopir.PrimFunc) *Schedule {
	cp := *f
	return &Schedule{f: &cp, loops: map[LoopRV]*loopir.Var{}, blocks: map[BlockRV]string{}, trace: &Trace{}}
}

// Func is the current function.
func (s *Schedule) Func() *loopir.PrimFunc { return s.f }

// Trace is the record of applied primitives.
func (s *Schedule) Trace() *Trace { return s.trace }

func (s *Schedule) errf(prim, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrSchedule, prim, fmt.Sprintf(format, args...))
}

func (s *Schedule) newLoop(v *loopir.Var) LoopRV {
	rv := LoopRV(fmt.Sprintf("l%d", s.next))
	s.next++
	s.loops[rv] = v
	return rv
}

// GetBlock finds a block by name.
func (s *Schedule) GetBlock(name string) (BlockRV, error) {
	if findBlock(s.f.Body, name) == nil {
		return "", s.errf("get_block", "no block %q in %s", name, s.f.Name)
	}
	rv := BlockRV(fmt.Sprintf("b%d", s.next))
	s.next++
	s.blocks[rv] = name
	s.trace.add("get_block", nil, []string{name}, nil, []string{string(rv)})
	return rv, nil
}

// GetLoops returns the loops enclosing a block, outermost first.
func (s *Schedule) GetLoops(b BlockRV) ([]LoopRV, error) {
	name, ok := s.blocks[b]
	if !ok {
		return nil, s.errf("get_loops", "unknown block %s", b)
	}
	path := loopsAbove(s.f.Body, name)
	out := make([]LoopRV, len(path))
	names := make([]string, len(path))
	for i, f := range path {
		out[i] = s.newLoop(f.Var)
		names[i] = string(out[i])
	}
	s.trace.add("get_loops", []string{string(b)}, nil, nil, names)
	return out, nil
}

// loop resolves a LoopRV to its current For node.
func (s *Schedule) loop(prim string, l LoopRV) (*loopir.For, error) {
	v, ok := s.loops[l]
	if !ok {
		return nil, s.errf(prim, "unknown loop %s", l)
	}
	f := findLoop(s.f.Body, v)
	if f == nil {
		return nil, s.errf(prim, "loop %s no longer exists", l)
	}
	return f, nil
}

func findBlock(st loopir.Stmt, name string) *loopir.Block {
	var found *loopir.Block
	walk(st, func(x loopir.Stmt) {
		if b, ok := x.(*loopir.Block); ok && b.Name == name {
			found = b
		}
	})
	return found
}

func findLoop(st loopir.Stmt, v *loopir.Var) *loopir.For {
	var found *loopir.For
	walk(st, func(x loopir.Stmt) {
		if f, ok := x.(*loopir.For); ok && f.Var == v {
			found = f
		}
	})
	return found
}

// loopsAbove returns the For nodes on the path from the root to the named block.
func loopsAbove(st loopir.Stmt, name string) []*loopir.For {
	var path, result []*loopir.For
	var rec func(loopir.Stmt) bool
	rec = func(x loopir.Stmt) bool {
		switch x := x.(type) {
		case loopir.Seq:
			for _, c := range x {
				if rec(c) {
					return true
				}
			}
		case *loopir.For:
			path = append(path, x)
			if rec(x.Body) {
				return true
			}
			path = path[:len(path)-1]
		case *loopir.IfThenElse:
			return rec(x.Then) || rec(x.Else)
		case *loopir.Allocate:
			return rec(x.Body)
		case *loopir.Block:
			if x.Name == name {
				result = append([]*loopir.For{}, path...)
				return true
			}
		}
		return false
	}
	rec(st)
	return result
}

func walk(st loopir.Stmt, f func(loopir.Stmt)) {
	loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		f(x)
		return nil
	})
}

// replaceLoop rebuilds the body with the loop of variable v replaced by repl(loop).
func (s *Schedule) replaceLoop(v *loopir.Var, repl func(*loopir.For) loopir.Stmt) {
	s.f.Body = loopir.MapStmt(s.f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(x loopir.Stmt) loopir.Stmt {
		if f, ok := x.(*loopir.For); ok && f.Var == v {
			return repl(f)
		}
		return nil
	})
}

// substituteIn replaces vars in every expression of st.
func substituteIn(st loopir.Stmt, m map[*loopir.Var]loopir.Expr) loopir.Stmt {
	return loopir.MapStmt(st, func(e loopir.Expr) loopir.Expr {
		if v, ok := e.(*loopir.Var); ok {
			if r, ok := m[v]; ok {
				return r
			}
		}
		return e
	}, nil)
}

// Extent returns a loop's extent when it is a constant (a query: not recorded in the
// trace, since replay reaches the same answer on the same function).
func (s *Schedule) Extent(l LoopRV) (int64, bool) {
	f, err := s.loop("extent", l)
	if err != nil {
		return 0, false
	}
	c, ok := loopir.NewAnalyzer(s.f.Dims).Simplify(f.Extent).(*loopir.IntImm)
	if !ok {
		return 0, false
	}
	return c.V, true
}

// BlockName is the name of the block b names (a query: not recorded).
func (s *Schedule) BlockName(b BlockRV) string { return s.blocks[b] }

// HasBlock reports whether a block of that name exists (a query: not recorded).
func (s *Schedule) HasBlock(name string) bool { return findBlock(s.f.Body, name) != nil }

// BlockNames lists the function's blocks in program order (rules that schedule every
// block of a definition walk this list).
func (s *Schedule) BlockNames() []string {
	var out []string
	walk(s.f.Body, func(x loopir.Stmt) {
		if b, ok := x.(*loopir.Block); ok {
			out = append(out, b.Name)
		}
	})
	return out
}

// DrivesReduction reports whether a loop drives a reduction iterator of a block below it
// (such a loop can be neither parallel nor fused with spatial loops above it).
func (s *Schedule) DrivesReduction(l LoopRV) (bool, error) {
	f, err := s.loop("drives-reduction", l)
	if err != nil {
		return false, err
	}
	return drivesReduction(f.Body, f.Var), nil
}
