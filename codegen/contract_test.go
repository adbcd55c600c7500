package codegen_test

import (
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/loopir"
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
