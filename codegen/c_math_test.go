package codegen_test

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/kerneltest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// mathCase is one float32 math helper: the intrinsic, its float64 reference and the
// error bound the test asserts (in float32 ulps of the reference, or absolute).
type mathCase struct {
	name    string
	call    func(loopir.Expr) loopir.Expr
	ref     func(float64) float64
	maxULP  float64 // 0: no ulp bound
	maxAbs  float64 // 0: no absolute bound
	special [][2]float32
}

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
)

var mathCases = []mathCase{
	{name: "exp", call: te.Exp, ref: math.Exp, maxULP: 1.5, special: [][2]float32{
		{0, 1}, {inf, inf}, {-inf, 0}, {nan, nan}, {89, inf}, {88.8, inf}, {1e30, inf},
		{-104, 0}, {-1e30, 0}, {-103.28, 1.4e-45}, {math.MaxFloat32, inf}}},
	{name: "log", call: te.Log, ref: math.Log, maxULP: 1.5, special: [][2]float32{
		{1, 0}, {0, -inf}, {-0.0, -inf}, {inf, inf}, {-inf, nan}, {-1, nan}, {nan, nan},
		{-1e-45, nan}}},
	{name: "tanh", call: te.Tanh, ref: math.Tanh, maxULP: 2, special: [][2]float32{
		{0, 0}, {inf, 1}, {-inf, -1}, {nan, nan}, {20, 1}, {-20, -1}, {math.MaxFloat32, 1}}},
	{name: "sigmoid", call: te.Sigmoid, ref: sigmoid64, maxULP: 3, special: [][2]float32{
		{0, 0.5}, {inf, 1}, {-inf, 0}, {nan, nan}, {-200, 0}, {math.MaxFloat32, 1}, {-math.MaxFloat32, 0},
		{20, 1}, {1e30, 1}, {-103, 1.4e-45}, {-104, 0}, {-110, 0}, {-1e30, 0}}},
	{name: "erf", call: te.Erf, ref: math.Erf, maxAbs: 1e-6, maxULP: 3, special: [][2]float32{
		{0, 0}, {inf, 1}, {-inf, -1}, {nan, nan}, {5, 1}, {-5, -1}, {math.MaxFloat32, 1}}},
}

func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	return math.Exp(x) / (1 + math.Exp(x))
}

