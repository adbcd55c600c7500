package cpu

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/tensor"
)

// TestGenericStridedConvReducesAlongTaps checks the generic rule's loop order for a
// convolution whose stride exceeds one and whose kernel is long (a short-time Fourier
// transform's frames: 256 taps every 64 samples): the taps stay the innermost loop, a
// contiguous vector reduction, instead of the output frames moving inside them (a
// stride-64 gather per lane with the accumulators in memory, seven times slower). A
// short kernel keeps the frames inside. Both agree with the reference.
func TestGenericStridedConvReducesAlongTaps(t *testing.T) {
	l := nnGeneric()
	cases := []struct {
		name     string
		x, w     []int
		stride   int64
		framesIn bool // the output frames run inside the taps
	}{
		{"256 taps stride 64", []int{1, 1, 704}, []int{258, 1, 256}, 64, false},
		{"16 taps stride 4 two channels", []int{1, 2, 203}, []int{5, 2, 16}, 4, false},
		{"3 taps stride 2", []int{1, 8, 61}, []int{16, 8, 3}, 2, true},
		{"256 taps stride 1", []int{1, 1, 300}, []int{4, 1, 256}, 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
			at.Strides = []int64{c.stride}
			impl, err := nnLower(t, l, graph.OpConv, at, tensor.Float32, c.x, c.w)
			if err != nil {
				t.Fatal(err)
			}
			tr := impl.Trace.String()
			if got := strings.Contains(tr, "reorder("); got != c.framesIn {
				t.Errorf("frames inside the taps: %v, want %v; trace:\n%s", got, c.framesIn, tr)
			}
			nnCheck(t, graph.OpConv, at, nt.In(f32(41, c.x...)), nt.C(f32(42, c.w...)))
		})
	}
}
