package codegen_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// mapKernel lowers Y[i] = f(X[i]) over n elements of the given types.
func mapKernel(t *testing.T, name string, in, out tensor.DType, n int64, f func(x loopir.Expr) loopir.Expr) *loopir.PrimFunc {
	t.Helper()
	x := te.Placeholder("X", in, loopir.Int(n))
	y := te.Compute("Y", []loopir.Expr{loopir.Int(n)}, func(i []loopir.Expr) loopir.Expr { return f(x.At(i[0])) })
	if y.DT != out {
		t.Fatalf("BUG: %s computes %v, want %v", name, y.DT, out)
	}
	fn, err := te.Lower(name, []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return fn
}

// TestInverseTrigPrintsInEveryDialect: each new intrinsic prints as the language's
// function of its C99 name (suffixed for float32 where the language is not overloaded).
func TestInverseTrigPrintsInEveryDialect(t *testing.T) {
	fns := map[loopir.Intrinsic]string{loopir.Asin: "asin", loopir.Acos: "acos", loopir.Atan: "atan",
		loopir.Asinh: "asinh", loopir.Acosh: "acosh", loopir.Atanh: "atanh"}
	for fn, base := range fns {
		call := func(x loopir.Expr) loopir.Expr { return &loopir.Call{Fn: fn, Args: []loopir.Expr{x}} }
		f := mapKernel(t, base, tensor.Float32, tensor.Float32, 100, call)
		low, err := passes.CPUPipeline().Run(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := codegen.EmitC(low)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Code, "__builtin_"+base+"f(") {
			t.Errorf("C: no __builtin_%sf call:\n%s", base, c.Code)
		}
		g, _ := bindFlat(t, mapKernel(t, base, tensor.Float32, tensor.Float32, 100, call), "Y")
		for _, d := range []struct {
			dialect *codegen.Dialect
			want    string
		}{{codegen.CUDADialect(), base + "f("}, {codegen.OpenCLDialect(), base + "("}} {
			src, err := codegen.Emit(d.dialect, codegen.COptions{}, g)
			if err != nil {
				t.Fatalf("%s: %v", d.dialect.Name, err)
			}
			if !strings.Contains(src.Code, d.want) {
				t.Errorf("%s: no %q call:\n%s", d.dialect.Name, d.want, src.Code)
			}
		}
	}
}

// TestShiftsByTheWidthOrMoreGiveZero runs x << s and x >> s for every count from 0 to
// width+2 on each unsigned width, against Go's shifts (which give 0 past the width), and
// checks the C has no unguarded shift.
func TestShiftsByTheWidthOrMoreGiveZero(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64} {
		w := int64(8 * dt.Size())
		for _, op := range []loopir.BinOp{loopir.Shl, loopir.Shr} {
			n := w + 3
			x := te.Placeholder("X", dt, loopir.Int(n))
			sh := te.Placeholder("S", dt, loopir.Int(n))
			y := te.Compute("Y", []loopir.Expr{loopir.Int(n)}, func(i []loopir.Expr) loopir.Expr {
				return loopir.Bin(op, x.At(i[0]), sh.At(i[0]))
			})
			f, err := te.Lower("shift", []*te.Tensor{x, sh}, []*te.Tensor{y})
			if err != nil {
				t.Fatal(err)
			}
			xs, ss := make([]int64, n), make([]int64, n)
			want := make([]int64, n)
			mask := uint64(math.MaxUint64) >> (64 - w)
			for i := range xs {
				v := (uint64(0xfedcba9876543210) >> (i % 7)) & mask
				xs[i], ss[i] = int64(v), int64(i)
				if op == loopir.Shl {
					want[i] = int64((v << uint(i)) & mask)
				} else {
					want[i] = int64(v >> uint(i))
				}
			}
			in := []*tensor.Tensor{tensor.FromInt64s(dt, tensor.Shape{int(n)}, xs), tensor.FromInt64s(dt, tensor.Shape{int(n)}, ss)}
			got := kerneltest.RunTensors(t, f, in, dt, tensor.Shape{int(n)})
			for i, g := range got.Int64s() {
				if g != want[i] {
					t.Errorf("%v %v: %#x %v %d = %#x, want %#x", dt, op, xs[i], op, ss[i], g, want[i])
				}
			}
		}
	}
}

