package loopir

import (
	"testing"

	"github.com/kilnrt/kiln/tensor"
)

// TestSimplifyQuantizeRoundTrip: a dequantization reading a quantization inline —
// f32((i32(u8(q)) - i32(z))) · s with q = min(255, max(0, rint(x/s) + z)) —
// loses its integers: the clamp proves q an integer inside uint8's range, so the
// conversions are identities and the zero point's subtraction is exact in float32.
// Where a proof fails, the casts stay.
func TestSimplifyQuantizeRoundTrip(t *testing.T) {
	f32, u8, i32 := tensor.Float32, tensor.Uint8, tensor.Int32
	buf := func(name string, dt tensor.DType) *Buffer {
		return &Buffer{Name: name, DT: dt, Shape: []Expr{Int(16)}, Scope: "global"}
	}
	i := NewVar("i")
	x := &Load{Buf: buf("X", f32), Index: []Expr{i}}
	z := &Load{Buf: buf("Z", u8), Index: []Expr{Int(0)}}
	w := &Load{Buf: buf("W", i32), Index: []Expr{i}}
	s := Float(0.5, f32)
	clamp := func(v Expr, lo, hi float64) Expr {
		return Bin(Min, Float(hi, f32), Bin(Max, Float(lo, f32), v))
	}
	rounded := Bin(Add, &Call{Fn: Round, Args: []Expr{Bin(Div, x, s)}}, &Cast{To: f32, X: z})
	q := &Cast{To: u8, X: clamp(rounded, 0, 255)}
	dequant := func(q Expr) Expr {
		return Bin(Mul, &Cast{To: f32, X: Bin(Sub, &Cast{To: i32, X: q}, &Cast{To: i32, X: z})}, s)
	}
	a := NewAnalyzer(nil)
	a.Bind(i, Bounds{0, 15})
	cases := []struct {
		name string
		in   Expr
		want string
	}{
		{"quantize then dequantize", dequant(q),
			"(((f32(Z[0]) * -1f) + min(255f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0]))))) * 0.5f)"},
		{"the quantized value widened", &Cast{To: i32, X: q},
			"i32(min(255f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0])))))"},
		// a clamp past uint8's range: the narrowing wraps, so it stays
		{"a clamp wider than the type", &Cast{To: i32, X: &Cast{To: u8, X: clamp(rounded, 0, 256)}},
			"i32(u8(min(256f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0]))))))"},
		// not proven integral: truncation is not the identity for a float result
		{"a float result of a fraction", &Cast{To: f32, X: &Cast{To: u8, X: clamp(x, 0, 255)}},
			"f32(u8(min(255f, max(0f, X[i]))))"},
		// into an integer type the truncations agree, integral or not
		{"an integer result of a fraction", &Cast{To: i32, X: &Cast{To: u8, X: clamp(x, 0, 255)}},
			"i32(min(255f, max(0f, X[i])))"},
		// a narrower target cannot hold the narrow type's range
		{"a narrower target", &Cast{To: tensor.Int8, X: q},
			"i8(u8(min(255f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0]))))))"},
		// integer sums without a float inside are left as they are
		{"integers only", &Cast{To: f32, X: Bin(Sub, &Cast{To: i32, X: z}, Int(3))},
			"f32((i32(Z[0]) + -3))"},
		// an int32 operand of unknown range: its sum is not proven exact in float32
		{"an unbounded operand", &Cast{To: f32, X: Bin(Add, &Cast{To: i32, X: q}, w)},
			"f32((W[i] + i32(min(255f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0])))))))"},
		// unsigned arithmetic wraps below zero (the widening of q alone is exact)
		{"an unsigned difference", &Cast{To: f32, X: Bin(Sub, &Cast{To: tensor.Uint32, X: q}, &Cast{To: tensor.Uint32, X: z})},
			"f32(((u32(Z[0]) * -1) + u32(min(255f, max(0f, (round((X[i] / 0.5f)) + f32(Z[0])))))))"},
	}
	for _, c := range cases {
		if got := ExprString(a.Simplify(c.in)); got != c.want {
			t.Errorf("%s: Simplify(%s)\n got %s\nwant %s", c.name, ExprString(c.in), got, c.want)
		}
	}
}
