package codegen_test

import (
	"math"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// mulAdd is Y[i] = A[i]·B[i] + C[i] over n elements, its loop vectorized.
func mulAdd(name string, noContract bool) *loopir.PrimFunc {
	n, i := loopir.NewVar("n"), loopir.NewVar("i")
	buf := func(name string) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	}
	a, b, c, y := buf("A"), buf("B"), buf("C"), buf("Y")
	at := func(x *loopir.Buffer) loopir.Expr { return &loopir.Load{Buf: x, Index: []loopir.Expr{i}} }
	body := &loopir.For{Var: i, Min: loopir.Int(0), Extent: n, Kind: loopir.Vectorized,
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{i}, Value: loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, at(a), at(b)), at(c))}}
	return &loopir.PrimFunc{Name: name, Params: []*loopir.Buffer{a, b, c, y}, Dims: []*loopir.Var{n}, Body: body, NoContract: noContract}
}

// TestNoContractProductsRoundBeforeTheAdd: a function without contraction computes
// round(round(a·b) + c), as separate Mul and Add nodes do, where a fused multiply-add
// gives a·b + c rounded once: with a = b = 1 + 2⁻¹² the exact product 1 + 2⁻¹¹ + 2⁻²⁴
// rounds (a tie, to even) to 1 + 2⁻¹¹, and c = −(1 + 2⁻¹¹) leaves 0, not 2⁻²⁴.
func TestNoContractProductsRoundBeforeTheAdd(t *testing.T) {
	const n = 67 // vector bodies and a remainder
	x := float32(1 + math.Ldexp(1, -12))
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		a[i], b[i], c[i] = x, x, -float32(1+math.Ldexp(1, -11))
	}
	got := kerneltest.Run(t, mulAdd("mul_add", true), []int64{n}, n, a, b, c)
	for i, v := range got {
		if v != 0 {
			t.Fatalf("element %d: got %g, want 0 (the product rounded before the add)", i, v)
		}
	}
}

// TestNoContractBracketsOnlyItsFunction: each dialect prints a function without
// contraction its own way (C: gcc's optimize and clang's fp pragmas around it, OpenCL
// C: FP_CONTRACT around it, CUDA: products through __fmul_rn), and a function of the
// same unit that allows contraction prints as before.
func TestNoContractBracketsOnlyItsFunction(t *testing.T) {
	for _, tc := range []struct {
		d    *codegen.Dialect
		want *regexp.Regexp // the exact function, and the other after it unchanged
	}{
		{codegen.CDialect(), regexp.MustCompile(`(?s)#pragma GCC push_options\n#pragma GCC optimize \("fp-contract=off"\).*int v_exact\(.*#pragma GCC pop_options\n#endif\n\nint v_fused\(`)},
		{codegen.OpenCLDialect(), regexp.MustCompile(`(?s)#pragma OPENCL FP_CONTRACT OFF\n.*void v_exact\(.*#pragma OPENCL FP_CONTRACT ON\n\n__kernel void v_fused\(`)},
		{codegen.CUDADialect(), regexp.MustCompile(`(?s)void v_exact\(.*__fmul_rn\(.*void v_fused\(`)},
	} {
		src, err := codegen.Emit(tc.d, codegen.COptions{}, mulAdd("exact", true), mulAdd("fused", false))
		if err != nil {
			t.Fatalf("%s: %v", tc.d.Name, err)
		}
		if !tc.want.MatchString(src.Code) {
			t.Errorf("%s: the exact function is not bracketed as expected:\n%s", tc.d.Name, src.Code)
		}
		_, fused, _ := strings.Cut(src.Code, "void v_fused(")
		if fused == "" {
			_, fused, _ = strings.Cut(src.Code, "int v_fused(")
		}
		if strings.Contains(fused, "__fmul_rn") || strings.Contains(fused, "FP_CONTRACT") || strings.Contains(fused, "fp-contract") {
			t.Errorf("%s: the contracting function prints without contraction too:\n%s", tc.d.Name, fused)
		}
	}
}

// fmaIntrin is a tensor intrinsic Y[j] = A[j]·B[j] + C[j] (j < n) whose C
// implementation the compiler contracts where the unit's options let it.
func fmaIntrin() *loopir.TensorIntrin {
	n, j := loopir.NewVar("n"), loopir.NewVar("j")
	buf := func(name string) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: tensor.Float32, Shape: []loopir.Expr{n}, Scope: "global"}
	}
	y, a, b, c := buf("Y"), buf("A"), buf("B"), buf("C")
	at := func(x *loopir.Buffer) loopir.Expr { return &loopir.Load{Buf: x, Index: []loopir.Expr{j}} }
	desc := &loopir.PrimFunc{Name: "fma_desc", Params: []*loopir.Buffer{y, a, b, c}, Dims: []*loopir.Var{n},
		Body: &loopir.For{Var: j, Min: loopir.Int(0), Extent: n, Body: &loopir.Block{Name: "fma",
			Body: &loopir.Store{Buf: y, Index: []loopir.Expr{j}, Value: loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, at(a), at(b)), at(c))}}}}
	impl := `static inline __attribute__((always_inline)) void test_fma(
    float *restrict y, i64 y_s, const float *restrict a, i64 a_s, const float *restrict b, i64 b_s,
    const float *restrict c, i64 c_s, i64 n) {
  for (i64 j = 0; j < n; ++j) y[j * y_s] = a[j * a_s] * b[j * b_s] + c[j * c_s];
}
`
	return &loopir.TensorIntrin{Name: "test_fma", Desc: desc, Impl: map[string]string{"c": impl}}
}

