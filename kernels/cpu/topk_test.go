package cpu

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

func topKAttrs(axis int64, largest, sorted bool) *graph.TopKAttrs {
	a := graph.OpTopK.NewAttrs().(*graph.TopKAttrs)
	a.Axis, a.Largest, a.Sorted = axis, 0, 0
	if largest {
		a.Largest = 1
	}
	if sorted {
		a.Sorted = 1
	}
	return a
}

// fewValues is a float32 tensor of the shape whose values come from a small set, so
// that rows hold many ties.
func fewValues(seed uint64, shape ...int) *tensor.Tensor {
	r := rand.New(rand.NewPCG(seed, 3))
	v := make([]float64, tensor.Shape(shape).NumElements())
	for i := range v {
		v[i] = float64(r.IntN(5)) - 2
	}
	return tensor.FromFloat64s(tensor.Float32, tensor.Shape(shape), v)
}

// TestTopKMatchesReference: largest and smallest, every axis, k from 0 to the whole
// axis, on random rows and on rows full of ties (the lower index first), float and
// integer data, sorted or not (the kernel always sorts); both outputs.
func TestTopKMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, x := range []*tensor.Tensor{f32(121, 3, 9, 4), fewValues(122, 3, 9, 4)} {
		for _, axis := range []int64{0, 1, 2, -2} {
			d := x.Shape[(axis+3)%3]
			for _, k := range []int{0, 1, 2, d - 1, d} {
				for _, largest := range []bool{true, false} {
					if s := nt.CheckNode(t, l, graph.OpTopK, topKAttrs(axis, largest, k%2 == 0), 2, nt.In(x), nt.C(vec(int64(k)))); s != "topk-loops" {
						t.Fatalf("strategy %s", s)
					}
				}
			}
		}
	}
	ints := tensor.MustFromSlice(tensor.Shape{2, 7}, []int32{3, -1, 3, 7, 0, 7, -1, 5, 5, 5, 2, 9, -8, 5})
	for _, largest := range []bool{true, false} {
		nt.CheckNode(t, l, graph.OpTopK, topKAttrs(-1, largest, true), 2, nt.In(ints), nt.C(vec(4)))
		nt.CheckNode(t, l, graph.OpTopK, topKAttrs(-1, largest, true), 2, nt.In(iota64(3, 50)), nt.C(vec(10)))
	}
	// rows sorted the wrong way (every element enters the top k), and a long axis on
	// enough rows to run in parallel
	desc := tensor.MustFromSlice(tensor.Shape{1, 40}, func() []float32 {
		v := make([]float32, 40)
		for i := range v {
			v[i] = float32(i)
		}
		return v
	}())
	nt.CheckNode(t, l, graph.OpTopK, topKAttrs(1, true, true), 2, nt.In(desc), nt.C(vec(7)))
	nt.CheckNode(t, l, graph.OpTopK, topKAttrs(1, false, true), 2, nt.In(f32(123, 64, 1000)), nt.C(vec(16)))
	nt.CheckNode(t, l, graph.OpTopK, topKAttrs(0, true, true), 2, nt.In(fewValues(124, 300, 70)), nt.C(vec(30)))
}

// TestTopKRefusesARunTimeK: k computed at run time, or larger than the axis, is
// ErrNoKernel with the reason.
func TestTopKRefusesARunTimeK(t *testing.T) {
	l := Strategies(kernels.Default())
	for what, err := range map[string]error{
		"run-time k":     nt.LowerErr(t, l, graph.OpTopK, topKAttrs(-1, true, true), 2, nt.In(f32(125, 2, 5)), nt.In(vec(3))),
		"k past the end": nt.LowerErr(t, l, graph.OpTopK, topKAttrs(-1, true, true), 2, nt.In(f32(125, 2, 5)), nt.C(vec(6))),
	} {
		if !errors.Is(err, kernels.ErrNoKernel) {
			t.Errorf("%s: got %v, want ErrNoKernel", what, err)
		}
	}
}

// TestTopKRanksNaNAboveEveryNumber: NaN comes first for largest and last for smallest,
// NaNs in the order of their indices (the reference's sort leaves NaN unordered, so the
// kernel's order is checked directly).
func TestTopKRanksNaNAboveEveryNumber(t *testing.T) {
	l := Strategies(kernels.Default())
	nan := math.NaN()
	x := tensor.FromFloat64s(tensor.Float32, tensor.Shape{1, 5}, []float64{nan, 1, nan, 3, 1})
	for _, c := range []struct {
		largest bool
		vals    []float64
		idx     []int64
	}{
		{true, []float64{nan, nan, 3, 1, 1}, []int64{0, 2, 3, 1, 4}},
		{false, []float64{1, 1, 3, nan, nan}, []int64{1, 4, 3, 0, 2}},
	} {
		m, _ := nt.Build(t, graph.OpTopK, topKAttrs(-1, c.largest, true), 2, nt.In(x), nt.C(vec(5)))
		got, _, err := nt.RunNode(l, m.Main.Nodes[len(m.Main.Nodes)-1], []nt.Arg{nt.In(x), nt.C(vec(5))})
		if errors.Is(err, devices.ErrUnavailable) {
			testdata.NoCompiler(t, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		nt.CloseTensor(t, fmt.Sprintf("largest=%v values", c.largest), got[0], tensor.FromFloat64s(tensor.Float32, tensor.Shape{1, 5}, c.vals))
		nt.CloseTensor(t, fmt.Sprintf("largest=%v indices", c.largest), got[1], i64s([]int{1, 5}, c.idx...))
	}
}
