package codegen

import (
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// Half floats in a HalfBits dialect: elements are their bits, and the only arithmetic on
// them is conversion to and from float32, bit-exact with package tensor (F16ToF32,
// F32ToF16, BF16ToF32, F32ToBF16): widening is exact, narrowing rounds to nearest even,
// overflows to infinity, and keeps NaN a quiet NaN with the payload's high bits.

func isHalf(dt tensor.DType) bool { return dt == tensor.Float16 || dt == tensor.BFloat16 }

var halfHelpers = map[[2]tensor.DType]string{
	{tensor.Float16, tensor.Float32}:  "kiln_f16_to_f32",
	{tensor.Float32, tensor.Float16}:  "kiln_f32_to_f16",
	{tensor.BFloat16, tensor.Float32}: "kiln_bf16_to_f32",
	{tensor.Float32, tensor.BFloat16}: "kiln_f32_to_bf16",
}

// halfCast prints a Cast whose source or target is a half float; other pairs go
// through float32 in the compute definition.
func (e *cEmitter) halfCast(x *loopir.Cast) string {
	from := x.X.DType()
	if from == x.To {
		return e.expr(x.X)
	}
	h, ok := halfHelpers[[2]tensor.DType{from, x.To}]
	if !ok || !e.d.HalfBits {
		e.fail("cast from %v to %v", from, x.To)
		return "0"
	}
	e.intrins.useMath(h)
	return h + "(" + e.expr(x.X) + ")"
}

// cHalfHelpers are the conversions, as math helpers (c_math.go).
var cHalfHelpers = []cMathHelper{
	{name: "kiln_f16_to_f32", deps: []string{"kiln_f32u"}, code: `/* float16 bits to float: normal numbers move the exponent (bias 15 to 127) and the
   fraction; subnormals are m 2^-24, exact in float; infinities and NaNs keep the
   fraction's bits. */
static inline float kiln_f16_to_f32(u16 h) {
  u32 s = (u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  kiln_f32u r;
  if (e == 0x1fu) r.u = s | 0x7f800000u | (m << 13);
  else if (e != 0) r.u = s | ((e + 112u) << 23) | (m << 13);
  else { r.f = (float)m * 5.9604644775390625e-08f; r.u |= s; }
  return r.f;
}
`},
	{name: "kiln_f32_to_f16", deps: []string{"kiln_f32u"}, code: `/* float to float16 bits, round to nearest even. NaN: quiet, the fraction's top bits;
   |x| >= 65520 (half way past the largest half, 65504): infinity; |x| < 2^-14: a
   subnormal m 2^-24, m rounded by the float addition |x| + 0.5 (whose ulp is 2^-24);
   else the exponent rebiased and the 13 dropped bits rounded by integer addition (a
   carry into the exponent is the correct rounding up). */
static inline u16 kiln_f32_to_f16(float f) {
  kiln_f32u v = { f };
  u32 s = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
  if (a > 0x7f800000u) return (u16)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (u16)(s | 0x7c00u);
  if (a < 0x38800000u) {
    kiln_f32u t = { __builtin_fabsf(f) + 0.5f };
    return (u16)(s | (t.u - 0x3f000000u));
  }
  return (u16)(s | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
}
`},
	{name: "kiln_bf16_to_f32", deps: []string{"kiln_f32u"}, code: `/* bfloat16 bits are the float's high half. */
static inline float kiln_bf16_to_f32(u16 b) {
  kiln_f32u r = { .u = (u32)b << 16 };
  return r.f;
}
`},
	{name: "kiln_f32_to_bf16", deps: []string{"kiln_f32u"}, code: `/* float to bfloat16 bits, round to nearest even on the low half (a carry into the
   exponent rounds up, to infinity past the largest); NaN: quiet, the high half. */
static inline u16 kiln_f32_to_bf16(float f) {
  kiln_f32u v = { f };
  if (f != f) return (u16)((v.u >> 16) | 0x40u);
  return (u16)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
`},
}
