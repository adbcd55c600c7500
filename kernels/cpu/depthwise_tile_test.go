package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// choiceLowerer lowers every node with one tuning choice.
type choiceLowerer struct {
	s *kernels.Strategies
	c kernels.Choice
}

func (l choiceLowerer) Lower(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
	return l.s.LowerChoice(n, in, nil, t, l.c)
}

// dwIntrinsicCases are depthwise cases of more than 9 taps beside dwCases': a dilated
// 5×5 kernel with a channel multiplier, and a 7×7 one over lanes in blocks of 8.
var dwIntrinsicCases = []dwCase{
	{8, 2, 12, 13, 5, 5, []int64{1, 1}, []int64{2, 1}, []int64{4, 2, 4, 2}, "", true, 0},
	{24, 1, 9, 14, 7, 7, []int64{1, 2}, []int64{1, 1}, []int64{3, 3, 3, 3}, "", false, 0},
}

// TestDepthwiseRegisterTileMatchesReferenceAtEveryWidth builds the depthwise cases
// (kernels 3, 5, 7 and 3×5, strides 1 and 2, dilation, asymmetric, VALID and SAME
// pads, a channel multiplier, widths that no tile divides, heights that no band
// divides) at tile_w 0 (no tile), 1, 6, 8 and 16 and bands of 1, 2, 4 and 8 rows (the
// default's are every other depthwise test's), with the output blocked and in NCHW,
// and compares each with the reference evaluator. max_taps 49 writes every tile out;
// max_taps 9 computes the kernels of more taps on the depthwise intrinsic.
func TestDepthwiseRegisterTileMatchesReferenceAtEveryWidth(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	policy := LayoutPolicy(target.Host(), reg)
	for _, k := range []kernels.Knobs{{"tile_w": 0, "rows": 1}, {"tile_w": 1, "rows": 2, "max_taps": 49}, {"tile_w": 6, "rows": 8, "max_taps": 49}, {"tile_w": 16, "rows": 4, "max_taps": 49},
		{"tile_w": 1, "rows": 4, "max_taps": 9}, {"tile_w": 8, "rows": 8, "max_taps": 9}, {"tile_w": 16, "rows": 2, "max_taps": 9}} {
		lw := choiceLowerer{l, kernels.Choice{Strategy: "conv2d-depthwise-nchwc", Knobs: k}}
		for i, tc := range append(append([]dwCase{}, dwCases...), dwIntrinsicCases...) {
			if tc.gin > 0 {
				continue
			}
			for _, blockedOut := range []bool{true, false} {
				a, args := tc.attrs(), tc.args(uint64(300+i))
				mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
				n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
				what := fmt.Sprintf("%v, %v, blocked output %v", tc, k, blockedOut)
				if _, out, ok := policy.Anchor(n); ok && blockedOut {
					n.Outputs[0].Type.Block = out
				}
				got, _, err := nt.RunNode(lw, n, args)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				want := kt.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T}, consts(args[1:])...)
				v := got[0].Data.([]float32)
				if b := n.Outputs[0].Type.Block; b != 0 {
					s := want.Shape
					v = UnpackNCHWc(v, s[0], s[1], s[2], s[3], int(b))
				}
				kt.Close(t, what, v, want)
			}
		}
	}
}

// simdLoops lists the loops of body annotated `omp simd` (a register tile's lanes).
func simdLoops(body loopir.Stmt) []*loopir.For {
	var lanes []*loopir.For
	loopir.MapStmt(body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if f, ok := s.(*loopir.For); ok && f.Annotations["c.pragma"] == "omp simd" {
			lanes = append(lanes, f)
		}
		return nil
	})
	return lanes
}

// TestDepthwiseRegisterTileKeepsTheSumsInOneVectorLoop: with max_taps 25 (5×5 kernels
// written out too), a depthwise convolution's lanes are one vector loop (omp simd) around the tile's
// columns and taps, all unrolled, so that each column's sum lives in a register from
// its zero to its one store; a tile as wide as the largest divisor of the output row
// up to the knob. tile_w 0 schedules the tap-by-tap row instead (no such loop).
func TestDepthwiseRegisterTileKeepsTheSumsInOneVectorLoop(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	for _, tc := range []struct {
		w, kw, stride int
		knob, width   int64
	}{
		{24, 3, 1, 8, 8}, {12, 3, 1, 8, 6}, {13, 3, 1, 8, 1}, {28, 5, 1, 8, 7}, {24, 5, 2, 4, 4}, {24, 3, 1, 0, 0}, {28, 7, 1, 8, 0},
	} {
		dc := dwCase{16, 1, 6, tc.w, tc.kw, tc.kw, []int64{int64(tc.stride), int64(tc.stride)}, []int64{1, 1}, nil, "SAME_UPPER", true, 0}
		a, args := dc.attrs(), dc.args(9)
		mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.LowerChoice(n, in, nil, target.Host(), kernels.Choice{Strategy: "conv2d-depthwise-nchwc", Knobs: kernels.Knobs{"tile_w": tc.knob, "max_taps": 25}})
		if err != nil {
			t.Fatalf("%v: %v", dc, err)
		}
		lanes := simdLoops(impl.Func.Body)
		if tc.width == 0 {
			if len(lanes) != 0 {
				t.Errorf("%v, tile_w 0: %d register-tile lane loops", dc, len(lanes))
			}
			continue
		}
		if len(lanes) != 1 {
			t.Fatalf("%v, tile_w %d: %d register-tile lane loops, want 1", dc, tc.knob, len(lanes))
		}
		var inner []*loopir.For
		loopir.MapStmt(lanes[0].Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
			if f, ok := s.(*loopir.For); ok {
				inner = append(inner, f)
			}
			return nil
		})
		if len(inner) != 3 {
			t.Fatalf("%v, tile_w %d: %d loops inside the lanes, want the tile's columns and the kernel's rows and columns", dc, tc.knob, len(inner))
		}
		for _, f := range inner {
			if f.Kind != loopir.Unrolled {
				t.Errorf("%v, tile_w %d: loop %s inside the lanes is %v, want unrolled", dc, tc.knob, f.Var.Name, f.Kind)
			}
		}
		if cols, ok := inner[len(inner)-1].Extent.(*loopir.IntImm); !ok || cols.V != tc.width { // MapStmt visits the outermost last
			t.Errorf("%v, tile_w %d: tile of %v columns, want %d", dc, tc.knob, inner[len(inner)-1].Extent, tc.width)
		}
	}
}

