package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// groupedBlockCases: grouped convolutions whose groups and input storage blocks nest
// both ways and neither way (groups of 6 in blocks of 8), strides 1 and 2, odd sizes,
// asymmetric padding.
var groupedBlockCases = []dwCase{
	{48, 8, 13, 11, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 8},
	{32, 8, 9, 7, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 0, 2, 1}, "", false, 8},
	{64, 8, 7, 10, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 16},
	{32, 8, 6, 9, 3, 3, []int64{2, 1}, []int64{1, 1}, []int64{0, 1, 1, 1}, "", true, 4},
	{48, 8, 7, 9, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 6},
}

// TestGroupedConvReadsEveryInputBlockMatchesReference runs the grouped strategies on
// inputs stored plain and in blocks of 4, 8 and 16 channels (a block holding several
// groups, a group spanning several blocks, neither), their output in the block the
// layout policy stores it in, under every ISA level the host has, against the
// reference evaluator.
func TestGroupedConvReadsEveryInputBlockMatchesReference(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	seen := map[string]int{}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			policy := LayoutPolicy(target.Host(), reg)
			for i, tc := range groupedBlockCases {
				for _, xb := range []int{0, 4, 8, 16} {
					if xb != 0 && tc.c%xb != 0 {
						continue
					}
					a, args := tc.attrs(), tc.args(uint64(300+10*i))
					mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
					n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
					what := fmt.Sprintf("%v, input block %d", tc, xb)
					run := append([]nt.Arg{}, args...)
					if xb != 0 {
						n.Inputs[0].Type.Block = int64(xb)
						run[0] = nt.In(tensor.MustFromSlice(args[0].T.Shape, PackNCHWc(args[0].T.Data.([]float32), 2, tc.c, tc.h, tc.w, xb)))
					}
					_, out, ok := policy.Anchor(n)
					if !ok || out == 0 {
						t.Fatalf("%s: the layout policy does not anchor the convolution (block %d)", what, out)
					}
					n.Outputs[0].Type.Block = out
					got, strategy, err := nt.RunNode(l, n, run)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					seen[strategy]++
					if !tc.takes(strategy) {
						t.Fatalf("%s: strategy %s", what, strategy)
					}
					want := kt.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T}, consts(args[1:])...)
					s := want.Shape
					v := UnpackNCHWc(got[0].Data.([]float32), s[0], s[1], s[2], s[3], int(out))
					kt.Close(t, fmt.Sprintf("%s, output block %d, %s", what, out, strategy), v, want)
				}
			}
		})
	}
	if seen["conv2d-grouped-tensorized+epilogue"]+seen["conv2d-grouped-tensorized"] == 0 {
		t.Errorf("no case took the tensorized grouped strategy (taken: %v)", seen)
	}
}
