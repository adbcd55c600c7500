package conformance

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

func TestTruncatedBF16ExpectationIsBadDataOnlyWhenResultRoundsToNearestEven(t *testing.T) {
	in := []float32{0.81910545, 0.47892547, -0.816468, 1}
	trunc := make([]tensor.BFloat16Bits, len(in))
	rne := make([]tensor.BFloat16Bits, len(in))
	for i, f := range in {
		trunc[i] = tensor.BFloat16Bits(math.Float32bits(f) >> 16)
		rne[i] = tensor.F32ToBF16(f)
	}
	inputs := map[string]ref.Value{"x": tensor.MustFromSlice(tensor.Shape{4}, in)}
	want := tensor.MustFromSlice(tensor.Shape{4}, trunc)
	if why := truncatedBF16(tensor.MustFromSlice(tensor.Shape{4}, rne), want, inputs); !strings.Contains(why, "truncated") {
		t.Fatalf("rounded result against truncated data: %q, want the truncation named", why)
	}
	// a result that is neither the truncation nor the rounding is a real failure
	wrong := append([]tensor.BFloat16Bits(nil), rne...)
	wrong[3]++
	if why := truncatedBF16(tensor.MustFromSlice(tensor.Shape{4}, wrong), want, inputs); why != "" {
		t.Fatalf("a wrong result was excused: %q", why)
	}
}

func TestInputShapeTheModelDoesNotDeclareIsBadData(t *testing.T) {
	b := graph.NewBuilder("m")
	x := b.Param("like", graph.TensorType(tensor.Float32, graph.Const(3), graph.Const(4)))
	m, err := b.Module(x)
	if err != nil {
		t.Fatal(err)
	}
	short := map[string]ref.Value{"like": tensor.New(tensor.Float32, tensor.Shape{1})}
	if why := declaredMismatch(m, short); !strings.Contains(why, `"like" has shape [1]`) {
		t.Fatalf("got %q", why)
	}
	fits := map[string]ref.Value{"like": tensor.New(tensor.Float32, tensor.Shape{3, 4})}
	if why := declaredMismatch(m, fits); why != "" {
		t.Fatalf("a fitting input was reported: %q", why)
	}
}