// TestHalfConversionsAreBitExact converts every float16 and bfloat16 to float32 and a
// spread of float32 values (every 257th bit pattern, the rounding and overflow
// boundaries, subnormals) to both, against package tensor's conversions.
func TestHalfConversionsAreBitExact(t *testing.T) {
	all := make([]int64, 1<<16)
	for i := range all {
		all[i] = int64(i)
	}
	var f32 []float32
	for u := uint64(0); u < 1<<32; u += 257 {
		f32 = append(f32, math.Float32frombits(uint32(u)))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 14 {
		f32 = append(f32, math.Float32frombits(r.Uint32()))
	}
	for _, v := range []float32{0, 65504, 65519.99, 65520, 65536, 1 + 1.0/2048, 1 + 3.0/2048, 5.9604645e-08, 2.9802322e-08,
		2.9802326e-08, 6.097555e-05, 6.1035156e-05, 1.0039062, 1.0058594, float32(math.Inf(1)), float32(math.NaN())} {
		f32 = append(f32, v, -v)
	}
	widen := map[tensor.DType]func(int64) float32{
		tensor.Float16:  func(b int64) float32 { return tensor.F16ToF32(tensor.Float16Bits(b)) },
		tensor.BFloat16: func(b int64) float32 { return tensor.BF16ToF32(tensor.BFloat16Bits(b)) },
	}
	narrow := map[tensor.DType]func(float32) int64{
		tensor.Float16:  func(v float32) int64 { return int64(tensor.F32ToF16(v)) },
		tensor.BFloat16: func(v float32) int64 { return int64(tensor.F32ToBF16(v)) },
	}
	for _, h := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		up := mapKernel(t, "widen", h, tensor.Float32, int64(len(all)), func(x loopir.Expr) loopir.Expr { return te.Cast(tensor.Float32, x) })
		got := kerneltest.RunTensors(t, up, []*tensor.Tensor{bitsTensor(h, all)}, tensor.Float32, tensor.Shape{len(all)}).Data.([]float32)
		for i, g := range got {
			w := widen[h](all[i])
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				t.Fatalf("%v %#04x → %v, want %v", h, all[i], g, w)
			}
		}
		down := mapKernel(t, "narrow", tensor.Float32, h, int64(len(f32)), func(x loopir.Expr) loopir.Expr { return te.Cast(h, x) })
		out := kerneltest.RunTensors(t, down, []*tensor.Tensor{tensor.MustFromSlice(tensor.Shape{len(f32)}, f32)}, h, tensor.Shape{len(f32)})
		for i, g := range halfBits(out) {
			if w := narrow[h](f32[i]); g != w {
				t.Fatalf("%v: %v (%#08x) → %#04x, want %#04x", h, f32[i], math.Float32bits(f32[i]), g, w)
			}
		}
	}
}

func bitsTensor(dt tensor.DType, v []int64) *tensor.Tensor {
	if dt == tensor.Float16 {
		b := make([]tensor.Float16Bits, len(v))
		for i := range v {
			b[i] = tensor.Float16Bits(v[i])
		}
		return tensor.MustFromSlice(tensor.Shape{len(v)}, b)
	}
	b := make([]tensor.BFloat16Bits, len(v))
	for i := range v {
		b[i] = tensor.BFloat16Bits(v[i])
	}
	return tensor.MustFromSlice(tensor.Shape{len(v)}, b)
}

func halfBits(t *tensor.Tensor) []int64 {
	var out []int64
	switch d := t.Data.(type) {
	case []tensor.Float16Bits:
		for _, v := range d {
			out = append(out, int64(v))
		}
	case []tensor.BFloat16Bits:
		for _, v := range d {
			out = append(out, int64(v))
		}
	}
	return out
}