func unaryKernel(t *testing.T, name string, call func(loopir.Expr) loopir.Expr) *loopir.PrimFunc {
	t.Helper()
	n := te.Dim("n")
	x := te.Placeholder("X", tensor.Float32, n)
	y := te.Compute("Y", []loopir.Expr{n}, func(i []loopir.Expr) loopir.Expr { return call(x.At(i[0])) })
	f, err := te.Lower(name, []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// mathInputs: every 4099th float32 bit pattern (all exponents, both signs, subnormals,
// infinities, NaNs), dense steps around the pieces' boundaries, random moderate values
// and -0.
func mathInputs() []float32 {
	var in []float32
	for u := uint64(0); u < 1<<32; u += 4099 {
		in = append(in, math.Float32frombits(uint32(u)))
	}
	for _, c := range []float32{0, 0.625, 1, 4, 16.635532, 20, 88.72283, -87.33655, -103.27893, -103.972084, 1.1754944e-38, 0.70710677, 1.4142135} {
		for _, s := range []float32{1, -1} {
			v := s * c
			for range 2000 {
				in = append(in, v)
				v = math.Nextafter32(v, inf)
			}
			v = s * c
			for range 2000 {
				v = math.Nextafter32(v, -inf)
				in = append(in, v)
			}
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	for range 200000 {
		in = append(in, float32(r.NormFloat64()*4))
	}
	return append(in, float32(math.Copysign(0, -1)))
}

// ulp is the spacing of float32 values at y (the subnormal spacing below the normals).
func ulp(y float64) float64 {
	y = math.Abs(y)
	if y < 0x1p-126 {
		return 0x1p-149
	}
	_, e := math.Frexp(y)
	return math.Ldexp(1, e-24)
}

// TestMathHelpersAccuracy compiles each float32 math helper in a kernel and compares it
// with the float64 math package on a sweep of the whole float32 range.
func TestMathHelpersAccuracy(t *testing.T) { checkMathAccuracy(t, false) }

// TestMathHelpersAccuracyWithoutContraction: the same bounds hold in a kernel whose
// products round before the adds (loopir.PrimFunc.NoContract, a quantizer's input), as
// they do on a target without fused multiply-add.
func TestMathHelpersAccuracyWithoutContraction(t *testing.T) { checkMathAccuracy(t, true) }

func checkMathAccuracy(t *testing.T, noContract bool) {
	in := mathInputs()
	for _, c := range mathCases {
		t.Run(c.name, func(t *testing.T) {
			xs := append(append([]float32(nil), in...), specials(c.special)...)
			f := unaryKernel(t, c.name, c.call)
			f.NoContract = noContract
			got := kerneltest.Run(t, f, []int64{int64(len(xs))}, len(xs), xs)
			var maxU, maxA float64
			var atU, atA float32
			for i, x := range xs {
				want, g := c.ref(float64(x)), float64(got[i])
				wf := float32(want)
				switch {
				case math.IsNaN(want) || math.IsNaN(g):
					if math.IsNaN(want) != math.IsNaN(g) {
						t.Fatalf("%s(%g) = %g, want %g", c.name, x, g, want)
					}
					continue
				case math.IsInf(float64(wf), 0) || math.IsInf(g, 0) || wf == 0:
					if float32(g) != wf || math.Signbit(g) != math.Signbit(float64(wf)) {
						t.Fatalf("%s(%g) = %g, want %g", c.name, x, g, wf)
					}
					continue
				}
				if u := math.Abs(g-want) / ulp(want); u > maxU {
					maxU, atU = u, x
				}
				if a := math.Abs(g - want); a > maxA {
					maxA, atA = a, x
				}
			}
			t.Logf("%s: %d inputs, max error %.3f ulp at %g, %.3g absolute at %g", c.name, len(xs), maxU, atU, maxA, atA)
			if c.maxAbs > 0 && maxA > c.maxAbs {
				t.Errorf("%s: absolute error %.3g at %g, want at most %g", c.name, maxA, atA, c.maxAbs)
			}
			if c.maxAbs == 0 && maxU > c.maxULP {
				t.Errorf("%s: error %.3f ulp at %g, want at most %g", c.name, maxU, atU, c.maxULP)
			}
			if c.maxAbs > 0 && c.maxULP > 0 {
				checkRelSmall(t, c, xs, got)
			}
			for i, s := range c.special {
				g := got[len(xs)-len(c.special)+i]
				if !sameFloat(g, s[1]) && !(s[1] != 0 && math.Abs(float64(g-s[1])) <= ulp(float64(s[1]))) {
					t.Errorf("%s(%g) = %g, want %g", c.name, s[0], g, s[1])
				}
			}
		})
	}
}

// checkRelSmall: erf near 0 keeps a relative error bound too (GELU of small values).
func checkRelSmall(t *testing.T, c mathCase, xs, got []float32) {
	for i, x := range xs {
		if math.Abs(float64(x)) >= 1 || math.IsNaN(float64(x)) || x == 0 {
			continue
		}
		want := c.ref(float64(x))
		if u := math.Abs(float64(got[i])-want) / ulp(want); u > c.maxULP {
			t.Errorf("%s(%g) = %g, want %g (%.2f ulp)", c.name, x, got[i], want, u)
			return
		}
	}
}

func specials(s [][2]float32) []float32 {
	var v []float32
	for _, p := range s {
		v = append(v, p[0])
	}
	return v
}

func sameFloat(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	return a == b && math.Signbit(float64(a)) == math.Signbit(float64(b))
}

// TestGoldenMath: a unit defines the math helpers its kernels call (each once, after those
// it calls) and nothing else (exp's reduction once for tanh and sigmoid; erf calls none); float64
// sigmoid keeps the C library's exp.
func TestGoldenMath(t *testing.T) {
	x := te.Placeholder("X", tensor.Float64, loopir.Int(8))
	y := te.Compute("Y", []loopir.Expr{loopir.Int(8)}, func(i []loopir.Expr) loopir.Expr { return te.Sigmoid(x.At(i[0])) })
	f64, err := te.Lower("sigmoid64", []*te.Tensor{x}, []*te.Tensor{y})
	if err != nil {
		t.Fatal(err)
	}
	funcs := []*loopir.PrimFunc{unaryKernel(t, "erf", te.Erf), unaryKernel(t, "tanh", te.Tanh), unaryKernel(t, "sigmoid", te.Sigmoid), f64}
	for i, f := range funcs {
		if funcs[i], err = passes.CPUPipeline().Run(f); err != nil {
			t.Fatal(err)
		}
	}
	src, err := codegen.EmitC(funcs...)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "math_helpers.c", src.Code)
}

// TestMathHelpersVectorize: a loop calling each helper is vectorized by the C compiler
// with the CPU device's flags, and no C library math function is called.
func TestMathHelpersVectorize(t *testing.T) {
	cc, err := cpu.FindCompiler()
	if err != nil {
		testdata.NoCompiler(t, err)
	}
	var funcs []*loopir.PrimFunc
	for _, c := range mathCases {
		f, err := passes.CPUPipeline().Run(unaryKernel(t, c.name, c.call))
		if err != nil {
			t.Fatal(err)
		}
		funcs = append(funcs, f)
	}
	src, err := codegen.EmitC(funcs...)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.c"), []byte(src.Code), 0o644); err != nil {
		t.Fatal(err)
	}
	report, want := "-fopt-info-vec-optimized", "loop vectorized"
	if strings.Contains(cc.Version, "clang") {
		report, want = "-Rpass=loop-vectorize", "vectorized loop"
	}
	args := append(append([]string{}, cc.Flags...), report, "-S", "-o", "m.s", "m.c")
	cmd := exec.Command(cc.Path, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	asm, err := os.ReadFile(filepath.Join(dir, "m.s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
	// one report per kernel at least (gcc also reports its epilogue loops)
	lines := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, want) {
			file, _, _ := strings.Cut(l, ": ")
			lines[file[:strings.LastIndex(file, ":")]] = true
		}
	}
	if len(lines) < len(funcs) {
		t.Errorf("%d of %d kernels' loops vectorized:\n%s", len(lines), len(funcs), out)
	}
	if m := regexp.MustCompile(`call[a-z]*\s+\S*(exp|log|tanh|erf)`).Find(asm); m != nil {
		t.Errorf("the assembly calls a C library function: %s", m)
	}
}
