package graph

import "testing"

// TestDeriveSharesSymbolsAndFoldsWhatItCan: the same expression gives one symbol with
// one definition, an exact quotient stays a polynomial, a constant numerator folds (an
// empty window gives 0), and a clone keeps the definitions apart from the original's.
func TestDeriveSharesSymbolsAndFoldsWhatItCan(t *testing.T) {
	m := &Module{}
	h := m.AddSymbol("h")
	num := h.Add(Const(-1))
	a, b := m.Derive(num, 2, 1), m.Derive(num, 2, 1)
	if !a.Equal(b) {
		t.Fatalf("one expression, two symbols: %v and %v", a, b)
	}
	if c := m.Derive(num, 3, 1); c.Equal(a) {
		t.Fatalf("another stride gave the same symbol %v", c)
	}
	defs := m.SymbolDefs()
	if len(defs) != 2 || defs[0].String() != "_d1 = max(0, floor((h-1) / 2) + 1)" {
		t.Fatalf("definitions %v", defs)
	}
	if v, ok := defs[0].Eval(map[string]int64{"h": 8}); !ok || v != 4 {
		t.Fatalf("h = 8: %d, %v; want 4", v, ok)
	}
	for h, want := range map[int64]int64{0: 0, -2: 0, 1: 1} { // h-1 = -1: floor(-1/2) + 1 = 0
		if v, ok := defs[0].Eval(map[string]int64{"h": h}); !ok || v != want {
			t.Fatalf("h = %d: %d, %v; want %d", h, v, ok, want)
		}
	}
	if d := m.Derive(h.Scale(2), 2, 1); !d.Equal(h.Add(Const(1))) {
		t.Fatalf("2h / 2 + 1 = %v; want h + 1", d)
	}
	for _, c := range []struct{ num, want int64 }{{7, 4}, {0, 1}, {-1, 0}, {-5, 0}} {
		if v, ok := m.Derive(Const(c.num), 2, 1).Value(); !ok || v != c.want {
			t.Fatalf("floor(%d / 2) + 1 = %d, %v; want %d", c.num, v, ok, c.want)
		}
	}
	c := Clone(&Module{Main: &Func{Name: "main"}, defs: m.defs, derived: m.derived})
	c.Derive(h.Add(Const(5)), 2, 1)
	if len(m.SymbolDefs()) != 2 || len(c.SymbolDefs()) != 3 {
		t.Fatalf("a clone's definition reached the original: %d and %d", len(m.SymbolDefs()), len(c.SymbolDefs()))
	}
	m.SubstSymbolDefs(map[string]Dim{"h": Sym("w").Add(Const(1))})
	if got := m.SymbolDefs()[0].Num.String(); got != "w" {
		t.Fatalf("substituted numerator %q; want w", got)
	}
}
