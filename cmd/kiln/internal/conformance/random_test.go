package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
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

// TestRandomRunPassesOnShapeAndDTypeAlone: a random run's outputs pass when their
// element types and shapes are the stored ones, whatever their values, and the pass
// says so; another shape or element type fails.
func TestRandomRunPassesOnShapeAndDTypeAlone(t *testing.T) {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(2, 3)...))
	y, err := b.Op1(graph.OpRandomUniformLike, &graph.RandomUniformLikeAttrs{High: 1}, x)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(y)
	if err != nil {
		t.Fatal(err)
	}
	f32 := int32(onnxpb.TensorProto_FLOAT)
	stored := filepath.Join(t.TempDir(), "output_0.pb")
	blob, err := proto.Marshal(&onnxpb.TensorProto{Dims: []int64{2, 3}, DataType: &f32, FloatData: []float32{9, 9, 9, 9, 9, 9}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stored, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got  *tensor.Tensor
		pass bool
	}{
		{tensor.New(tensor.Float32, tensor.Shape{2, 3}), true},
		{tensor.New(tensor.Float32, tensor.Shape{3, 2}), false},
		{tensor.New(tensor.Float64, tensor.Shape{2, 3}), false},
	} {
		r := compareRandom(m, []ref.Value{c.got}, []string{stored}, "the op is random")
		if (r.Status == Pass) != c.pass || c.pass && r.Reason != RandomPass {
			t.Errorf("%v%v against the stored f32[2 3]: %+v", c.got.DType, c.got.Shape, r)
		}
	}
}
