package ref

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// evalOne builds op on one string parameter x of n elements and evaluates it on xs.
func evalOne(t *testing.T, op graph.Op, attrs any, xs []string) (*tensor.Tensor, error) {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.String, graph.Const(int64(len(xs)))))
	y := op1(t, b, op, attrs, x)
	mod, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Eval(mod, map[string]Value{"x": tensor.MustFromSlice(tensor.Shape{len(xs)}, xs)}, Options{})
	if err != nil {
		return nil, err
	}
	return res[0].(*tensor.Tensor), nil
}

func TestStringNormalizerRefusesInvalidUTF8AndDropsStopWordsInAnyCase(t *testing.T) {
	a := &graph.StringNormalizerAttrs{CaseChangeAction: "LOWER", Stopwords: []string{"monday"}}
	if _, err := evalOne(t, graph.OpStringNormalizer, a, []string{"ok", "\xc3\x28"}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("invalid UTF-8: got %v, want ErrBadInput", err)
	}
	y, err := evalOne(t, graph.OpStringNormalizer, a, []string{"MONDAY", "Tuesday", strings.Repeat("Ab", 1<<16)})
	if err != nil {
		t.Fatal(err)
	}
	got := y.Data.([]string)
	if len(got) != 2 || got[0] != "tuesday" || got[1] != strings.Repeat("ab", 1<<16) {
		t.Fatalf("got %d strings starting %q", len(got), got[0])
	}
}

func TestCastOfNonNumericTextIsAnErrorNotAValue(t *testing.T) {
	for _, to := range []tensor.DType{tensor.Float32, tensor.Int64, tensor.Bool} {
		a := &graph.CastAttrs{To: int64(to), Saturate: 1}
		if _, err := evalOne(t, graph.OpCast, a, []string{"Hello World!"}); !errors.Is(err, ErrBadInput) {
			t.Errorf("to %v: got %v, want ErrBadInput", to, err)
		}
	}
	a := &graph.CastAttrs{To: int64(tensor.Float64), Saturate: 1}
	y, err := evalOne(t, graph.OpCast, a, []string{"1e400", "-INF", "nan", "1E8"})
	if err != nil {
		t.Fatal(err)
	}
	f := y.Data.([]float64)
	if !math.IsInf(f[0], 1) || !math.IsInf(f[1], -1) || !math.IsNaN(f[2]) || f[3] != 1e8 {
		t.Fatalf("got %v", f)
	}
	a = &graph.CastAttrs{To: int64(tensor.Int64), Saturate: 1}
	if y, err = evalOne(t, graph.OpCast, a, []string{"9007199254740993", "100.5"}); err != nil || y.Int64s()[0] != 9007199254740993 || y.Int64s()[1] != 100 {
		t.Fatalf("int64: %v %v", y, err)
	}
}

func TestOptimizersMatchTheirDefinitions(t *testing.T) {
	// one element, by hand: Momentum (standard, T>0), Adagrad, Adam (T=0)
	n := &graph.Node{Op: graph.OpMomentum, Attrs: &graph.MomentumAttrs{Alpha: 0.5, Beta: 2, Mode: "standard", NormCoefficient: 0.1}}
	if got := OptimizerStep(n, 0.1, 1, 1, 1, []float64{2}); math.Abs(got[1]-(0.5*2+2*1.1)) > 1e-6 || math.Abs(got[0]-(1-0.1*3.2)) > 1e-6 {
		t.Errorf("momentum %v", got)
	}
	n = &graph.Node{Op: graph.OpMomentum, Attrs: &graph.MomentumAttrs{Alpha: 0.5, Beta: 2, Mode: "nesterov"}}
	if got := OptimizerStep(n, 0.1, 0, 1, 1, []float64{2}); math.Abs(got[1]-2) > 1e-6 || math.Abs(got[0]-(1-0.1*(1+0.5*2))) > 1e-6 {
		t.Errorf("nesterov at T=0 (beta is 1) %v", got)
	}
	n = &graph.Node{Op: graph.OpAdagrad, Attrs: &graph.AdagradAttrs{DecayFactor: 1, Epsilon: 0}}
	if got := OptimizerStep(n, 0.2, 1, 1, 2, []float64{5}); math.Abs(got[1]-9) > 1e-6 || math.Abs(got[0]-(1-0.1*2/3)) > 1e-6 {
		t.Errorf("adagrad %v", got)
	}
	n = &graph.Node{Op: graph.OpAdam, Attrs: &graph.AdamAttrs{Alpha: 0.5, Beta: 0.5, NormCoefficientPost: 0.5}}
	if got := OptimizerStep(n, 0.1, 0, 1, 2, []float64{0, 0}); math.Abs(got[1]-1) > 1e-6 || math.Abs(got[2]-2) > 1e-6 || math.Abs(got[0]-0.5*(1-0.1/math.Sqrt(2))) > 1e-6 {
		t.Errorf("adam %v", got)
	}
}
