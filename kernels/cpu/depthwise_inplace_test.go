package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// allocatesPad reports whether f allocates the depthwise strategy's padded copy.
func allocatesPad(f *loopir.PrimFunc) bool {
	found := false
	loopir.MapStmt(f.Body, func(e loopir.Expr) loopir.Expr { return e }, func(s loopir.Stmt) loopir.Stmt {
		if al, ok := s.(*loopir.Allocate); ok && al.Buf.Name == "pad" {
			found = true
		}
		return nil
	})
	return found
}

// TestDepthwiseInPlaceReadsMatchReference: a depthwise convolution whose input is
// stored in its own channel blocks (blocks of 8 in and out) and whose tile is written
// out reads the input where it is stored, behind the padding's test, with no padded
// copy; the lowering splits its rows and tiles into borders and interior
// (partition-boundary-loops). Every case of dwCases without groups or multiplier
// (kernels 3×3 to 7×7, strides 1, 2 and mixed, dilation, asymmetric, VALID and SAME
// pads; rows no tile or band divides) at tile widths 1 and 6 and bands of 2 and 8 rows
// matches the reference evaluator. Rows of 28 columns and more over blocks
// narrower than the vector are computed paired and keep the copy.
func TestDepthwiseInPlaceReadsMatchReference(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	const block = 8
	inPlace := 0
	for _, k := range []kernels.Knobs{{"tile_w": 1, "rows": 2, "max_taps": 49}, {"tile_w": 6, "rows": 8, "max_taps": 49}} {
		lw := choiceLowerer{l, kernels.Choice{Strategy: "conv2d-depthwise-nchwc", Knobs: k}}
		for i, tc := range dwCases {
			if tc.gin > 0 || tc.mult != 1 || tc.c%block != 0 {
				continue
			}
			a, args := tc.attrs(), tc.args(uint64(500+i))
			mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
			n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
			n.Inputs[0].Type.Block, n.Outputs[0].Type.Block = block, block
			what := fmt.Sprintf("%v, %v", tc, k)
			in, err := nt.Placeholders(n)
			if err != nil {
				t.Fatal(err)
			}
			impl, err := lw.Lower(n, in, target.Host())
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if !allocatesPad(impl.Func) {
				inPlace++
			} else if tc.w < minPairColumns {
				t.Errorf("%s: the kernel copies its input into a padded buffer, want reads in place", what)
			}
			run := append([]nt.Arg{}, args...)
			run[0] = nt.In(tensor.MustFromSlice(args[0].T.Shape, PackNCHWc(args[0].T.Data.([]float32), 2, tc.c, tc.h, tc.w, block)))
			got, _, err := nt.RunNode(lw, n, run)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			want := kt.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T}, consts(args[1:])...)
			s := want.Shape
			kt.Close(t, what, UnpackNCHWc(got[0].Data.([]float32), s[0], s[1], s[2], s[3], block), want)
		}
	}
	if inPlace == 0 {
		t.Error("no case read its input in place")
	}
}
