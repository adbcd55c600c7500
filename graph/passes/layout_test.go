package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// stubPolicy: Conv is an anchor with outputs in blocks of 4; Relu and Add accept inputs
// in one block; nothing else does.
func stubPolicy() *passes.LayoutPolicy {
	return &passes.LayoutPolicy{
		Anchor: func(n *graph.Node) ([]int64, int64, bool) {
			if n.Op != graph.OpConv {
				return nil, 0, false
			}
			return []int64{-1, -1}, 4, true
		},
		Accepts: func(n *graph.Node, in []int64) (int64, bool) {
			if n.Op != graph.OpRelu && n.Op != graph.OpAdd {
				return 0, false
			}
			for _, b := range in {
				if b != in[0] {
					return 0, false
				}
			}
			return in[0], in[0] != 0
		},
	}
}

func TestAlterLayout(t *testing.T) {
	src := `module opsets(""=17)
func @main(%x: f32[1,8,5,5]) {
  const %w: f32[8,8,1,1] = <64 elements>
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %r = Relu(%c) : f32[1,8,5,5]
  %a = Add(%r, %x) : f32[1,8,5,5]
  %c2 = Conv(%a, %w) : f32[1,8,5,5]
  %s = Softmax(%c2) : f32[1,8,5,5]
  return %s, %r
}`
	m, err := graph.Parse(strings.ReplaceAll(src, "<64 elements>", "["+strings.Repeat("0.5, ", 63)+"0.5]"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (passes.Pipeline{{Name: "alter-layout", Run: passes.AlterLayout}}).Run(&passes.Context{Layout: stubPolicy(), Check: true}, m); err != nil {
		t.Fatal(err)
	}
	got := graph.PrintFunc(m.Main)
	for _, want := range []string{
		`%c = Conv(%x, %w) : f32[1,8,5,5]@c4`,
		`%r = Relu(%c) : f32[1,8,5,5]@c4`,
		// the plain input of the blocked Add is brought into the block
		`%"x@c4" = LayoutTransform(%x) {block=4} : f32[1,8,5,5]@c4`,
		`%a = Add(%r, %"x@c4") : f32[1,8,5,5]@c4`,
		// the second conv reads its input blocked, but its only reader (Softmax) needs
		// NCHW: its output stays plain rather than be transformed back
		`%c2 = Conv(%a, %w) : f32[1,8,5,5]`,
		`%s = Softmax(%c2) : f32[1,8,5,5]`,
		// so does a result
		`return %s, %"r@c0"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

// TestAlterLayoutNoPolicy: without a policy nothing changes.
func TestAlterLayoutNoPolicy(t *testing.T) {
	m := shapeChain(t)
	before := graph.Print(m)
	if err := passes.AlterLayout(&passes.Context{}, m); err != nil {
		t.Fatal(err)
	}
	if graph.Print(m) != before {
		t.Fatal("alter-layout without a policy changed the module")
	}
}

// TestAlterLayoutAroundSubgraphs: a module with an If still gets blocked convolutions;
// the branches read the values they capture plain — a blocked capture (%r, read
// in a branch's Relu and as a nested If's result) through one plain copy made before
// the If, while the Conv after it reads %r as it is stored.
func TestAlterLayoutAroundSubgraphs(t *testing.T) {
	src := `module opsets(""=17)
func @main(%x: f32[1,8,5,5], %p: bool[]) {
  const %w: f32[8,8,1,1] = <64 elements>
  %c = Conv(%x, %w) : f32[1,8,5,5]
  %r = Relu(%c) : f32[1,8,5,5]
  %i = If(%p) : f32[1,8,5,5]
    then_branch =
      func @then_branch() {
        %y = Relu(%r) : f32[1,8,5,5]
        return %y
      }
    else_branch =
      func @else_branch() {
        %j = If(%p) : f32[1,8,5,5]
          then_branch =
            func @inner_then() {
              return %r
            }
          else_branch =
            func @inner_else() {
              return %x
            }
        return %j
      }
  %c2 = Conv(%r, %w) : f32[1,8,5,5]
  %s = Add(%c2, %i) : f32[1,8,5,5]
  return %s
}`
	m, err := graph.Parse(strings.ReplaceAll(src, "<64 elements>", "["+strings.Repeat("0.5, ", 63)+"0.5]"))
	if err != nil {
		t.Fatal(err)
	}
	if err := (passes.Pipeline{{Name: "alter-layout", Run: passes.AlterLayout}}).Run(&passes.Context{Layout: stubPolicy(), Check: true}, m); err != nil {
		t.Fatal(err)
	}
	got := graph.PrintFunc(m.Main)
	for _, want := range []string{
		`%c = Conv(%x, %w) : f32[1,8,5,5]@c4`,
		`%r = Relu(%c) : f32[1,8,5,5]@c4`,
		`%"r@c0" = LayoutTransform(%r) : f32[1,8,5,5]`,
		`%y = Relu(%"r@c0") : f32[1,8,5,5]`,
		`return %"r@c0"`,
		`%c2 = Conv(%r, %w) : f32[1,8,5,5]`, // reads %r as stored (blocked)
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Count(got, "LayoutTransform(%r)") != 1 || strings.Index(got, `%"r@c0" =`) > strings.Index(got, "= If(") {
		t.Errorf("want one plain copy of %%r made before the If:\n%s", got)
	}
}
