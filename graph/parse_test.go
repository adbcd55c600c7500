package graph

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// buildControlModule makes a module with constants, a subgraph-bearing If and sequence
// ops: enough to exercise every construct of the text form.
func buildControlModule(t *testing.T) *Module {
	t.Helper()
	b := NewBuilder("main")
	x := b.Param("x", TensorType(tensor.Float32, Sym("batch"), Const(4)))
	c := b.Param("c", TensorType(tensor.Bool))
	k := b.Const("k", tensor.MustFromSlice(tensor.Shape{2}, []int64{3, -1}))
	seq, err := b.Op1(OpSequenceConstruct, nil, x, x)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.Op1(OpSequenceLength, nil, seq)
	if err != nil {
		t.Fatal(err)
	}
	thenB := b.Sub("then_branch")
	thenB.Return(x)
	elseB := b.Sub("else_branch")
	s2 := elseB.Const("half", tensor.MustFromSlice(tensor.Shape{1, 4}, []float32{0.5, 1, -2, 1e-3}))
	elseB.Return(s2)
	out, err := b.Op1(OpIf, &IfAttrs{ThenBranch: thenB.F, ElseBranch: elseB.F}, c)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(out, n, k)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPrintParseRoundTrip(t *testing.T) {
	m := buildControlModule(t)
	text := Print(m)
	for _, want := range []string{"func @main(%x: f32[batch,4], %c: bool[])", "const %k: i64[2]{3,-1} = [3, -1]", "If(%c)", "then_branch =", "return"} {
		if !strings.Contains(text, want) {
			t.Errorf("printed text lacks %q:\n%s", want, text)
		}
	}
	back, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	if again := Print(back); again != text {
		t.Errorf("round trip differs:\n--- printed\n%s\n--- reprinted\n%s", text, again)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"no header":     "func @main() {\n  return\n}\n",
		"unknown value": "module\nfunc @main() {\n  return %nope\n}\n",
		"unknown op":    "module\nfunc @main(%x: f32[2]) {\n  %y = Frobnicate(%x) : f32[2]\n  return %y\n}\n",
		"unclosed":      "module\nfunc @main(%x: f32[2]) {\n",
		"bad type":      "module\nfunc @main(%x: q9[2]) {\n  return %x\n}\n",
	}
	for name, text := range cases {
		if _, err := Parse(text); !errors.Is(err, ErrParse) && !errors.Is(err, ErrVerify) && !errors.Is(err, tensor.ErrDType) {
			t.Errorf("%s: got %v, want a parse error", name, err)
		}
	}
}

func TestVerifyCatchesUseBeforeDef(t *testing.T) {
	m := buildControlModule(t)
	// move the SequenceLength node before the SequenceConstruct it reads
	f := m.Main
	f.Nodes[0], f.Nodes[1] = f.Nodes[1], f.Nodes[0]
	if err := Verify(m); !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), "used before it is defined") {
		t.Errorf("Verify = %v", err)
	}
}

// TestBlockedLayoutRoundTrip: a LayoutTransform and a blocked type print and parse back;
// the op is not an ONNX op.
func TestBlockedLayoutRoundTrip(t *testing.T) {
	src := `module opsets(""=17)
func @main(%x: f32[1,32,5,5]) {
  %y = LayoutTransform(%x) {block=16} : f32[1,32,5,5]@c16
  %z = Relu(%y) : f32[1,32,5,5]@c16
  return %z
}`
	m, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(Print(m)); got != src {
		t.Fatalf("round trip:\n%s\nwant\n%s", got, src)
	}
	if _, known := LookupOp("", "LayoutTransform"); known {
		t.Fatal("LayoutTransform is importable as an ONNX op")
	}
	if _, err := ParseType("f32[1,30,5,5]@c16"); err != nil {
		t.Fatal(err) // parsing is syntax only
	}
	if err := CheckBlock(TensorType(tensor.Float32, StaticShape(1, 30, 5, 5)...), 16); err == nil {
		t.Fatal("30 channels accepted in blocks of 16")
	}
}

// TestAttentionMaskRoundTrip: a kiln.AttentionMask over symbolic dims, with the float32
// minimum as its value, prints and parses back; the op is not an ONNX op.
func TestAttentionMaskRoundTrip(t *testing.T) {
	src := `module opsets(""=17)
func @main(%m: i64[batch,1,1,seq]) {
  %y = AttentionMask(%m) {value=-3.4028235e+38, to=1} : f32[batch,1,1,seq]
  return %y
}`
	m, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(Print(m)); got != src {
		t.Fatalf("round trip:\n%s\nwant\n%s", got, src)
	}
	if a := m.Main.Nodes[0].Attrs.(*AttentionMaskAttrs); a.Value != -math.MaxFloat32 || a.To != int64(tensor.Float32) {
		t.Fatalf("parsed attributes %+v", *a)
	}
	if _, known := LookupOp("", "AttentionMask"); known {
		t.Fatal("AttentionMask is importable as an ONNX op")
	}
	if op, known := LookupOp(KilnDomain, "AttentionMask"); !known || op != OpAttentionMask {
		t.Fatalf("LookupOp(kiln, AttentionMask) = %v, %v", op, known)
	}
}
