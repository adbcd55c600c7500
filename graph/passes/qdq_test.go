package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
)

// qdqConsts are the constants of the QDQ convolutions below: uint8 x and y per tensor,
// int8 weights per output channel, int32 biases at scale sx·sw (0.5·0.25, 0.5·0.125).
const qdqConsts = `  const %sx: f32[] = [0.5]
  const %zx: u8[] = [128]
  const %wq: i8[2,2,1,1] = [1, -2, 3, 4]
  const %sw: f32[2] = [0.25, 0.125]
  const %zw: i8[2] = [0, 0]
  const %bq: i32[2] = [10, -20]
  const %sb: f32[2] = [0.125, 0.0625]
  const %sy: f32[] = [0.75]
  const %zy: u8[] = [3]
  const %zero: u8[] = [0]
  %x = DequantizeLinear(%xq, %sx, %zx) : f32[1,2,4,4]
  %w = DequantizeLinear(%wq, %sw, %zw) {axis=0} : f32[2,2,1,1]
  %b = DequantizeLinear(%bq, %sb) {axis=0} : f32[2]
`

// qdqRun parses a function over %xq: u8[1,2,4,4] and runs qdq-conv (taking every
// convolution when all is set, none otherwise) then dce.
func qdqRun(t *testing.T, body string, all bool) string {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=13)` + "\nfunc @main(%xq: u8[1,2,4,4]) {\n" + body + "}")
	if err != nil {
		t.Fatal(err)
	}
	p := passes.Pipeline{{Name: "qdq-conv", Run: passes.QDQConv}, {Name: "dce", Run: passes.DCE}}
	ctx := &passes.Context{Check: true, IntegerQDQ: func(*graph.Node) bool { return all }}
	if err := p.Run(ctx, m); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(graph.PrintFunc(m.Main))
}

// TestQDQConv: DequantizeLinear → Conv → [Relu] → QuantizeLinear becomes QLinearConv
// where the integer operator computes the same real numbers; near misses stay float.
func TestQDQConv(t *testing.T) {
	conv := "  %c = Conv(%x, %w, %b) {kernel_shape=[1,1]} : f32[1,2,4,4]\n"
	rewritten := func(zy string) string {
		return `func @main(%xq: u8[1,2,4,4]) {
  const %sx: f32[] = [0.5]
  const %zx: u8[] = [128]
  const %wq: i8[2,2,1,1] = [1, -2, 3, 4]
  const %sw: f32[2] = [0.25, 0.125]
  const %zw: i8[2] = [0, 0]
  const %bq: i32[2] = [10, -20]
  const %sy: f32[] = [0.75]
  const ` + zy + `: u8[] = [` + map[string]string{"%zy": "3", "%zero": "0"}[zy] + `]
  %y = QLinearConv(%xq, %sx, %zx, %wq, %sw, %zw, %sy, ` + zy + `, %bq) {kernel_shape=[1,1]} : u8[1,2,4,4]
  return %y
}`
	}
	cases := []struct {
		name, body string
		all        bool
		want       string // "" : unchanged
	}{
		{"conv then quantizer", conv + "  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, rewritten("%zy")},
		{"a Relu the quantizer's clamp makes (zero point 0)",
			conv + "  %r = Relu(%c) : f32[1,2,4,4]\n  %y = QuantizeLinear(%r, %sy, %zero) : u8[1,2,4,4]\n  return %y\n", true, rewritten("%zero")},
		{"a Relu with zero point 3 stays",
			conv + "  %r = Relu(%c) : f32[1,2,4,4]\n  %y = QuantizeLinear(%r, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"the backend's policy declines",
			conv + "  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", false, ""},
		{"the convolution's output read twice stays",
			conv + "  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y, %c\n", true, ""},
		{"a bias scale other than sx·sw stays",
			"  const %sb2: f32[2] = [0.125, 0.0625001]\n  %b2 = DequantizeLinear(%bq, %sb2) {axis=0} : f32[2]\n" +
				"  %c = Conv(%x, %w, %b2) {kernel_shape=[1,1]} : f32[1,2,4,4]\n  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"a float bias stays",
			"  const %bf: f32[2] = [1, 2]\n  %c = Conv(%x, %w, %bf) {kernel_shape=[1,1]} : f32[1,2,4,4]\n" +
				"  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"a scale of shape [1,1] stays (QLinearConv takes scalars and [1])",
			"  const %sy2: f32[1,1] = [0.75]\n" + conv + "  %y = QuantizeLinear(%c, %sy2, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"a negative y scale stays (its clamp is not the Relu)",
			"  const %sy3: f32[] = [-0.75]\n" + conv + "  %r = Relu(%c) : f32[1,2,4,4]\n  %y = QuantizeLinear(%r, %sy3, %zero) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"a zero y scale stays",
			"  const %sy4: f32[] = [0]\n" + conv + "  %y = QuantizeLinear(%c, %sy4, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"a NaN x scale stays",
			"  const %sx5: f32[] = [NaN]\n  %x5 = DequantizeLinear(%xq, %sx5, %zx) : f32[1,2,4,4]\n  %c = Conv(%x5, %w) {kernel_shape=[1,1]} : f32[1,2,4,4]\n" +
				"  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"an infinite weight scale stays",
			"  const %sw6: f32[2] = [0.25, inf]\n  %w6 = DequantizeLinear(%wq, %sw6, %zw) {axis=0} : f32[2,2,1,1]\n  %c = Conv(%x, %w6) {kernel_shape=[1,1]} : f32[1,2,4,4]\n" +
				"  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
		{"weights per channel along another axis stay",
			"  %w1 = DequantizeLinear(%wq, %sw, %zw) {axis=1} : f32[2,2,1,1]\n  %c = Conv(%x, %w1, %b) {kernel_shape=[1,1]} : f32[1,2,4,4]\n" +
				"  %y = QuantizeLinear(%c, %sy, %zy) : u8[1,2,4,4]\n  return %y\n", true, ""},
	}
	for _, c := range cases {
		body := qdqConsts + c.body
		got := qdqRun(t, body, c.all)
		want := c.want
		if want == "" {
			want = qdqRun(t, body, false)
			if strings.Contains(got, "QLinearConv") {
				t.Errorf("%s: rewritten:\n%s", c.name, got)
				continue
			}
		}
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}

// TestQDQConvZeroPoints: quantizers without zero points get constant zeros of their
// types (QLinearConv takes all three), the weights' shaped like their scales.
func TestQDQConvZeroPoints(t *testing.T) {
	body := `  const %sx: f32[] = [0.5]
  const %wq: i8[2,2,1,1] = [1, -2, 3, 4]
  const %sw: f32[2] = [0.25, 0.125]
  const %sy: f32[] = [0.75]
  %x = DequantizeLinear(%xq, %sx) : f32[1,2,4,4]
  %w = DequantizeLinear(%wq, %sw) {axis=0} : f32[2,2,1,1]
  %c = Conv(%x, %w) {kernel_shape=[1,1]} : f32[1,2,4,4]
  %y = QuantizeLinear(%c, %sy) : u8[1,2,4,4]
  return %y
`
	got := qdqRun(t, body, true)
	for _, want := range []string{
		"const %y_x_zero_point: u8[] = [0]", "const %y_w_zero_point: i8[2] = [0, 0]", "const %y_y_zero_point: u8[] = [0]",
		"%y = QLinearConv(%xq, %sx, %y_x_zero_point, %wq, %sw, %y_w_zero_point, %sy, %y_y_zero_point) {kernel_shape=[1,1]} : u8[1,2,4,4]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in\n%s", want, got)
		}
	}
}
