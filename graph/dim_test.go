package graph

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

func TestDimArithmetic(t *testing.T) {
	b, s := Sym("b"), Sym("s")
	cases := []struct {
		got  Dim
		want string
	}{
		{s.Add(Const(1)), "s+1"},
		{b.Mul(s).Scale(2), "2*b*s"},
		{b.Mul(s).Add(s).Sub(s), "b*s"},
		{Const(3).Sub(s), "-s+3"},
		{b.Mul(b), "b*b"},
		{s.Sub(s), "0"},
	}
	for _, c := range cases {
		if c.got.String() != c.want {
			t.Errorf("got %q want %q", c.got, c.want)
		}
		back, err := ParseDim(c.want)
		if err != nil || !back.Equal(c.got) {
			t.Errorf("ParseDim(%q) = %v, %v", c.want, back, err)
		}
	}
	if q, ok := b.Mul(s).Scale(4).Div(Const(2)); !ok || q.String() != "2*b*s" {
		t.Errorf("4bs/2 = %v %v", q, ok)
	}
	if q, ok := b.Mul(s).Scale(256).Div(b.Mul(s)); !ok || q.String() != "256" {
		t.Errorf("256bs/bs = %v %v", q, ok)
	}
	if _, ok := s.Add(Const(1)).Div(Const(2)); ok {
		t.Error("(s+1)/2 should not divide exactly")
	}
	if v, ok := b.Mul(s).Add(Const(1)).Eval(map[string]int64{"b": 2, "s": 3}); !ok || v != 7 {
		t.Errorf("eval = %d %v", v, ok)
	}
}

func TestTypeRoundTrip(t *testing.T) {
	for _, s := range []string{"f32[batch,3,224,224]", "i64[]", "f32[*]", "i64[2]{b,s+1}", "seq<f32[2,n]>", "opt<i64[]>", "bool[0]"} {
		ty, err := ParseType(s)
		if err != nil {
			t.Fatalf("ParseType(%q): %v", s, err)
		}
		if ty.String() != s {
			t.Errorf("round trip %q -> %q", s, ty)
		}
	}
	if _, err := ParseType("q7[1]"); err == nil {
		t.Error("bad dtype accepted")
	}
	st := TensorType(tensor.Float32, StaticShape(1, 2)...)
	if sh, ok := st.ConstShape(); !ok || !sh.Equal(tensor.Shape{1, 2}) {
		t.Errorf("ConstShape = %v %v", sh, ok)
	}
}

func TestBroadcastDims(t *testing.T) {
	b, s := Sym("b"), Sym("s")
	out, err := BroadcastDims([]Dim{b, s, Const(1)}, []Dim{Const(1), Const(256)})
	if err != nil || dimsString(out) != "[b,s,256]" {
		t.Errorf("got %v %v", dimsString(out), err)
	}
	if _, err := BroadcastDims([]Dim{Const(2)}, []Dim{Const(3)}); err == nil {
		t.Error("2 vs 3 should not broadcast")
	}
}

func TestDimPoly(t *testing.T) {
	d, err := ParseDim("2*b*s-s+b*b+4")
	if err != nil {
		t.Fatal(err)
	}
	c, terms := d.Poly()
	if c != 4 || len(terms) != 3 {
		t.Fatalf("Poly(%v) = %d, %v", d, c, terms)
	}
	// rebuilt from its parts, the dim is the same; the parts are copies
	back := Const(c)
	for _, m := range terms {
		p := Const(m.Coef)
		for _, s := range m.Syms {
			p = p.Mul(Sym(s))
		}
		back = back.Add(p)
	}
	if !back.Equal(d) {
		t.Errorf("rebuilt %v from %v", back, d)
	}
	terms[0].Syms[0] = "z"
	if d.String() != "b*b+2*b*s-s+4" {
		t.Errorf("Poly's terms alias the dim: %v", d)
	}
	if c, terms := Const(7).Poly(); c != 7 || terms != nil {
		t.Errorf("Poly(7) = %d, %v", c, terms)
	}
}

// TestDimSubst: Subst replaces mapped symbols by their dims inside products and sums,
// leaves the others, and keeps a dim without mapped symbols as it is.
func TestDimSubst(t *testing.T) {
	d := Sym("a").Mul(Sym("b")).Scale(3).Add(Sym("b")).Add(Const(2)) // 3*a*b+b+2
	s := map[string]Dim{"b": Sym("c").Add(Const(1)), "z": Const(7)}
	if got, want := d.Subst(s).String(), "3*a*c+3*a+c+3"; got != want {
		t.Errorf("(%v).Subst: %s, want %s", d, got, want)
	}
	if got := Sym("a").Subst(s); !got.Equal(Sym("a")) {
		t.Errorf("a.Subst: %v", got)
	}
	if got := d.Subst(map[string]Dim{"a": Const(0), "b": Const(4)}); !got.Equal(Const(6)) {
		t.Errorf("(%v).Subst(a=0, b=4): %v, want 6", d, got)
	}
}
