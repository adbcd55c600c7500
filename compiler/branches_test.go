package compiler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// switchModule: an If on a run-time flag between two front ends, each sized for its own
// input length (as silero VAD's 16 kHz and 8 kHz branches are): the then branch reads x
// as 2 rows, the else branch as 3x3, so for a bound length only one of them types.
func switchModule(t *testing.T, cond string) *graph.Module {
	t.Helper()
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[n], %c: bool[]) {
  const %s2: i64[2] = [2, -1]
  const %s33: i64[2] = [3, 3]
  const %k: bool[] = [1]
  %r = If(` + cond + `) name="rate_switch" : f32[p,q]
    then_branch =
      func @then_branch() {
        %y = Reshape(%x, %s2) : f32[2,m]
        %t = Relu(%y) : f32[2,m]
        return %t
      }
    else_branch =
      func @else_branch() {
        %z = Reshape(%x, %s33) : f32[3,3]
        %e = Exp(%z) : f32[3,3]
        return %e
      }
  %o = Sigmoid(%r) : f32[p,q]
  return %o
}`)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func boolScalar(b bool) *tensor.Tensor { return tensor.Scalar(b) }

// TestBranchThatDoesNotTypeFailsOnlyWhenTaken: compiled for a length where one branch
// of the If cannot type, the executable runs the other branch (matching the reference)
// and taking the untyped one fails the run with an error naming the If and the branch
// (vm.ErrInput: a bad request, not a broken executable); the VM keeps answering after.
func TestBranchThatDoesNotTypeFailsOnlyWhenTaken(t *testing.T) {
	for _, c := range []struct {
		n       int64
		works   bool // the flag value whose branch types
		failing string
	}{
		{4, true, "else_branch"},
		{9, false, "then_branch"},
	} {
		m := switchModule(t, "%c")
		opts := Options{Dims: map[string]int64{"n": c.n}}
		good := []*tensor.Tensor{f32(1, int(c.n)), boolScalar(c.works)}
		machine, _ := checkSymbolic(t, m, target.Host(), opts, [][]*tensor.Tensor{good})
		_, err := machine.Run(context.Background(), []*tensor.Tensor{f32(2, int(c.n)), boolScalar(!c.works)})
		want := "branch " + c.failing + ` of If "rate_switch" cannot run on these input shapes: `
		if !errors.Is(err, vm.ErrInput) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Reshape") {
			t.Errorf("n=%d, taking the %s: got %v, want ErrInput with %q and the Reshape's reason", c.n, c.failing, err, want)
		}
		if _, err := machine.Run(context.Background(), good); err != nil {
			t.Errorf("n=%d: a run after the failed one: %v", c.n, err)
		}
	}
}

// TestConstantConditionLowersOnlyTakenBranch: an If whose condition is a constant
// becomes its taken branch's code alone (no If instruction), even when the other branch
// does not type for the bound shapes.
func TestConstantConditionLowersOnlyTakenBranch(t *testing.T) {
	m := switchModule(t, "%k")
	_, res := checkSymbolic(t, m, target.Host(), Options{Dims: map[string]int64{"n": 4}}, [][]*tensor.Tensor{{f32(3, 4), boolScalar(false)}})
	for _, f := range res.Exe.Functions {
		for _, in := range f.Code {
			if in.Op == vm.If || in.Op == vm.Fatal {
				t.Errorf("function %s has a %v instruction; the constant condition takes the then branch alone", f.Name, in.Op)
			}
		}
	}
}

// TestIfOfBranchShapesBindsItsExtent: an If whose branches return different lengths (an
// empty constant, or NonZero's survivors, as torchvision's detection exports choose
// between no boxes and the suppression's) has an output extent that nothing before it
// binds; the extent is read from the taken branch's result, so a kernel after the If
// runs on it. Both branches are taken, against the reference.
func TestIfOfBranchShapesBindsItsExtent(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[6], %c: bool[]) {
  const %one: i64[] = [1]
  const %ax: i64[1] = [0]
  %r = If(%c) name="maybe_none" : i64[p]
    then_branch =
      func @then_branch() {
        const %none: i64[0] = []
        return %none
      }
    else_branch =
      func @else_branch() {
        %nz = NonZero(%x) : i64[1,k]
        %s = Squeeze(%nz, %ax) : i64[k]
        return %s
      }
  %o = Add(%r, %one) : i64[p]
  return %o
}`)
	if err != nil {
		t.Fatal(err)
	}
	x := f32s(tensor.Shape{6}, 0, 2, 0, 3, 4, 0)
	checkSymbolic(t, m, target.Host(), Options{}, [][]*tensor.Tensor{
		{x, boolScalar(false)}, {x, boolScalar(true)}, {x, boolScalar(false)},
	})
}

// TestLoopOfGrowingCarriedValue: a Loop whose carried value gains a row each
// iteration (Keypoint R-CNN concatenates its per-detection results this way), declared
// with a fresh extent: the extent is read from the carried value before the loop and at
// the top of every iteration, and the loop's result from the value it left; zero, one
// and four iterations, against the reference.
func TestLoopOfGrowingCarriedValue(t *testing.T) {
	m, err := graph.Parse(`module opsets(""=17)
func @main(%x: f32[2,3], %steps: i64[]) {
  const %yes: bool[] = [1]
  %r = Loop(%steps, %yes, %x) name="grow" : f32[k,3]
    body =
      func @body(%i: i64[], %c: bool[], %h: f32[j,3]) {
        const %ax: i64[1] = [0]
        const %first: i64[1] = [0]
        const %one: i64[1] = [1]
        %row = Slice(%h, %first, %one, %ax) : f32[1,3]
        %twice = Add(%row, %row) : f32[1,3]
        %g = Concat(%h, %twice) {axis=0} : f32[j+1,3]
        %n = Neg(%g) : f32[j+1,3]
        return %c, %n
      }
  %o = Relu(%r) : f32[k,3]
  return %o
}`)
	if err != nil {
		t.Fatal(err)
	}
	x := f32s(tensor.Shape{2, 3}, 1, -2, 3, -4, 5, -6)
	steps := func(n int64) *tensor.Tensor { return tensor.Scalar(n) }
	checkSymbolic(t, m, target.Host(), Options{}, [][]*tensor.Tensor{
		{x, steps(0)}, {x, steps(1)}, {x, steps(4)}, {x, steps(1)},
	})
}
