package codegen

import (
	"fmt"

	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// hoistNarrowLoads prints, before vectorized loop s, each widening Cast of an 8- or
// 16-bit integer Load that does not depend on the loop (a quantization's zero point
// read as a float or an int32 inside a channel block's lanes) as a constant of the wide
// type, which the body's expressions then name. gcc sizes a loop's vectors by the
// narrowest type in it: one uint8 read in a loop of 16 float lanes makes it vectorize
// with 16-byte vectors (16 uint8, so four vectors of four floats per operation)
// where the loop's float arithmetic would fill one 64-byte vector; hoisted, the loop
// holds no narrow type and takes the wide vectors (an integer convolution's
// requantize–SiLU epilogue: 1.84 → 0.79 ms). Only loads the loop runs on every
// iteration are hoisted (not under a conditional statement, not in an inner loop),
// and only from a loop of a constant, positive trip count, so a hoisted load runs
// only where the loop would have run it. It returns a function that forgets the names
// when the loop has been printed.
func (e *cEmitter) hoistNarrowLoads(s *loopir.For, pad string) func() {
	if c, ok := s.Extent.(*loopir.IntImm); !ok || c.V <= 0 {
		return func() {}
	}
	invariant := loopInvariance(s)
	var keys []string
	visit := func(x loopir.Expr) loopir.Expr {
		c, ok := x.(*loopir.Cast)
		if !ok {
			return x
		}
		ld, ok := c.X.(*loopir.Load)
		if !ok || !narrowInt(ld.Buf.DT) || !c.To.IsFloat() && c.To.Size() <= ld.Buf.DT.Size() || !invariant(ld) {
			return x
		}
		key := loopir.ExprString(c)
		if _, done := e.hoisted[key]; done {
			return x
		}
		text := e.expr(c)
		name := fmt.Sprintf("kiln_hv%d", len(e.hoisted))
		fmt.Fprintf(e.b, "%sconst %s %s = %s;\n", pad, e.ctype(c.To), name, text)
		e.hoisted[key] = name
		keys = append(keys, key)
		return x
	}
	var walk func(st loopir.Stmt)
	walk = func(st loopir.Stmt) {
		switch st := st.(type) {
		case loopir.Seq:
			for _, x := range st {
				walk(x)
			}
		case *loopir.Store:
			for _, i := range st.Index {
				loopir.MapExpr(i, visit)
			}
			loopir.MapExpr(st.Value, visit)
		}
	}
	walk(s.Body)
	return func() {
		for _, k := range keys {
			delete(e.hoisted, k)
		}
	}
}

// narrowInt reports whether dt is an integer type of 8 or 16 bits.
func narrowInt(dt tensor.DType) bool { return dt.IsInt() && dt.Size() <= 2 }

// loopInvariance returns whether an expression inside loop s depends on nothing the
// loop changes: no variable bound inside it (its own included), no buffer written or
// allocated in it, no index check (those are hoisted on their own).
func loopInvariance(s *loopir.For) func(x loopir.Expr) bool {
	bound := map[*loopir.Var]bool{s.Var: true}
	local := map[*loopir.Buffer]bool{}
	loopir.MapStmt(s.Body, func(x loopir.Expr) loopir.Expr { return x }, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.For:
			bound[x.Var] = true
		case *loopir.Allocate:
			local[x.Buf] = true
		case *loopir.Store:
			local[x.Buf] = true
		}
		return nil
	})
	return func(e loopir.Expr) bool {
		ok := true
		loopir.MapExpr(e, func(x loopir.Expr) loopir.Expr {
			switch x := x.(type) {
			case *loopir.Var:
				ok = ok && !bound[x]
			case *loopir.Load:
				ok = ok && !local[x.Buf]
			case *loopir.Call:
				ok = ok && x.Fn != loopir.IndexCheck
			}
			return x
		})
		return ok
	}
}
