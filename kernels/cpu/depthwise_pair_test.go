package cpu

import (
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/tensor"
)

// TestDepthwisePairsColumnsWhereTheBlockIsNarrowerThanAVX512 lowers (without running)
// MobileNetV3's depthwise convolutions over 72 channels for an AVX-512 CPU: they compute
// in blocks of 8, and at a horizontal stride of 1 over rows of 28 columns or more, two
// columns a 16-lane vector (the register tile's lane loop 16 wide, the weights packed
// with their lanes repeated); at stride 2 and over 14-column rows, one column a vector
// of 8 lanes. The numbers are checked against the reference by the depthwise tests'
// paired cases on the hosts that have the vectors.
func TestDepthwisePairsColumnsWhereTheBlockIsNarrowerThanAVX512(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, tc := range []struct {
		w, stride   int
		lanes       int64
		weightsPair string
	}{
		{56, 1, 16, "2×8"}, {28, 1, 16, "2×8"}, {14, 1, 8, ""}, {56, 2, 8, ""},
	} {
		dc := dwCase{72, 1, 8, tc.w, 3, 3, []int64{int64(tc.stride), int64(tc.stride)}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 0}
		a, args := dc.attrs(), dc.args(5)
		mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.LowerChoice(n, in, nil, avx512Target, kernels.Choice{Strategy: "conv2d-depthwise-nchwc"})
		if err != nil {
			t.Fatalf("%v: %v", dc, err)
		}
		lanes := simdLoops(impl.Func.Body)
		if len(lanes) != 1 {
			t.Fatalf("%v: %d register-tile lane loops, want 1", dc, len(lanes))
		}
		if ext, ok := lanes[0].Extent.(*loopir.IntImm); !ok || ext.V != tc.lanes {
			t.Errorf("%v: the tile's lane loop runs %s lanes, want %d", dc, loopir.ExprString(lanes[0].Extent), tc.lanes)
		}
		layout := impl.Params[1].Layout
		if paired := strings.Contains(layout, "×"); paired != (tc.weightsPair != "") || paired && !strings.Contains(layout, tc.weightsPair) {
			t.Errorf("%v: weights packed %q, want pairs %q", dc, layout, tc.weightsPair)
		}
	}
}

// TestPackDepthwiseWeightsPairedRepeatsEachBlocksLanes: [M, 1, KH, KW] weights packed
// for pairs of columns are [M/B, KH, KW, P·B], every tap's B lanes P times over.
func TestPackDepthwiseWeightsPairedRepeatsEachBlocksLanes(t *testing.T) {
	const m, kh, kw, bl, pair = 8, 1, 2, 4, 2
	v := make([]float32, m*kh*kw)
	for i := range v {
		v[i] = float32(i)
	}
	w, err := tensor.FromSlice(tensor.Shape{m, 1, kh, kw}, v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PackDepthwiseWeightsPaired(w, bl, pair)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Shape.Equal(tensor.Shape{m / bl, kh, kw, bl * pair}) {
		t.Fatalf("shape %v", got.Shape)
	}
	d := got.Data.([]float32)
	for cb := 0; cb < m/bl; cb++ {
		for x := 0; x < kw; x++ {
			for p := 0; p < pair; p++ {
				for lane := 0; lane < bl; lane++ {
					o := cb*bl + lane
					if g, want := d[(cb*kw+x)*bl*pair+p*bl+lane], v[o*kw+x]; g != want {
						t.Fatalf("block %d tap %d copy %d lane %d: %v, want %v", cb, x, p, lane, g, want)
					}
				}
			}
		}
	}
	if _, err := PackDepthwiseWeightsPaired(w, 3, pair); err == nil {
		t.Fatalf("8 channels in blocks of 3: no error")
	}
}
