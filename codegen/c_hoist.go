package codegen

import (
	"fmt"
	"strings"

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
		key := e.hoistKey(c)
		if _, done := e.hoisted[key]; done {
			return x
		}
		text := e.expr(c)
		name := fmt.Sprintf("kiln_hv%d", e.nHoisted) // sibling loops print theirs in one scope
		e.nHoisted++
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

// maxSplitLanes bounds the vectorized loops splitNarrowLanes splits: their temporaries
// live on the stack.
const maxSplitLanes = 256

// splitNarrowLanes prints vectorized loop s, a single store of a constant number of
// lanes, as up to three SIMD loops when it mixes 8- or 16-bit values read or written
// per lane with wider arithmetic over too few lanes to fill a 64-byte vector of the
// narrow type: a channel block's 16 or 32 lanes of a quantized convolution's epilogue
// (requantization, activations, a requantized residual, all in float) that stores
// uint8 or reads a uint8 skip connection. gcc sizes the loop's vectors by the narrow
// type, and its float arithmetic then runs in 16- or 32-byte vectors. Split, the
// first loop widens the per-lane narrow reads into temporaries, the second computes in
// the wide type only (full vectors) into a temporary when the store is narrow, the
// third narrows it into the store. The loads and the store are the original loop's,
// in the same lanes; only the order of independent lanes changes. It reports whether
// it printed the loop.
func (e *cEmitter) splitNarrowLanes(s *loopir.For, depth int) bool {
	c, ok := s.Extent.(*loopir.IntImm)
	st, isStore := s.Body.(*loopir.Store)
	if !ok || c.V <= 0 || c.V > maxSplitLanes || !isStore || e.opts.BoundsCheck {
		return false
	}
	v := e.ident(s.Var, s.Var.Name) // the keys below print the lane variable
	invariant := loopInvariance(s)
	var widen []*loopir.Cast // per-lane widening casts of narrow loads, once each
	seen := map[string]bool{}
	narrowest := 0
	loopir.MapExpr(st.Value, func(x loopir.Expr) loopir.Expr {
		cast, ok := x.(*loopir.Cast)
		if !ok {
			return x
		}
		ld, ok := cast.X.(*loopir.Load)
		if !ok || !narrowInt(ld.Buf.DT) || cast.To.Size() <= ld.Buf.DT.Size() && !cast.To.IsFloat() || invariant(ld) {
			return x
		}
		key := e.hoistKey(cast)
		if seen[key] {
			return x
		}
		if _, done := e.hoisted[key]; done {
			return x
		}
		seen[key] = true
		widen = append(widen, cast)
		if narrowest == 0 || ld.Buf.DT.Size() < narrowest {
			narrowest = ld.Buf.DT.Size()
		}
		return x
	})
	var narrowed loopir.Expr // the wide value a narrow store converts
	if out, ok := st.Value.(*loopir.Cast); ok && narrowInt(st.Buf.DT) && out.To == st.Buf.DT && (out.X.DType().IsFloat() || out.X.DType().Size() > st.Buf.DT.Size()) {
		narrowed = out.X
		if narrowest == 0 || st.Buf.DT.Size() < narrowest {
			narrowest = st.Buf.DT.Size()
		}
	}
	if narrowest == 0 || int64(narrowest)*c.V >= 64 || narrowed == nil && len(widen) == 0 {
		return false
	}
	pad := strings.Repeat("  ", depth)
	lane := fmt.Sprintf("(%s - %s)", v, e.expr(s.Min))
	header := func() {
		end := loopir.Bin(loopir.Add, s.Min, s.Extent)
		fmt.Fprintf(e.b, "%s  #pragma omp simd\n%s  for (i64 %s = %s; %s < %s; ++%s) {\n", pad, pad, v, e.expr(s.Min), v, e.expr(end), v)
	}
	fmt.Fprintf(e.b, "%s{\n", pad)
	forget := e.inside(s)
	defer forget()
	var keys []string
	for i, cast := range widen {
		fmt.Fprintf(e.b, "%s  %s kiln_lw%d_%d[%d] __attribute__((aligned(64)));\n", pad, e.ctype(cast.To), depth, i, c.V)
	}
	if len(widen) > 0 {
		header()
		for i, cast := range widen {
			fmt.Fprintf(e.b, "%s    kiln_lw%d_%d[%s] = %s;\n", pad, depth, i, lane, e.expr(cast))
		}
		fmt.Fprintf(e.b, "%s  }\n", pad)
		for i, cast := range widen {
			key := e.hoistKey(cast)
			e.hoisted[key] = fmt.Sprintf("kiln_lw%d_%d[%s]", depth, i, lane)
			keys = append(keys, key)
		}
	}
	defer func() {
		for _, k := range keys {
			delete(e.hoisted, k)
		}
	}()
	if narrowed == nil {
		header()
		fmt.Fprintf(e.b, "%s    %s[%s] = %s;\n", pad, e.ident(st.Buf, st.Buf.Name), e.index(st.Buf, st.Index), e.expr(st.Value))
		fmt.Fprintf(e.b, "%s  }\n%s}\n", pad, pad)
		return true
	}
	fmt.Fprintf(e.b, "%s  %s kiln_lo%d[%d] __attribute__((aligned(64)));\n", pad, e.ctype(narrowed.DType()), depth, c.V)
	header()
	fmt.Fprintf(e.b, "%s    kiln_lo%d[%s] = %s;\n", pad, depth, lane, e.expr(narrowed))
	fmt.Fprintf(e.b, "%s  }\n", pad)
	header()
	fmt.Fprintf(e.b, "%s    %s[%s] = ((%s)(kiln_lo%d[%s]));\n", pad, e.ident(st.Buf, st.Buf.Name), e.index(st.Buf, st.Index), e.ctype(st.Buf.DT), depth, lane)
	fmt.Fprintf(e.b, "%s  }\n%s}\n", pad, pad)
	return true
}

// hoistKey identifies an expression printed once before a loop (e.hoisted): loopir's
// text of it with every buffer and bound variable named by its C identifier. loopir's
// own text names buffers by their names, and two buffers may share one (a fused
// kernel's zero points, each its op's "in2"); the C identifiers are unique. (Not the C
// text itself: a load's printed form depends on where it is printed, inside or before
// a loop whose range was checked.)
func (e *cEmitter) hoistKey(x loopir.Expr) string {
	return loopir.ExprString(loopir.MapExpr(x, func(y loopir.Expr) loopir.Expr {
		switch y := y.(type) {
		case *loopir.Load:
			b := *y.Buf
			b.Name = e.ident(y.Buf, y.Buf.Name)
			return &loopir.Load{Buf: &b, Index: y.Index}
		case *loopir.Var:
			if id, ok := e.names[y]; ok {
				return loopir.NewVar(id)
			}
		}
		return y
	}))
}

// hoistedName is the name x was hoisted under, if it was.
func (e *cEmitter) hoistedName(x loopir.Expr) (string, bool) {
	if len(e.hoisted) == 0 {
		return "", false
	}
	name, ok := e.hoisted[e.hoistKey(x)]
	return name, ok
}
