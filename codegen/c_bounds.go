package codegen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/loopir"
)

// StatusOutOfBounds is what a bounds-checked C kernel (COptions.BoundsCheck) returns when
// one of its accesses fell outside a buffer, after writing the buffer's number and the
// element offset of the first such access to the words 1 and 2 of its context. Buffers
// are numbered as the kernel's parameters (inputs, then outputs), then its local
// allocations in the order they appear in the source.
const StatusOutOfBounds = devices.KernelOutOfBounds

// cBoundsCheck is the unit's bounds-check helper: whether element o of a buffer of n
// elements exists, recording the first one that does not (the kernel reports it when it
// has finished); kiln_bc_range checks the first and the last element of a range.
const cBoundsCheck = `typedef struct { i64 hit, buf, off; } kiln_bc_t;
static inline int kiln_bc(i64 o, i64 n, i64 buf, kiln_bc_t *bc) {
  if (__builtin_expect((u64)o < (u64)n, 1)) return 1;
  if (!bc->hit) { bc->hit = 1; bc->buf = buf; bc->off = o; }
  return 0;
}
static inline int kiln_bc_range(i64 lo, i64 hi, i64 n, i64 buf, kiln_bc_t *bc) {
  return kiln_bc(lo, n, buf, bc) && kiln_bc(hi, n, buf, bc);
}
`

