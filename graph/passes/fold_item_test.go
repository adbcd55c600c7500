package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// TestShapeOfASequenceItemIsNotFolded: the Shape of a tensor read out of a sequence
// stays a node (its extents are the item's, known at run time), so the item's producer
// stays too; the Shape of a parameter with the same symbolic type becomes a ShapeExpr.
func TestShapeOfASequenceItemIsNotFolded(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%s: seq<f32[h,w]>, %pos: i64[], %x: f32[h,w]) {
  %item = SequenceAt(%s, %pos) : f32[h,w]
  %shape = Shape(%item) : i64[2]{h,w}
  %xs = Shape(%x) : i64[2]{h,w}
  return %shape, %xs
}`)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, m, &passes.Context{Eval: evalNode})
	for _, want := range []string{"%item = SequenceAt(%s, %pos)", "%shape = Shape(%item)", "%xs = ShapeExpr()"} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
}
