package codegen

import (
	"strings"

	"github.com/kilnrt/kiln/loopir"
)

// The C dialect's float32 math: exp, log, tanh, sigmoid and erf are static inline
// functions defined in the translation unit (only those its kernels call) instead of
// calls of the C library, so that the C compiler inlines them and vectorizes the loops
// around them (a call of expf or erff keeps a loop scalar). They are branch-free:
// special cases and the ranges of piecewise approximations are selects, and 2^n is built
// from exponent bits through a union, which gcc and clang turn into vector integer
// operations. Polynomial coefficients are minimax fits (Remez exchange in float64, then
// rounded to float32; erf's polynomial above 1 a Lawson-weighted least-squares fit,
// near-minimax) written for kiln; the measured errors, over every float32 input
// against float64 libm, are in doc.go. float64 keeps the C library's functions.

// cMathHelper is a C function defined in a unit's prelude when a kernel calls it.
type cMathHelper struct {
	name string
	deps []string // helpers its code calls, emitted before it
	code string
}

// cMathF32 maps the intrinsics with an inline float32 implementation to their helper.
var cMathF32 = map[loopir.Intrinsic]string{
	loopir.Exp: "kiln_expf", loopir.Log: "kiln_logf", loopir.Tanh: "kiln_tanhf",
	loopir.Sigmoid: "kiln_sigmoidf", loopir.Erf: "kiln_erff",
}