// writeBoundsHelpers emits the checked load and store of each element type a unit
// accesses: a load outside the buffer reads 0, a store outside it is dropped, so a kernel
// that fails a check touches no memory it does not own before it returns its status.
func writeBoundsHelpers(unit *strings.Builder, types map[string]bool) {
	var ts []string
	for t := range types {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	for _, t := range ts {
		fmt.Fprintf(unit, "static inline %[1]s kiln_ld_%[1]s(const %[1]s *p, i64 o, i64 n, i64 buf, kiln_bc_t *bc) { return kiln_bc(o, n, buf, bc) ? p[o] : (%[1]s)0; }\n", t)
		fmt.Fprintf(unit, "static inline void kiln_st_%[1]s(%[1]s *p, i64 o, i64 n, i64 buf, kiln_bc_t *bc, %[1]s v) { if (kiln_bc(o, n, buf, bc)) p[o] = v; }\n", t)
	}
}

// bufferID is the number a bounds check reports for b: its parameter position, or for
// a local allocation the parameter count plus its order of appearance.
func (e *cEmitter) bufferID(b *loopir.Buffer) int {
	if i := slices.Index(e.f.Params, b); i >= 0 {
		return i
	}
	if id, ok := e.localIDs[b]; ok {
		return id
	}
	id := len(e.f.Params) + len(e.localIDs)
	e.localIDs[b] = id
	return id
}

// extent is the C text of the number of elements b holds (its parameter's declared
// shape, run-time dims included, or its allocation's).
func (e *cEmitter) extent(b *loopir.Buffer) string { return e.expr(b.Elements()) }

// checkedLoad prints a load through the checked helper of its element type.
func (e *cEmitter) checkedLoad(x *loopir.Load) string {
	t := e.ctype(x.Buf.DT)
	e.intrins.bounds[t] = true
	return fmt.Sprintf("kiln_ld_%s(%s, %s, %s, %d, %s)", t, e.ident(x.Buf, x.Buf.Name), e.index(x.Buf, x.Index), e.extent(x.Buf), e.bufferID(x.Buf), e.bc)
}

// checkedStore prints a store through the checked helper of its element type.
func (e *cEmitter) checkedStore(s *loopir.Store, pad string) {
	t := e.ctype(s.Buf.DT)
	e.intrins.bounds[t] = true
	fmt.Fprintf(e.b, "%skiln_st_%s(%s, %s, %s, %d, %s, %s);\n", pad, t, e.ident(s.Buf, s.Buf.Name), e.index(s.Buf, s.Index), e.extent(s.Buf), e.bufferID(s.Buf), e.bc, e.expr(s.Value))
}

// rangeCheck is the C condition that elements lo..hi of b exist.
func (e *cEmitter) rangeCheck(b *loopir.Buffer, lo, hi loopir.Expr) string {
	return fmt.Sprintf("kiln_bc_range(%s, %s, %s, %d, %s)", e.expr(lo), e.expr(hi), e.extent(b), e.bufferID(b), e.bc)
}

// loopBounds checks the accesses of a (serial, vectorized or unrolled) loop's body as
// whole ranges: each load and store run on every iteration (not under a nested loop or
// a condition) whose offset is the loop variable times a constant plus a part invariant
// in the loop is checked once before the loop, at its first and last iteration, and
// then printed unchecked inside it, so a vector loop checks whole vectors and stays a
// vector loop, and an unrolled micro-kernel stays straight-line code. It returns the
// condition ("" when no access qualifies; the others keep their per-element checks)
// and a function that forgets the accesses it covered once the loop is printed.
func (e *cEmitter) loopBounds(s *loopir.For) (string, func()) {
	written, allocated := map[*loopir.Buffer]bool{}, map[*loopir.Buffer]bool{}
	loopir.MapStmt(s.Body, func(x loopir.Expr) loopir.Expr { return x }, func(x loopir.Stmt) loopir.Stmt {
		switch x := x.(type) {
		case *loopir.Store:
			written[x.Buf] = true
		case *loopir.Allocate:
			written[x.Buf], allocated[x.Buf] = true, true
		}
		return nil
	})
	invariant := func(x loopir.Expr) bool {
		ok := true
		walkExpr(x, func(y loopir.Expr) {
			if l, isLoad := y.(*loopir.Load); isLoad && written[l.Buf] {
				ok = false
			}
		})
		return ok
	}
	last := loopir.Bin(loopir.Sub, loopir.Bin(loopir.Add, s.Min, s.Extent), loopir.Int(1))
	var conds, seen []string
	var covered []any
	consider := func(node any, b *loopir.Buffer, idx []loopir.Expr) {
		if len(idx) != 1 || allocated[b] {
			return
		}
		base, coefs, ok := loopir.Affine(idx[0], []*loopir.Var{s.Var})
		if !ok {
			return
		}
		c, isConst := coefs[0].(*loopir.IntImm)
		if !isConst || !invariant(base) {
			return
		}
		lo := loopir.Substitute(idx[0], map[*loopir.Var]loopir.Expr{s.Var: s.Min})
		hi := loopir.Substitute(idx[0], map[*loopir.Var]loopir.Expr{s.Var: last})
		if c.V < 0 {
			lo, hi = hi, lo
		}
		cond := e.rangeCheck(b, lo, hi)
		if !slices.Contains(seen, cond) {
			seen = append(seen, cond)
			conds = append(conds, cond)
		}
		covered = append(covered, node)
	}
	var visit func(st loopir.Stmt)
	visit = func(st loopir.Stmt) {
		switch st := st.(type) {
		case loopir.Seq:
			for _, x := range st {
				visit(x)
			}
		case *loopir.Store:
			consider(st, st.Buf, st.Index)
			for _, x := range append(slices.Clone(st.Index), st.Value) {
				walkExpr(x, func(y loopir.Expr) {
					if l, ok := y.(*loopir.Load); ok {
						consider(l, l.Buf, l.Index)
					}
				})
			}
		}
	}
	visit(s.Body)
	if len(conds) == 0 {
		return "", func() {}
	}
	for _, n := range covered {
		e.prechecked[n] = true
	}
	cond := strings.Join(conds, " && ")
	if ext, ok := s.Extent.(*loopir.IntImm); !ok || ext.V <= 0 {
		cond = fmt.Sprintf("%s <= 0 || (%s)", e.expr(s.Extent), cond)
	}
	return cond, func() {
		for _, n := range covered {
			delete(e.prechecked, n)
		}
	}
}

// intrinBounds is the C condition that every tile a tensor intrinsic call touches lies
// in its buffer: per parameter, the element at the tile's address plus each loop's
// stride times (extent - 1), at the lowest and the highest, for the extents of this
// call. A call with an empty loop touches nothing and passes.
func (e *cEmitter) intrinBounds(s *loopir.IntrinCall) string {
	in := s.Intrin
	loops, _, _ := loopir.DescNest(in.Desc.Body)
	nl, np := len(loops), len(in.Desc.Params)
	if len(s.Args) != np*(1+nl)+nl {
		e.fail("tensor intrinsic %s called with %d arguments, its convention has %d", in.Name, len(s.Args), np*(1+nl)+nl)
		return "1"
	}
	exts := s.Args[np*(1+nl):]
	var conds []string
	for p := range np {
		a, ok := s.Args[p*(1+nl)].(*loopir.Address)
		if !ok || len(a.Index) != 1 {
			e.fail("tensor intrinsic %s argument %d is not a flat element address", in.Name, p*(1+nl))
			return "1"
		}
		lo, hi := a.Index[0], a.Index[0]
		for l := range nl {
			span := loopir.Bin(loopir.Mul, s.Args[p*(1+nl)+1+l], loopir.Bin(loopir.Sub, exts[l], loopir.Int(1)))
			lo = loopir.Bin(loopir.Add, lo, loopir.Bin(loopir.Min, loopir.Int(0), span))
			hi = loopir.Bin(loopir.Add, hi, loopir.Bin(loopir.Max, loopir.Int(0), span))
		}
		conds = append(conds, e.rangeCheck(a.Buf, lo, hi))
	}
	cond := strings.Join(conds, " && ")
	var empty []string
	for _, x := range exts {
		if c, ok := x.(*loopir.IntImm); !ok || c.V <= 0 {
			empty = append(empty, e.expr(x)+" <= 0")
		}
	}
	if len(empty) > 0 {
		cond = strings.Join(empty, " || ") + " || (" + cond + ")"
	}
	return cond
}

// walkExpr calls f on every node of x, parents first (the nodes themselves, where
// loopir.MapExpr hands f rebuilt copies).
func walkExpr(x loopir.Expr, f func(loopir.Expr)) {
	f(x)
	switch x := x.(type) {
	case *loopir.Binary:
		walkExpr(x.A, f)
		walkExpr(x.B, f)
	case *loopir.Not:
		walkExpr(x.X, f)
	case *loopir.Select:
		walkExpr(x.Cond, f)
		walkExpr(x.T, f)
		walkExpr(x.F, f)
	case *loopir.Cast:
		walkExpr(x.X, f)
	case *loopir.Call:
		for _, a := range x.Args {
			walkExpr(a, f)
		}
	case *loopir.Load:
		for _, a := range x.Index {
			walkExpr(a, f)
		}
	case *loopir.Address:
		for _, a := range x.Index {
			walkExpr(a, f)
		}
	}
}
