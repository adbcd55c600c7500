package passes

import (
	"errors"
	"fmt"

	"github.com/kilnrt/kiln/loopir"
)

// ErrTexture is wrapped by every refusal of a kernel's texture accesses: a store to a
// texture that is not a whole texel written by one thread.
var ErrTexture = errors.New("texture access refused")

// FlattenTextures turns the accesses of texture parameters (loopir.ScopeTexture) into
// texel accesses: a Load becomes the TexRead of its texel (loopir.TexelOf) and lane; a
// lane loop, a loop over [0, 4) that is not bound to a thread axis and whose body is
// one Store (under a guard that does not depend on the lane, at most) to a texture at lane index the loop variable (and texel indices that do
// not depend on it), becomes one TexWrite of the four lanes, the store's value at each
// lane. Any other store to a texture is refused (ErrTexture and ErrLaunch, naming the
// kernel): an image write is a whole texel, so one thread writes all four lanes. A
// kernel without texture parameters is returned as it is.
func FlattenTextures(f *loopir.PrimFunc) (*loopir.PrimFunc, error) {
	tex := false
	for _, p := range f.Params {
		tex = tex || p.Scope == loopir.ScopeTexture
	}
	if !tex {
		return f, nil
	}
	reads := func(e loopir.Expr) loopir.Expr {
		if l, ok := e.(*loopir.Load); ok && l.Buf.Scope == loopir.ScopeTexture {
			x, y, lane := loopir.TexelOf(l.Buf, l.Index)
			return &loopir.TexRead{Buf: l.Buf, X: x, Y: y, Lane: lane}
		}
		return e
	}
	// stores to textures, in order, until a lane loop takes them
	var stores []*loopir.Store
	pending := map[*loopir.Store]bool{}
	body := loopir.MapStmt(f.Body, reads, func(s loopir.Stmt) loopir.Stmt {
		switch s := s.(type) {
		case *loopir.For:
			if w, st := laneWrite(s); w != nil {
				delete(pending, st)
				return w
			}
		case *loopir.Store:
			if s.Buf.Scope == loopir.ScopeTexture {
				stores = append(stores, s)
				pending[s] = true
			}
		}
		return nil
	})
	for _, s := range stores {
		if pending[s] {
			return nil, fmt.Errorf("%w: %w: kernel %s: store %s%s is not in a lane loop (one thread writes the four lanes of a texel)",
				ErrLaunch, ErrTexture, f.Name, s.Buf.Name, exprText(s.Index))
		}
	}
	return &loopir.PrimFunc{Name: f.Name, Params: f.Params, Dims: f.Dims, Body: body, NoContract: f.NoContract}, nil
}

// laneWrite is the TexWrite of lane loop l (under the guard of the store when it has
// one that does not depend on the lane), nil when l is not one.
func laneWrite(l *loopir.For) (loopir.Stmt, *loopir.Store) {
	if g, ok := l.Body.(*loopir.IfThenElse); ok && g.Else == nil && !loopir.Uses(g.Cond, l.Var) {
		inner := *l
		inner.Body = g.Then
		if w, st := laneWrite(&inner); w != nil {
			return &loopir.IfThenElse{Cond: g.Cond, Then: w}, st
		}
		return nil, nil
	}
	st, ok := l.Body.(*loopir.Store)
	if !ok || st.Buf.Scope != loopir.ScopeTexture || len(st.Index) != 5 {
		return nil, nil
	}
	if _, bound := l.Kind.Thread(); bound || l.Kind == loopir.Parallel {
		return nil, nil
	}
	if lo, ok := l.Min.(*loopir.IntImm); !ok || lo.V != 0 {
		return nil, nil
	}
	if n, ok := l.Extent.(*loopir.IntImm); !ok || n.V != loopir.TexelLanes {
		return nil, nil
	}
	if v, ok := st.Index[4].(*loopir.Var); !ok || v != l.Var {
		return nil, nil
	}
	for _, i := range st.Index[:4] {
		if loopir.Uses(i, l.Var) {
			return nil, nil
		}
	}
	x, y, _ := loopir.TexelOf(st.Buf, st.Index)
	w := &loopir.TexWrite{Buf: st.Buf, X: x, Y: y}
	for k := range w.Value {
		w.Value[k] = loopir.Substitute(st.Value, map[*loopir.Var]loopir.Expr{l.Var: loopir.Int(int64(k))})
	}
	return w, st
}

func exprText(idx []loopir.Expr) string {
	s := "["
	for i, x := range idx {
		if i > 0 {
			s += ", "
		}
		s += loopir.ExprString(x)
	}
	return s + "]"
}