// cMathHelpers in emission order: a helper comes after the helpers it calls.
var cMathHelpers = []cMathHelper{
	{name: "kiln_f32u", code: `typedef union { float f; u32 u; } kiln_f32u;
`},
	{name: "kiln_expm1_reduced", code: `/* e^r - 1 where x = n ln2 + r, n an integer with |n| < 512 and |r| <= ln2/2: r = x - n ln2
   in two steps (Cody-Waite; n ln2hi is exact), then e^r - 1 = r + r^2 P(r) with P the
   minimax (relative) quartic, evaluated as a(r) + r^2 b(r) (a linear, b quadratic: two
   short chains side by side, small terms summed first). exp and sigmoid share it; they
   scale 2^n e^r as s w + s, one rounding. */
static inline __attribute__((always_inline)) float kiln_expm1_reduced(float x, float n) {
  float r = x - n * 0.693145752f;
  r = r - n * 1.42860677e-06f;
  float r2 = r * r;
  float a = 0.166665196f * r + 0.49999994f;
  float b = 0.00836878084f * r + 0.0416683927f;
  b = 0.00138144672f * r2 + b;
  return (r2 * b + a) * r2 + r;
}
`},
	{name: "kiln_expf", deps: []string{"kiln_f32u", "kiln_expm1_reduced"}, code: `/* e^x = 2^n e^r: n = round(x log2(e)) by the 1.5*2^23 shifter, e^r - 1 by
   kiln_expm1_reduced. x is clamped to [-104, 89] (e^x is 0 below, +inf above, NaN stays
   NaN); 2^n is built as 2^(n>>1) 2^(n-(n>>1)) so that the scaling rounds once, at
   overflow and in the subnormals. */
static inline __attribute__((always_inline)) float kiln_expf(float x) {
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  kiln_f32u t = { x * 1.44269504f + 12582912.0f };
  float n = t.f - 12582912.0f;
  float w = kiln_expm1_reduced(x, n);
  i32 k = (i32)(t.u - 0x4b400000u), k1 = k >> 1;
  kiln_f32u s1 = { .u = (u32)(k1 + 127) << 23 }, s2 = { .u = (u32)(k - k1 + 127) << 23 };
  return (s1.f * w + s1.f) * s2.f;
}
`},
	{name: "kiln_logf", deps: []string{"kiln_f32u"}, code: `/* log x = e ln2 + log1p(f): x = 2^e m with m in [sqrt(1/2), sqrt(2)) read from the bits
   (subnormals scaled by 2^23 first), f = m - 1, log1p(f) = f + f^2 P(f) (minimax,
   relative); log 0 = -inf, log +inf = +inf, negative and NaN give NaN. */
static inline __attribute__((always_inline)) float kiln_logf(float x) {
  i32 sub = x < 1.17549435e-38f;
  kiln_f32u v = { sub ? x * 8388608.0f : x };
  i32 e = (i32)(v.u - 0x3f3504f3u) >> 23;
  kiln_f32u m = { .u = v.u - ((u32)e << 23) };
  float f = m.f - 1.0f;
  float q = -0.0762112215f;
  q = q * f + 0.129046649f;
  q = q * f - 0.132434607f;
  q = q * f + 0.141818345f;
  q = q * f - 0.166090131f;
  q = q * f + 0.200019687f;
  q = q * f - 0.250015855f;
  q = q * f + 0.333333254f;
  q = q * f - 0.499999881f;
  float ef = (float)(sub ? e - 23 : e);
  float r = ef * 0.693145752f + ((f + f * f * q) + ef * 1.42860677e-06f);
  r = x == __builtin_inff() ? x : r;
  r = x == 0.0f ? -__builtin_inff() : r;
  return x >= 0.0f ? r : __builtin_nanf("");
}
`},
	{name: "kiln_tanhf", deps: []string{"kiln_expf"}, code: `/* |x| < 0.625: x + x^3 P(x^2) (minimax, relative); else sign(x) (1 - 2 / (e^2|x| + 1)),
   which is +-1 at +-inf and NaN at NaN. */
static inline __attribute__((always_inline)) float kiln_tanhf(float x) {
  float a = __builtin_fabsf(x), z = x * x;
  float q = -0.00565998908f;
  q = q * z + 0.0205909889f;
  q = q * z - 0.0537210666f;
  q = q * z + 0.133311272f;
  q = q * z - 0.333332598f;
  float r = a < 0.625f ? a + a * z * q : 1.0f - 2.0f / (kiln_expf(a + a) + 1.0f);
  return __builtin_copysignf(r, x);
}
`},
	{name: "kiln_sigmoidf", deps: []string{"kiln_f32u", "kiln_expm1_reduced"}, code: `/* sigmoid(x) = 2^-64 / (2^-64 + E), E = e^-x 2^-64 = 2^(n-64) (1 + w) with n =
   round(-x log2(e)) and w from kiln_expm1_reduced: no |x| and no select on the sign.
   The 2^-64 scale keeps E normal from x = -104 (E = 2^86) up to x = 20 (2^-93), so the
   quotient rounds once, also where the result is subnormal, and the tails keep their
   relative accuracy (1 + e^-x is never formed for x < 0). The denominator is taken as
   s w + (s + 2^-64), s = 2^(n-64): s + 2^-64 is exact for |n| <= 23 and off the
   polynomial's dependency chain. The shifter 1.5*2^23 + 63 leaves n + 63 in t's low
   bits, so t.u << 23 is s. x is clamped above at 20 (the result rounds to 1 from 16.7
   on); below, t is capped at n = 150 in the integers (one instruction): for x < -104, r
   leaves the polynomial's range but every term of w is then positive, so E only grows
   and the quotient is 0, -inf included. NaN passes the clamp and reaches r. */
static inline __attribute__((always_inline)) float kiln_sigmoidf(float x) {
  float c = 20.0f < x ? 20.0f : x;
  kiln_f32u t = { c * -1.44269504f + 12582975.0f };
  t.u = t.u < 0x4b4000d5u ? t.u : 0x4b4000d5u;
  float n = t.f - 12582975.0f;
  float w = kiln_expm1_reduced(-c, n);
  kiln_f32u s = { .u = t.u << 23 };
  return 0x1p-64f / (s.f * w + (s.f + 0x1p-64f));
}
`},
	{name: "kiln_erff", code: `/* |x| < 1: x P(x^2) (minimax, relative); else sign(x) Q(|x| - 2.5) with Q the degree-12
   polynomial fitted to erf on [1, 3.92] (absolute; Lawson-weighted least squares in
   float64, no exp), capped at 1; |x| is clamped to 3.92, and from there on the result is
   1, where erf rounds to 1 (NaN stays NaN). */
static inline __attribute__((always_inline)) float kiln_erff(float x) {
  float a = __builtin_fabsf(x), z = x * x;
  float p = 7.85386146e-05f;
  p = p * z - 0.000801019371f;
  p = p * z + 0.00518832775f;
  p = p * z - 0.0268538129f;
  p = p * z + 0.112835854f;
  p = p * z - 0.37612626f;
  p = p * z + 1.12837911f;
  float t = (a > 3.92f ? 3.92f : a) - 2.5f;
  float q = -9.12469841e-06f;
  q = q * t + 2.10406452e-05f;
  q = q * t + 6.18880003e-05f;
  q = q * t - 0.000278900232f;
  q = q * t + 0.000286505383f;
  q = q * t + 0.00057036971f;
  q = q * t - 0.00281817303f;
  q = q * t + 0.0061032474f;
  q = q * t - 0.00861531869f;
  q = q * t + 0.00835323613f;
  q = q * t - 0.00544665242f;
  q = q * t + 0.00217808038f;
  q = q * t + 0.999593079f;
  q = q > 1.0f ? 1.0f : q;
  q = a >= 3.92f ? 1.0f : q;
  return a < 1.0f ? x * p : __builtin_copysignf(q, x);
}
`},
	{name: "kiln_sigmoid", code: `static inline double kiln_sigmoid(double x) { return 1.0 / (1.0 + __builtin_exp(-x)); }
`},
}

// useMath records that the unit needs a helper and the helpers it calls.
func (s *intrinSet) useMath(name string) {
	if s.math[name] {
		return
	}
	s.math[name] = true
	for _, h := range allMathHelpers() {
		if h.name == name {
			for _, d := range h.deps {
				s.useMath(d)
			}
		}
	}
}

// writeMathHelpers defines the helpers the unit uses, in dependency order.
func writeMathHelpers(b *strings.Builder, used map[string]bool) {
	for _, h := range allMathHelpers() {
		if used[h.name] {
			b.WriteString(h.code)
		}
	}
}

// allMathHelpers are the math helpers and the half-float conversions (c_half.go), in
// emission order.
func allMathHelpers() []cMathHelper {
	return append(cMathHelpers[:len(cMathHelpers):len(cMathHelpers)], cHalfHelpers...)
}