// TestNoContractKeepsIntrinsicsContracted: a function without contraction that calls a
// float tensor intrinsic (a micro-kernel's reduction) and then multiplies and adds
// element-wise: the intrinsic runs through its wrapper with the unit's contraction
// (a·b + c rounded once where the target fuses multiply-adds), the function's own
// arithmetic still rounds the product before the add. The inputs are those of
// TestNoContractProductsRoundBeforeTheAdd: fused 2⁻²⁴, separate 0.
func TestNoContractKeepsIntrinsicsContracted(t *testing.T) {
	const n = 19
	in := fmaIntrin()
	nv, i := loopir.NewVar("n"), loopir.NewVar("i")
	buf := func(name string, ext loopir.Expr) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: tensor.Float32, Shape: []loopir.Expr{ext}, Scope: "global"}
	}
	a, b, c := buf("A", nv), buf("B", nv), buf("C", nv)
	y := buf("Y", loopir.Bin(loopir.Mul, nv, loopir.Int(2)))
	addr := func(x *loopir.Buffer, at loopir.Expr) loopir.Expr {
		return &loopir.Address{Buf: x, Index: []loopir.Expr{at}}
	}
	one := loopir.Int(1)
	call := &loopir.IntrinCall{Intrin: in, Args: []loopir.Expr{addr(y, loopir.Int(0)), one, addr(a, loopir.Int(0)), one,
		addr(b, loopir.Int(0)), one, addr(c, loopir.Int(0)), one, nv}}
	load := func(x *loopir.Buffer) loopir.Expr { return &loopir.Load{Buf: x, Index: []loopir.Expr{i}} }
	elementwise := &loopir.For{Var: i, Min: loopir.Int(0), Extent: nv,
		Body: &loopir.Store{Buf: y, Index: []loopir.Expr{loopir.Bin(loopir.Add, i, nv)},
			Value: loopir.Bin(loopir.Add, loopir.Bin(loopir.Mul, load(a), load(b)), load(c))}}
	f := &loopir.PrimFunc{Name: "exact_around", Params: []*loopir.Buffer{a, b, c, y}, Dims: []*loopir.Var{nv},
		Body: loopir.Seq{call, elementwise}, NoContract: true}

	src, err := codegen.EmitC(f)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?s)static __attribute__\(\(noinline\)\) void test_fma_contracted\(.*\) \{\n  test_fma\(y, y_s, a, a_s, b, b_s, c, c_s, n\);\n\}\n.*#pragma GCC optimize \("fp-contract=off"\).*test_fma_contracted\(`).MatchString(src.Code) {
		t.Fatalf("the intrinsic is not called through a contracted wrapper defined before the function:\n%s", src.Code)
	}

	x := float32(1 + math.Ldexp(1, -12))
	av, bv, cv := make([]float32, n), make([]float32, n), make([]float32, n)
	for k := range n {
		av[k], bv[k], cv[k] = x, x, -float32(1+math.Ldexp(1, -11))
	}
	got := kerneltest.Run(t, f, []int64{n}, 2*n, av, bv, cv)
	fused := slices.Contains(target.Host().Features, "fma") || runtime.GOARCH == "arm64"
	for k := range n {
		if fused && got[k] != float32(math.Ldexp(1, -24)) {
			t.Fatalf("intrinsic, element %d: got %g, want 2⁻²⁴ (one rounding: the target fuses multiply-adds)", k, got[k])
		}
		if got[n+k] != 0 {
			t.Fatalf("element-wise, element %d: got %g, want 0 (the product rounded before the add)", k, got[n+k])
		}
	}
}

// TestContractedWrapperNeedsTheInlineHeader: an implementation that does not open as
// the intrinsics' C implementations do gets no wrapper (its call inlines as before).
func TestContractedWrapperNeedsTheInlineHeader(t *testing.T) {
	in := fmaIntrin()
	in.Impl["c"] = strings.Replace(in.Impl["c"], "static inline __attribute__((always_inline)) void", "static void", 1)
	nv := loopir.NewVar("n")
	buf := func(name string) *loopir.Buffer {
		return &loopir.Buffer{Name: name, DT: tensor.Float32, Shape: []loopir.Expr{nv}, Scope: "global"}
	}
	y, a, b, c := buf("Y"), buf("A"), buf("B"), buf("C")
	addr := func(x *loopir.Buffer) loopir.Expr {
		return &loopir.Address{Buf: x, Index: []loopir.Expr{loopir.Int(0)}}
	}
	one := loopir.Int(1)
	f := &loopir.PrimFunc{Name: "exact_call", Params: []*loopir.Buffer{a, b, c, y}, Dims: []*loopir.Var{nv}, NoContract: true,
		Body: &loopir.IntrinCall{Intrin: in, Args: []loopir.Expr{addr(y), one, addr(a), one, addr(b), one, addr(c), one, nv}}}
	src, err := codegen.EmitC(f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src.Code, "_contracted") || !strings.Contains(src.Code, "  test_fma(") {
		t.Fatalf("want a direct call and no wrapper:\n%s", src.Code)
	}
}
