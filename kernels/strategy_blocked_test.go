package kernels

import (
	"errors"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/te"
	"github.com/kilnrt/kiln/tensor"
)

// TestGenericRefusesAPlainDefinitionOfABlockedOutput: a convolution whose output the
// graph stores in channel blocks is refused by the generic rule (its definition
// computes plain NCHW, which the byte count alone would accept), and built when the
// output is plain.
func TestGenericRefusesAPlainDefinitionOfABlockedOutput(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Const(1), graph.Const(3), graph.Const(8), graph.Const(8)))
	w := tensor.New(tensor.Float32, tensor.Shape{16, 3, 3, 3})
	y, err := b.Op1(graph.OpConv, graph.OpConv.NewAttrs(), x, b.Const("w", w))
	if err != nil {
		t.Fatal(err)
	}
	n := y.Def
	in := []Input{{T: te.Placeholder("x", tensor.Float32, Static(1, 3, 8, 8)...)}, {T: te.Placeholder("w", tensor.Float32, Static(16, 3, 3, 3)...), Const: w}}
	reg := Default()
	if _, err := Generic(reg, "k", n, in, nil); err != nil {
		t.Fatalf("plain output: %v", err)
	}
	y.Type.Block = 16
	if _, err := Generic(reg, "k", n, in, nil); !errors.Is(err, ErrNotApplicable) {
		t.Fatalf("blocked output: err %v, want ErrNotApplicable", err)
	}
}
