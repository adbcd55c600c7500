package ref

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// TestIndicesOutOfRangeAreErrors: the ops that read indices from data refuse an index
// outside [-n, n) with ErrBadInput naming the node, and accept negative indices in
// range, which count from the end.
func TestIndicesOutOfRangeAreErrors(t *testing.T) {
	data := tensor.MustFromSlice(tensor.Shape{3, 2}, []float32{0, 1, 2, 3, 4, 5})
	upd := tensor.MustFromSlice(tensor.Shape{1, 2}, []float32{9, 9})
	type build func(b *graph.Builder, d, i *graph.Value) (*graph.Value, error)
	node := func(op graph.Op, attrs any, extra ...*tensor.Tensor) build {
		return func(b *graph.Builder, d, i *graph.Value) (*graph.Value, error) {
			in := []*graph.Value{d, i}
			for k, x := range extra {
				in = append(in, b.Const("extra"+string(rune('0'+k)), x))
			}
			outs, err := b.NodeNamed(op, "idx0", attrs, []string{"y"}, in...)
			if err != nil {
				return nil, err
			}
			return outs[0], nil
		}
	}
	for _, tc := range []struct {
		name      string
		mk        build
		shape     tensor.Shape
		good, bad []int64
		want      []float32 // the output for good
	}{
		{"Gather", node(graph.OpGather, &graph.GatherAttrs{}), tensor.Shape{2}, []int64{-1, -3}, []int64{0, 3}, []float32{4, 5, 0, 1}},
		{"GatherNegative", node(graph.OpGather, &graph.GatherAttrs{}), tensor.Shape{2}, []int64{2, 0}, []int64{-4, 0}, []float32{4, 5, 0, 1}},
		{"GatherElements", node(graph.OpGatherElements, &graph.GatherAttrs{}), tensor.Shape{1, 2}, []int64{-1, 0}, []int64{0, 3}, []float32{4, 1}},
		{"GatherND", node(graph.OpGatherND, &graph.GatherNDAttrs{}), tensor.Shape{1, 1}, []int64{-2}, []int64{-4}, []float32{2, 3}},
		{"ScatterElements", node(graph.OpScatterElements, &graph.ScatterElementsAttrs{Reduction: "none"}, upd), tensor.Shape{1, 2}, []int64{-1, 0}, []int64{5, 0}, []float32{0, 9, 2, 3, 9, 5}},
		{"ScatterND", node(graph.OpScatterND, &graph.ScatterNDAttrs{Reduction: "none"}, upd), tensor.Shape{1, 1}, []int64{-3}, []int64{3}, []float32{9, 9, 2, 3, 4, 5}},
	} {
		b := graph.NewBuilder("main")
		i := b.Param("i", graph.TensorType(tensor.Int64, graph.StaticShape(int64Shape(tc.shape)...)...))
		y, err := tc.mk(b, b.Const("data", data), i)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m, err := b.Module(y)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := Eval(m, map[string]Value{"i": tensor.MustFromSlice(tc.shape, tc.good)}, Options{})
		if err != nil {
			t.Errorf("%s: indices %v: %v", tc.name, tc.good, err)
		} else if got := out[0].(*tensor.Tensor).Float64s(); !equalF(got, tc.want) {
			t.Errorf("%s: indices %v give %v, want %v", tc.name, tc.good, got, tc.want)
		}
		_, err = Eval(m, map[string]Value{"i": tensor.MustFromSlice(tc.shape, tc.bad)}, Options{})
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), `"idx0"`) {
			t.Errorf("%s: indices %v: got %v, want ErrBadInput naming idx0", tc.name, tc.bad, err)
		}
	}
}

func int64Shape(s tensor.Shape) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func equalF(a []float64, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != float64(b[i]) {
			return false
		}
	}
	return true
}
