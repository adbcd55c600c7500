package conformance

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// TestRandomDropoutRunIsNotCompared: a Dropout in training mode with a positive ratio
// (graph inputs, as the ONNX node cases give them) makes the run random and is
// reported as such; ratio 0, training off, or no training input are deterministic.
func TestRandomDropoutRunIsNotCompared(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, 3)...))
	r := b.Param("r", graph.TensorType(tensor.Float32))
	tr := b.Param("t", graph.TensorType(tensor.Bool))
	outs, err := b.Node(graph.OpDropout, &graph.DropoutAttrs{}, 1, x, r, tr)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(outs...)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ratio    float32
		training bool
		random   bool
	}{{0.5, true, true}, {0, true, false}, {0.5, false, false}}
	for _, c := range cases {
		in := map[string]ref.Value{"x": tensor.New(tensor.Float32, tensor.Shape{2, 3}), "r": tensor.Scalar(c.ratio), "t": tensor.Scalar(c.training)}
		why := randomRun(m, in)
		if got := why != ""; got != c.random || c.random && !strings.Contains(why, "Dropout") {
			t.Errorf("ratio %g training %v: randomRun = %q, want random %v", c.ratio, c.training, why, c.random)
		}
	}
}
