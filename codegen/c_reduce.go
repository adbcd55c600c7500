package codegen

import (
	"fmt"
	"strings"

	"github.com/kilnrt/kiln/loopir"
)

// ompReduction names the OpenMP reduction identifier of an accumulate operator.
var ompReduction = map[loopir.BinOp]string{loopir.Add: "+", loopir.Max: "max", loopir.Min: "min"}

// vectorReduction emits a vectorized loop whose body accumulates into one element
// (loopir.MatchAccumulate, the element's index invariant in the loop): the element is
// kept in a scalar accumulator and the loop carries `#pragma omp simd reduction`, which
// lets the C compiler (with -fopenmp-simd; no OpenMP runtime) split it across vector
// lanes and reassociate — the schedule allowed that by vectorizing the loop. Without
// the pragma a floating-point sum stays one serial dependency chain.
func (e *cEmitter) vectorReduction(s *loopir.For, acc loopir.Accumulate, depth int) {
	pad := strings.Repeat("  ", depth)
	dt := acc.Store.Buf.DT
	t := e.ctype(dt)
	accVar := &loopir.Var{Name: "acc", DT: dt}
	a := e.ident(accVar, "acc")
	elem := fmt.Sprintf("%s[%s]", e.ident(acc.Store.Buf, acc.Store.Buf.Name), e.index(acc.Store.Buf, acc.Store.Index))
	open := "{"
	if e.opts.BoundsCheck && !e.prechecked[acc.Store] {
		// the accumulated element, read before the loop and written after it
		open = fmt.Sprintf("if (kiln_bc(%s, %s, %d, %s)) {", e.index(acc.Store.Buf, acc.Store.Index), e.extent(acc.Store.Buf), e.bufferID(acc.Store.Buf), e.bc)
	}
	fmt.Fprintf(e.b, "%s%s\n%s  %s %s = %s;\n", pad, open, pad, t, a, elem)
	fmt.Fprintf(e.b, "%s  #pragma omp simd reduction(%s:%s)\n", pad, ompReduction[acc.Op], a)
	v := e.ident(s.Var, s.Var.Name)
	end := loopir.Bin(loopir.Add, s.Min, s.Extent)
	fmt.Fprintf(e.b, "%s  for (i64 %s = %s; %s < %s; ++%s) {\n", pad, v, e.expr(s.Min), v, e.expr(end), v)
	forget := e.inside(s)
	// built directly, not through loopir.Bin, so nothing folds the accumulator away
	upd := &loopir.Binary{Op: acc.Op, A: accVar, B: acc.Operand}
	fmt.Fprintf(e.b, "%s    %s = %s;\n", pad, a, e.expr(upd))
	forget()
	fmt.Fprintf(e.b, "%s  }\n%s  %s = %s;\n%s}\n", pad, pad, elem, a, pad)
}
