package codegen

import (
	"fmt"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/loopir"
)

// StatusIndexOutOfRange is what a C kernel returns when an index read from data
// (loopir.IndexCheck) was outside [-n, n), after writing the first such index and n to
// the words 1 and 2 of its context (the devices calling convention).
const StatusIndexOutOfRange = devices.KernelIndexOutOfRange

// cIndexCheck is the unit's IndexCheck helper: ONNX's wrap of a negative index, and on
// an index out of range the first one recorded (the kernel reports it when it has
// finished) and a clamped index returned, so that the read stays in bounds. The
// unlikely branch costs a compare per index; a loop whose index is invariant keeps it
// outside its vector body.
const cIndexCheck = `typedef struct { i64 hit, v, n; } kiln_oob_t;
static inline i64 kiln_index(i64 v, i64 n, kiln_oob_t *oob) {
  i64 w = v < 0 ? v + n : v;
  if (__builtin_expect((u64)w >= (u64)n, 0)) {
    if (!oob->hit) { oob->hit = 1; oob->v = v; oob->n = n; }
    return w < 0 || n <= 0 ? 0 : n - 1;
  }
  return w;
}
`

// usesIndexCheck reports whether s evaluates a loopir.IndexCheck.
func usesIndexCheck(s loopir.Stmt) bool {
	found := false
	loopir.MapStmt(s, func(x loopir.Expr) loopir.Expr {
		if c, ok := x.(*loopir.Call); ok && c.Fn == loopir.IndexCheck {
			found = true
		}
		return x
	}, func(x loopir.Stmt) loopir.Stmt { return nil })
	return found
}

// hoistIndexChecks prints, before loop s, each IndexCheck of its body that does not
// depend on the loop (no variable bound inside it, no buffer written or allocated in
// it) as a constant, which the body's expressions then name: an index read once per
// row of a gather stays out of the row's vector loop. It returns a function that
// forgets the names when the loop has been printed.
func (e *cEmitter) hoistIndexChecks(s *loopir.For, pad string) func() {
	inv := loopInvariance(s)
	invariant := func(c *loopir.Call) bool {
		for _, a := range c.Args {
			if !inv(a) {
				return false
			}
		}
		return true
	}
	var keys []string
	loopir.MapStmt(s.Body, func(x loopir.Expr) loopir.Expr {
		c, isCall := x.(*loopir.Call)
		if !isCall || c.Fn != loopir.IndexCheck || !invariant(c) {
			return x
		}
		key := e.hoistKey(c)
		if _, done := e.hoisted[key]; done {
			return x
		}
		text := e.expr(c)
		name := fmt.Sprintf("kiln_ix%d", e.nHoisted) // sibling loops print theirs in one scope
		e.nHoisted++
		fmt.Fprintf(e.b, "%sconst i64 %s = %s;\n", pad, name, text)
		e.hoisted[key] = name
		keys = append(keys, key)
		return x
	}, func(x loopir.Stmt) loopir.Stmt { return nil })
	return func() {
		for _, k := range keys {
			delete(e.hoisted, k)
		}
	}
}