// TestHalfFloatArithmeticIsRefused: half floats are bits in C; adding them, a half
// literal, a math call on them, or a cast other than to and from float32 is
// ErrUnsupported, never integer arithmetic on the bits.
func TestHalfFloatArithmeticIsRefused(t *testing.T) {
	cases := map[string]func(x loopir.Expr) loopir.Expr{
		"add":     func(x loopir.Expr) loopir.Expr { return te.Add(x, x) },
		"literal": func(x loopir.Expr) loopir.Expr { return loopir.Float(1, tensor.Float16) },
		"call":    func(x loopir.Expr) loopir.Expr { return te.Exp(x) },
		"cast":    func(x loopir.Expr) loopir.Expr { return te.Cast(tensor.Float16, te.Cast(tensor.Float64, x)) },
	}
	for name, f := range cases {
		fn := mapKernel(t, name, tensor.Float16, tensor.Float16, 8, f)
		low, err := passes.CPUPipeline().Run(fn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := codegen.EmitC(low); !errors.Is(err, codegen.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

// TestBitwiseOpsKeepTheirTypeUnderPromotion runs x & y, x | y, x ^ y and x ^ ones (ones
// the type's all-ones value, as kernels writes BitwiseNot) on each integer width, each
// result cast to int64 in the same expression, so that a value C promoted to int and
// left out of the type's range (uint8 0xf0 ^ 0xff as -241) would show, against Go's
// operators; and checks that CUDA and OpenCL print the operators.
func TestBitwiseOpsKeepTheirTypeUnderPromotion(t *testing.T) {
	const n = 19
	ops := []loopir.BinOp{loopir.BitAnd, loopir.BitOr, loopir.BitXor}
	for _, dt := range []tensor.DType{tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
		tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64} {
		ones := int64(-1)
		if dt.IsUnsigned() && dt.Size() < 8 {
			ones = int64(1)<<(8*dt.Size()) - 1
		}
		xs, ys := make([]int64, n), make([]int64, n)
		for i := range xs {
			xs[i] = int64(uint64(0xf0e1d2c3b4a59687) >> (3 * (i % 9)))
			ys[i] = int64(uint64(0x0ff00ff0ff00ff00) << (i % 5))
		}
		xs[0], ys[0] = -0x0f0f0f0f0f0f0f10, -1 // 0xf0f0…f0 against all ones
		in := []*tensor.Tensor{tensor.FromInt64s(dt, tensor.Shape{n}, xs), tensor.FromInt64s(dt, tensor.Shape{n}, ys)}
		xv, yv := in[0].Int64s(), in[1].Int64s() // wrapped into dt
		for k, op := range append(ops, loopir.BitXor) {
			not := k == len(ops)
			x := te.Placeholder("X", dt, loopir.Int(n))
			y := te.Placeholder("Z", dt, loopir.Int(n))
			out := te.Compute("Y", []loopir.Expr{loopir.Int(n)}, func(i []loopir.Expr) loopir.Expr {
				b := y.At(i[0])
				if not {
					b = &loopir.IntImm{V: ones, DT: dt}
				}
				return te.Cast(tensor.Int64, loopir.Bin(op, x.At(i[0]), b))
			})
			params := []*te.Tensor{x, y}
			args := in
			if not {
				params, args = params[:1], in[:1]
			}
			f, err := te.Lower("bits", params, []*te.Tensor{out})
			if err != nil {
				t.Fatal(err)
			}
			got := kerneltest.RunTensors(t, f, args, tensor.Int64, tensor.Shape{n}).Int64s()
			for i := range got {
				b := yv[i]
				if not {
					b = ones
				}
				want := map[loopir.BinOp]int64{loopir.BitAnd: xv[i] & b, loopir.BitOr: xv[i] | b, loopir.BitXor: xv[i] ^ b}[op]
				want = tensor.FromInt64s(dt, tensor.Shape{1}, []int64{want}).Int64s()[0]
				if got[i] != want {
					t.Errorf("%v: %#x %v %#x = %#x, want %#x", dt, xv[i], op, b, got[i], want)
				}
			}
			if dt != tensor.Int32 || not {
				continue
			}
			g, _ := bindFlat(t, f, "Y")
			for _, d := range []*codegen.Dialect{codegen.CUDADialect(), codegen.OpenCLDialect()} {
				src, err := codegen.Emit(d, codegen.COptions{}, g)
				if err != nil {
					t.Fatalf("%s: %v", d.Name, err)
				}
				if !strings.Contains(src.Code, " "+op.String()+" ") {
					t.Errorf("%s: no %q:\n%s", d.Name, op, src.Code)
				}
			}
		}
	}
}
