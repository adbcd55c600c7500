package passes_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph/passes"
)

// TestFoldRefineLearnsFreshExtents: PyTorch exports x.expand(shape) as
// Expand(x, Where(Equal(shape, -1), 1, shape)); with the shape's values known (n, 4),
// inference decides the Equal (an extent is never -1), the Where keeps the known
// values and the Expand gets the extents [n, 4] instead of fresh ones. The fresh
// extents the Expand had (e0, e1) were already copied into a ShapeExpr and a Reshape's
// type, folded before the Where's condition was known: fold-constants rewrites them to
// the extents they turned out to be. n, an input's symbol, stays.
func TestFoldRefineLearnsFreshExtents(t *testing.T) {
	p := passes.Pipeline{pass(t, "fold-constants")}
	runTable(t, p, passes.Context{Eval: evalNode}, []textCase{
		{"expand through Where(Equal(shape, -1), 1, shape)", `func @main(%x: f32[n,4], %i: i64[n,1]) {
  const %m1: i64[2] = [-1, -1]
  const %one: i64[2] = [1, 1]
  %s = Shape(%x) : i64[2]{n,4}
  %eq = Equal(%s, %m1) : bool[2]
  %w = Where(%eq, %one, %s) : i64[2]
  %e = Expand(%i, %w) : i64[e0,e1]
  %sh = ShapeExpr() {value=i64[2]{e0,e1}} : i64[2]{e0,e1}
  %r = Reshape(%x, %sh) : f32[e0,e1]
  %c = Cast(%e) {to=1} : f32[e0,e1]
  %o = Add(%r, %c) : f32[e0,e1]
  return %o
}`, `func @main(%x: f32[n,4], %i: i64[n,1]) {
  const %m1: i64[2] = [-1, -1]
  const %one: i64[2] = [1, 1]
  %s = ShapeExpr() {value=i64[2]{n,4}} : i64[2]{n,4}
  %eq = Equal(%s, %m1) : bool[2]
  %w = ShapeExpr() {value=i64[2]{n,4}} : i64[2]{n,4}
  %e = Expand(%i, %w) : i64[n,4]
  %sh = ShapeExpr() {value=i64[2]{n,4}} : i64[2]{n,4}
  %r = Reshape(%x, %sh) : f32[n,4]
  %c = Cast(%e) {to=1} : f32[n,4]
  %o = Add(%r, %c) : f32[n,4]
  return %o
}`},
	})
}

// TestShapeExprOnlyOverInputSymbols: a shape value over the inputs' symbols becomes a
// ShapeExpr; one naming a symbol a node binds at run time (NonZero's count) stays a
// node reading that node's output, so that no reordering can put it first.
func TestShapeExprOnlyOverInputSymbols(t *testing.T) {
	p := passes.Pipeline{pass(t, "fold-constants")}
	runTable(t, p, passes.Context{Eval: evalNode}, []textCase{
		{"NonZero's count stays read from NonZero", `func @main(%x: f32[n]) {
  %nz = NonZero(%x) : i64[1,k]
  %a = Shape(%x) : i64[1]{n}
  %b = Shape(%nz) : i64[2]{1,k}
  %c = Concat(%a, %b) {axis=0} : i64[3]{n,1,k}
  return %c
}`, `func @main(%x: f32[n]) {
  %nz = NonZero(%x) : i64[1,k]
  %a = ShapeExpr() {value=i64[1]{n}} : i64[1]{n}
  %b = Shape(%nz) : i64[2]{1,k}
  %c = Concat(%a, %b) : i64[3]{n,1,k}
  return %c
}`},
	})
}
