package cpu

import (
	"errors"
	"math"
	"testing"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestAttentionMaskAgainstRef: kiln.AttentionMask lowered by the generic strategy and run
// on int64, int32, bool and f32 masks whose values are not only 0 and 1 (some too large
// for f32 to hold exactly), to f32 and f64, with -10000 and the float32 minimum (in f32,
// (1 − m)·value overflows to ±inf once |1 − m| > 1): equal to the reference evaluator
// element for element (both round each step to the output dtype). A mask of f16 does
// not lower (the definition refuses half floats).
func TestAttentionMaskAgainstRef(t *testing.T) {
	l := Strategies(kernels.Default())
	vals := []float64{0, 1, 1, 0, 2, -1, 3, 16777217, 1, -7, 1e9, 1}
	var masks []*tensor.Tensor
	for _, dt := range []tensor.DType{tensor.Int64, tensor.Int32, tensor.Bool} {
		masks = append(masks, tensor.FromFloat64s(dt, tensor.Shape{2, 1, 1, 6}, vals))
	}
	fv := f32(5, 2, 1, 1, 6).Float64s()
	for i := range fv {
		fv[i] *= 3
	}
	masks = append(masks, tensor.FromFloat64s(tensor.Float32, tensor.Shape{2, 1, 1, 6}, fv))
	for _, m := range masks {
		for _, to := range []tensor.DType{tensor.Float32, tensor.Float64} {
			for _, value := range []float32{-10000, -math.MaxFloat32} {
				a := &graph.AttentionMaskAttrs{Value: value, To: int64(to)}
				mod, in := nt.Build(t, graph.OpAttentionMask, a, 1, nt.In(m))
				want, err := ref.Eval(mod, in, ref.Options{})
				if err != nil {
					t.Fatal(err)
				}
				got, _, err := nt.RunNode(l, mod.Main.Nodes[0], []nt.Arg{nt.In(m)})
				if errors.Is(err, devices.ErrUnavailable) {
					testdata.NoCompiler(t, err)
				}
				if err != nil {
					t.Fatal(err)
				}
				wt := want[0].(*tensor.Tensor)
				if got[0].DType != wt.DType || !got[0].Shape.Equal(wt.Shape) {
					t.Fatalf("got %v%v, want %v%v", got[0].DType, got[0].Shape, wt.DType, wt.Shape)
				}
				g, w := got[0].Float64s(), wt.Float64s()
				for i := range w {
					if g[i] != w[i] {
						t.Fatalf("%v mask to %v, value %v: element %d = %v, want %v", m.DType, to, value, i, g[i], w[i])
					}
				}
			}
		}
	}
	f16 := tensor.FromFloat64s(tensor.Float16, tensor.Shape{3}, []float64{0, 1, 0})
	if err := nt.LowerErr(t, l, graph.OpAttentionMask, &graph.AttentionMaskAttrs{To: int64(tensor.Float32)}, 1, nt.In(f16)); err == nil {
		t.Error("AttentionMask of an f16 mask lowered")
	}
}
