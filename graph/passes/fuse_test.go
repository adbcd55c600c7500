package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// fuse runs fuse-ops alone (with checking) and returns the main Func's text.
func fuse(t *testing.T, src string, lim passes.FuseLimits) string {
	t.Helper()
	m, err := graph.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	p := passes.Pipeline{{Name: "fuse-ops", Run: passes.FuseOps}}
	if err := p.Run(&passes.Context{Check: true, Fuse: lim}, m); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(graph.PrintFunc(m.Main))
}

// TestFuseOpsCases: before/after text for TVM's rules, with the groups that must not form.
func TestFuseOpsCases(t *testing.T) {
	for _, c := range fuseCases {
		t.Run(c.name, func(t *testing.T) {
			got := fuse(t, fuseHeader+c.before, c.lim)
			if got != strings.TrimSpace(c.after) {
				t.Errorf("before:\n%s\ngot:\n%s\nwant:\n%s", c.before, got, c.after)
			}
		})
	}
}

// TestFuseOpsRoundTrip: the fused text parses back to the same text.
func TestFuseOpsRoundTrip(t *testing.T) {
	for _, c := range fuseCases {
		m, err := graph.Parse(fuseHeader + c.after)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := graph.Verify(m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := strings.TrimSpace(graph.PrintFunc(m.Main)); got != strings.TrimSpace(c.after) {
			t.Errorf("%s: reprinted\n%s", c.name, got)
		}
	}
}

// TestFuseOpsTwice: a second run leaves the groups of the first as they are.
func TestFuseOpsTwice(t *testing.T) {
	for _, c := range fuseCases {
		once := fuse(t, fuseHeader+c.before, c.lim)
		if twice := fuse(t, fuseHeader+once, c.lim); twice != once {
			t.Errorf("%s: a second fuse-ops changed\n%s\ninto\n%s", c.name, once, twice)
		}
	}
}
