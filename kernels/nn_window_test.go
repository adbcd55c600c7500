package kernels_test

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/tensor"
)

// TestWindowDefinitionsAgreeWithShapeInference: the output extents the Conv and pooling
// definitions compute are the ones shape inference gives the node, in every padding
// mode, with and without ceil_mode, including a window larger than its input at a
// stride above 1 (no output, not one).
func TestWindowDefinitionsAgreeWithShapeInference(t *testing.T) {
	for _, autoPad := range []string{"NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"} {
		for _, stride := range []int64{1, 2, 3} {
			for _, in := range []int{2, 5, 8} {
				for _, ceil := range []int64{0, 1} {
					name := fmt.Sprintf("%s stride %d in %d ceil %d", autoPad, stride, in, ceil)
					var pads []int64
					if autoPad == "NOTSET" {
						pads = []int64{1, 0, 0, 1}
					}
					b := graph.NewBuilder("main")
					x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(2), graph.Const(int64(in)), graph.Const(7)))
					pa := &graph.PoolAttrs{AutoPad: autoPad, CeilMode: ceil, KernelShape: []int64{3, 2}, Strides: []int64{stride, 1}, Pads: pads, P: 2}
					outs, err := b.Node(graph.OpMaxPool, pa, 1, x)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					pw, err := graph.PoolWindow(pa)
					if err != nil {
						t.Fatal(err)
					}
					p, err := kernels.NewPoolWindow([]int64{int64(in), 7}, pw)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := p.Out, inferred(outs[0]); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: pool window %v, inference %v", name, got, want)
					}
					if ceil != 0 {
						continue
					}
					ca := &graph.ConvAttrs{AutoPad: autoPad, Group: 1, Strides: []int64{stride, 1}, Pads: pads}
					w := b.Const("w", tensor.New(tensor.Float32, tensor.Shape{4, 2, 3, 2}))
					co, err := b.Node(graph.OpConv, ca, 1, x, w)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					cw, err := graph.ConvWindow(ca, []int64{3, 2})
					if err != nil {
						t.Fatal(err)
					}
					g, err := kernels.ResolveConv([]int64{int64(in), 7}, cw, 1)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := g.Out, inferred(co[0]); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: conv geometry %v, inference %v", name, got, want)
					}
				}
			}
		}
	}
}

// inferred is v's spatial extents, which must be static.
func inferred(v *graph.Value) []int64 {
	var out []int64
	for _, d := range v.Type.Shape[2:] {
		e, ok := d.Value()
		if !ok {
			panic(fmt.Sprintf("symbolic extent in %v", v.Type))
		}
		out = append(out, e)
	}
	return out
}
