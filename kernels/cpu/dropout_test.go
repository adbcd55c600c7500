package cpu

import (
	"math"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestDropoutDeterministicUsesAgreeWithReference: Dropout without training_mode, with
// it off, or with ratio 0 (constants or run-time inputs) is the identity with an
// all-true mask, as the reference gives it.
func TestDropoutDeterministicUsesAgreeWithReference(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(3, 4, 5, 6)
	a := &graph.DropoutAttrs{}
	nt.CheckNode(t, l, graph.OpDropout, a, 2, nt.In(x))
	nt.CheckNode(t, l, graph.OpDropout, a, 2, nt.In(x), nt.In(tensor.Scalar(float32(0.4))))
	nt.CheckNode(t, l, graph.OpDropout, a, 2, nt.In(x), nt.C(tensor.Scalar(float32(0.4))), nt.C(tensor.Scalar(false)))
	nt.CheckNode(t, l, graph.OpDropout, a, 2, nt.In(x), nt.In(tensor.Scalar(float32(0.4))), nt.In(tensor.Scalar(false)))
	nt.CheckNode(t, l, graph.OpDropout, a, 2, nt.In(x), nt.In(tensor.Scalar(float32(0))), nt.In(tensor.Scalar(true)))
}

// TestTrainingDropoutDropsAboutTheRatioAndScalesTheRest: in training mode with a
// positive run-time ratio, each element is either 0 with a false mask or x/(1-ratio)
// with a true mask; about the ratio of them are dropped; the draw depends on the seed
// and is the same on every run.
func TestTrainingDropoutDropsAboutTheRatioAndScalesTheRest(t *testing.T) {
	l := Strategies(kernels.Default())
	x := f32(9, 64, 157)
	run := func(ratio float32, seed int64) ([]float64, []bool) {
		args := []nt.Arg{nt.In(x), nt.In(tensor.Scalar(ratio)), nt.In(tensor.Scalar(true))}
		m, _ := nt.Build(t, graph.OpDropout, &graph.DropoutAttrs{Seed: seed}, 2, args...)
		got, _, err := nt.RunNode(l, m.Main.Nodes[len(m.Main.Nodes)-1], args)
		if err != nil {
			t.Fatal(err)
		}
		mask := make([]bool, got[1].Len())
		for i, v := range got[1].Float64s() {
			mask[i] = v != 0
		}
		return got[0].Float64s(), mask
	}
	xs := x.Float64s()
	for _, ratio := range []float32{0.25, 0.75} {
		y, mask := run(ratio, 7)
		dropped := 0
		for i, v := range y {
			want := xs[i] / (1 - float64(ratio))
			if !mask[i] {
				want = 0
				dropped++
			}
			if math.Abs(v-want) > 1e-5*(1+math.Abs(want)) {
				t.Fatalf("ratio %g: element %d = %v, mask %v, want %v", ratio, i, v, mask[i], want)
			}
		}
		frac := float64(dropped) / float64(len(y))
		if math.Abs(frac-float64(ratio)) > 0.03 {
			t.Errorf("ratio %g: dropped %.3f of the elements", ratio, frac)
		}
		again, _ := run(ratio, 7)
		other, _ := run(ratio, 8)
		same, differ := true, 0
		for i := range y {
			same = same && again[i] == y[i]
			if other[i] != y[i] {
				differ++
			}
		}
		if !same || differ == 0 {
			t.Errorf("ratio %g: same seed reproduces: %v; another seed changes %d elements", ratio, same, differ)
		}
	}
}
