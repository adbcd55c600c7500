package passes_test

import (
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// TestSplitToSlicesKeepsOutputs: with SplitsAsSlices, a Split of static parts becomes
// one Slice per part over the same output values; a Split along a symbolic axis, and
// every Split without the flag, stays.
func TestSplitToSlicesKeepsOutputs(t *testing.T) {
	const src = `module opsets(""=17)
func @main(%x: f32[n,12], %y: f32[4,m]) {
  const %sizes: i64[3]{2,6,4} = [2, 6, 4]
  %a, %b, %c = Split(%x, %sizes) {axis=1} : f32[n,2], f32[n,6], f32[n,4]
  %s = Add(%a, %a) : f32[n,2]
  %p, %q = Split(%y) {axis=1, num_outputs=2} : f32[4,_d0], f32[4,_d1]
  return %s, %b, %c, %p, %q
}`
	parse := func() *graph.Module {
		m, err := graph.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	off := parse()
	before := graph.Print(off)
	if err := passes.SplitToSlices(&passes.Context{}, off); err != nil {
		t.Fatal(err)
	}
	if graph.Print(off) != before {
		t.Fatalf("without the flag the module changed:\n%s", graph.Print(off))
	}
	m := parse()
	outs := m.Main.Nodes[0].Outputs
	if err := passes.SplitToSlices(&passes.Context{SplitsAsSlices: true}, m); err != nil {
		t.Fatal(err)
	}
	if err := graph.Verify(m); err != nil {
		t.Fatalf("%v\n%s", err, graph.Print(m))
	}
	ops := map[graph.Op]int{}
	for _, n := range m.Main.Nodes {
		ops[n.Op]++
	}
	if ops[graph.OpSlice] != 3 || ops[graph.OpSplit] != 1 {
		t.Fatalf("ops %v, want 3 Slices and the symbolic Split:\n%s", ops, graph.Print(m))
	}
	for i, o := range outs {
		if o.Def.Op != graph.OpSlice || o.Def.Outputs[0] != o {
			t.Errorf("output %d is now made by %v", i, o.Def)
		}
	}
	t.Log(graph.Print(m))
}