// TestDepthwiseDefaultBandsSpanSevenRowsOfSmallMaps: under the default rule a 3×3
// stride-1 depthwise convolution over a 7×7 or 14×14 map computes bands of 7 output
// rows from one padded buffer of 9 input rows (not bands of one or two rows, each
// copying its 3 or 4 input rows), and a 56×56 map bands of 8 rows from 10.
func TestDepthwiseDefaultBandsSpanSevenRowsOfSmallMaps(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	for _, tc := range []struct{ hw, padRows int64 }{{7, 9}, {14, 9}, {56, 10}} {
		dc := dwCase{16, 1, int(tc.hw), int(tc.hw), 3, 3, []int64{1, 1}, []int64{1, 1}, nil, "SAME_UPPER", true, 0}
		a, args := dc.attrs(), dc.args(11)
		mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.LowerChoice(n, in, nil, target.Host(), kernels.Choice{Strategy: "conv2d-depthwise-nchwc"})
		if err != nil {
			t.Fatalf("%v: %v", dc, err)
		}
		var pad *loopir.Buffer
		loopir.MapStmt(impl.Func.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
			if al, ok := s.(*loopir.Allocate); ok && al.Buf.Name == "pad" {
				pad = al.Buf
			}
			return nil
		})
		if pad == nil || len(pad.Shape) != 5 {
			t.Fatalf("%v: no 5-D pad buffer allocated in the kernel", dc)
		}
		if rows, ok := pad.Shape[2].(*loopir.IntImm); !ok || rows.V != tc.padRows {
			t.Errorf("%v: pad buffer of %v input rows, want %d", dc, pad.Shape[2], tc.padRows)
		}
	}
}

// TestDepthwiseIntrinsicTakesKernelsOfManyTaps: a depthwise kernel of more taps than
// max_taps (5×5 and ConvNeXt's 7×7 under the default rule) is computed by one call of the
// target's depthwise intrinsic per register tile, as wide as the largest divisor of the
// output row up to tile_w, with no written-out lane loop; a kernel within max_taps
// keeps the written-out tile, and tile_w 0 the tap-by-tap row.
func TestDepthwiseIntrinsicTakesKernelsOfManyTaps(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	for _, tc := range []struct {
		w, kw        int
		knobs        kernels.Knobs
		width, calls int64 // the intrinsic's tile width (0: none) and its call sites
	}{
		{28, 7, nil, 7, 1}, {56, 7, nil, 8, 1}, {14, 7, nil, 7, 1}, {7, 7, nil, 7, 1},
		{24, 5, nil, 8, 1}, {24, 5, kernels.Knobs{"tile_w": 1}, 1, 1},
		{24, 3, nil, 0, 0}, {24, 5, kernels.Knobs{"max_taps": 25}, 0, 0}, {28, 7, kernels.Knobs{"tile_w": 0}, 0, 0},
	} {
		dc := dwCase{64, 1, 6, tc.w, tc.kw, tc.kw, []int64{1, 1}, []int64{1, 1}, nil, "SAME_UPPER", true, 0}
		a, args := dc.attrs(), dc.args(13)
		mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.LowerChoice(n, in, nil, target.Host(), kernels.Choice{Strategy: "conv2d-depthwise-nchwc", Knobs: tc.knobs})
		if err != nil {
			t.Fatalf("%v, %v: %v", dc, tc.knobs, err)
		}
		var calls []*loopir.IntrinCall
		simd := 0
		loopir.MapStmt(impl.Func.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
			switch s := s.(type) {
			case *loopir.IntrinCall:
				calls = append(calls, s)
			case *loopir.For:
				if s.Annotations["c.pragma"] == "omp simd" {
					simd++
				}
			}
			return nil
		})
		what := fmt.Sprintf("%dx%d over a row of %d, %v", tc.kw, tc.kw, tc.w, tc.knobs)
		if int64(len(calls)) != tc.calls {
			t.Fatalf("%s: %d intrinsic calls, want %d", what, len(calls), tc.calls)
		}
		if tc.width == 0 {
			continue
		}
		if want := fmt.Sprintf("_%d", tc.width); !strings.HasPrefix(calls[0].Intrin.Name, "kiln_dwconv_f32_") || !strings.HasSuffix(calls[0].Intrin.Name, want) {
			t.Errorf("%s: calls %s, want the depthwise intrinsic of %d columns", what, calls[0].Intrin.Name, tc.width)
		}
		if simd != 0 {
			t.Errorf("%s: %d written-out lane loops beside the intrinsic", what, simd)
		}
	}
}
