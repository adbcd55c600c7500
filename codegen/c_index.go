package codegen

import (
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
