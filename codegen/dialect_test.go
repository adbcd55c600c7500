package codegen_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// lowerExpSqrt lowers y = exp(x) + sqrt(x) over a symbolic extent.
func lowerExpSqrt(t *testing.T) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, n)
	y := te.Compute("Y", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr {
		return te.Add(te.Exp(x.At(i[0])), te.Sqrt(x.At(i[0])))
	})
	f, err := te.Lower("exp_sqrt", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	g, err := passes.CPUPipeline().Run(f)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestEmitWithCDialectIsEmitC(t *testing.T) {
	for _, f := range []*loopir.PrimFunc{lowerMatmul(t), lowerPackedMatMul(t), lowerExpSqrt(t)} {
		want, err := codegen.EmitC(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codegen.Emit(codegen.CDialect(), codegen.COptions{}, f)
		if err != nil {
			t.Fatal(err)
		}
		if got.Code != want.Code || got.Lang != "c" {
			t.Errorf("%s: Emit(CDialect()) differs from EmitC", f.Name)
		}
	}
}

// TestDialectDecidesQualifiersTypesAndMath changes each point a dialect owns and finds
// the change in the printed kernel.
func TestDialectDecidesQualifiersTypesAndMath(t *testing.T) {
	d := codegen.CDialect()
	d.Name = "test-c"
	d.Prelude = "/* test prelude */\n"
	d.KernelQualifier = "__kernel"
	d.Restrict = ""
	d.Types[tensor.Float32] = "real"
	d.InlineMathF32 = false
	d.Math = func(base string, dt tensor.DType) string { return "m_" + base + "_" + dt.String() }
	src, err := codegen.Emit(d, codegen.COptions{}, lowerExpSqrt(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/* test prelude */\n", "\n__kernel int ", "real *v_X = (real *)bufs[0]", "m_exp_f32(", "m_sqrt_f32("} {
		if !strings.Contains(src.Code, want) {
			t.Errorf("the kernel lacks %q:\n%s", want, src.Code)
		}
	}
	for _, not := range []string{"restrict", "kiln_expf", "__builtin_", "typedef long long"} {
		if strings.Contains(src.Code, not) {
			t.Errorf("the kernel has %q:\n%s", not, src.Code)
		}
	}
	if src.Lang != "test-c" {
		t.Errorf("Lang = %q, want the dialect's name", src.Lang)
	}
}

func TestDialectRefusesWhatItCannotPrint(t *testing.T) {
	cases := []struct {
		name string
		f    func(*testing.T) *loopir.PrimFunc
		edit func(*codegen.Dialect)
	}{
		{"parallel form", lowerPackedMatMul, func(d *codegen.Dialect) { d.Parallel = codegen.ParallelForm(7) }},
		{"vector form", lowerAddRows, func(d *codegen.Dialect) { d.Vector = codegen.VectorForm(7) }},
		{"tensor intrinsic in another language", lowerPackedMatMul, func(d *codegen.Dialect) { d.Name = "opencl" }},
		{"element type", lowerPackedMatMul, func(d *codegen.Dialect) { delete(d.Types, tensor.Float32) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := codegen.CDialect()
			c.edit(d)
			f := c.f(t)
			if _, err := codegen.Emit(codegen.CDialect(), codegen.COptions{}, f); err != nil {
				t.Fatalf("the C dialect prints it: %v", err)
			}
			_, err := codegen.Emit(d, codegen.COptions{}, f)
			if !errors.Is(err, codegen.ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
		})
	}
}
