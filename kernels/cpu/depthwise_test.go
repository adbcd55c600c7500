package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	kt "github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// dwCase is one depthwise convolution: c input channels, mult output channels each, a
// kh×kw kernel over h×w, batch 2; with gin > 1, a grouped one of gin input and mult
// output channels per group.
type dwCase struct {
	c, mult, h, w, kh, kw int
	strides, dil, pads    []int64
	autoPad               string
	bias                  bool
	gin                   int
}

func (tc dwCase) groupIn() int { return max(tc.gin, 1) }

// takes reports whether strategy is one that the case should take: the depthwise one,
// or for a grouped case the tensorized or the vector one.
func (tc dwCase) takes(strategy string) bool {
	strategy = strings.TrimSuffix(strategy, "+epilogue")
	if tc.groupIn() > 1 {
		return strategy == "conv2d-grouped-tensorized" || strategy == "conv2d-grouped-nchwc"
	}
	return strategy == "conv2d-depthwise-nchwc"
}

func (tc dwCase) String() string {
	return fmt.Sprintf("%dx%d c%d/%d×%d %dx%d s%v d%v p%v%s bias=%v", tc.kh, tc.kw, tc.c, tc.groupIn(), tc.mult, tc.h, tc.w, tc.strides, tc.dil, tc.pads, tc.autoPad, tc.bias)
}

func (tc dwCase) attrs() *graph.ConvAttrs {
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.Group, a.KernelShape = int64(tc.c/tc.groupIn()), []int64{int64(tc.kh), int64(tc.kw)}
	a.Strides, a.Dilations, a.Pads = tc.strides, tc.dil, tc.pads
	if tc.autoPad != "" {
		a.AutoPad = tc.autoPad
	}
	return a
}

func (tc dwCase) args(seed uint64) []nt.Arg {
	m := tc.c / tc.groupIn() * tc.mult
	args := []nt.Arg{nt.In(f32(seed, 2, tc.c, tc.h, tc.w)), nt.C(f32(seed+1, m, tc.groupIn(), tc.kh, tc.kw))}
	if tc.bias {
		args = append(args, nt.C(f32(seed+2, m)))
	}
	return args
}

// dwCases: kernels 3×3, 5×5, 7×7 and 3×5, strides 1, 2 and (1, 2), dilation 2,
// asymmetric, VALID and SAME padding, with and without bias, a channel multiplier.
var dwCases = []dwCase{
	{32, 1, 11, 13, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 0},
	{32, 1, 12, 9, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", false, 0},
	{48, 1, 14, 14, 5, 5, []int64{2, 2}, []int64{1, 1}, []int64{2, 2, 2, 2}, "", true, 0},
	{16, 1, 15, 10, 7, 7, []int64{1, 1}, []int64{1, 1}, []int64{3, 3, 3, 3}, "", true, 0},
	{32, 1, 9, 17, 3, 5, []int64{1, 2}, []int64{1, 1}, []int64{1, 2, 0, 1}, "", false, 0},
	{16, 1, 13, 12, 3, 3, []int64{1, 1}, []int64{2, 2}, []int64{2, 2, 2, 2}, "", true, 0},
	{32, 1, 10, 11, 3, 3, []int64{2, 1}, []int64{1, 1}, []int64{0, 1, 2, 0}, "", true, 0},
	{16, 1, 8, 9, 3, 3, []int64{1, 1}, []int64{1, 1}, nil, "VALID", false, 0},
	{32, 1, 9, 10, 5, 5, []int64{2, 2}, []int64{1, 1}, nil, "SAME_UPPER", true, 0},
	{8, 2, 9, 9, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 0},
	// grouped: RegNet's groups of 8, wider groups, fewer inputs than outputs per group
	{48, 8, 12, 11, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 8},
	{32, 16, 9, 10, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 0, 2, 1}, "", false, 16},
	{16, 8, 10, 9, 5, 3, []int64{1, 2}, []int64{2, 1}, []int64{2, 1, 2, 1}, "", true, 4},
	// grouped on vectors: horizontal dilation, groups narrower than a tile
	{16, 8, 9, 11, 3, 3, []int64{1, 1}, []int64{1, 2}, []int64{1, 2, 1, 2}, "", true, 8},
	{24, 4, 8, 8, 3, 3, []int64{2, 2}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", false, 2},
	// rows of 28 columns and more over blocks narrower than a vector, computed paired
	// (depthwisePair): blocks of 8 on AVX-512, of 4 on AVX-512 and AVX2; a vertical
	// stride, a horizontal dilation and a channel multiplier
	{24, 1, 5, 28, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 0},
	{12, 1, 4, 32, 5, 5, []int64{2, 1}, []int64{1, 1}, []int64{2, 2, 2, 2}, "", false, 0},
	{4, 2, 5, 30, 3, 3, []int64{1, 1}, []int64{1, 2}, []int64{1, 2, 1, 2}, "", true, 0},
}

// TestDepthwiseConvMatchesReference runs the blocked depthwise and grouped strategies, under every
// ISA level the host has, with its input in NCHW and in the blocks the layout policy
// reads, its output in the block the policy stores it in and in NCHW, against the
// reference evaluator.
func TestDepthwiseConvMatchesReference(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	seen := map[string]int{}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			policy := LayoutPolicy(target.Host(), reg)
			for i, tc := range dwCases {
				for _, xb := range []int{0, 8} {
					for _, blockedOut := range []bool{true, false} {
						if !blockedOut && xb != 0 {
							continue // NCHW out is checked from NCHW in
						}
						a, args := tc.attrs(), tc.args(uint64(100*i))
						mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
						n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
						what := fmt.Sprintf("%v, input block %d", tc, xb)
						run := append([]nt.Arg{}, args...)
						if xb != 0 && tc.c%xb == 0 {
							n.Inputs[0].Type.Block = int64(xb)
							run[0] = nt.In(tensor.MustFromSlice(args[0].T.Shape, PackNCHWc(args[0].T.Data.([]float32), 2, tc.c, tc.h, tc.w, xb)))
						}
						_, out, ok := policy.Anchor(n)
						if !ok || out == 0 {
							t.Fatalf("%s: the layout policy does not anchor the convolution (block %d)", what, out)
						}
						if blockedOut {
							n.Outputs[0].Type.Block = out
						}
						got, strategy, err := nt.RunNode(l, n, run)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						seen[strategy]++
						if !tc.takes(strategy) {
							t.Fatalf("%s: strategy %s", what, strategy)
						}
						want := kt.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T}, consts(args[1:])...)
						v := got[0].Data.([]float32)
						if blockedOut {
							s := want.Shape
							v = UnpackNCHWc(v, s[0], s[1], s[2], s[3], int(out))
						}
						kt.Close(t, fmt.Sprintf("%s, output block %d", what, n.Outputs[0].Type.Block), v, want)
					}
				}
			}
		})
	}
	for _, st := range []string{"conv2d-depthwise-nchwc", "conv2d-grouped-tensorized", "conv2d-grouped-nchwc"} {
		if seen[st] == 0 {
			t.Errorf("no case took %s (taken: %v)", st, seen)
		}
	}
}

func consts(args []nt.Arg) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(args))
	for i, a := range args {
		out[i] = a.T
	}
	return out
}

// TestDepthwiseConvOnChannelsNoBlockDividesIsRightOrRefused: channel counts that the
// target's vector may not divide either take the blocked strategy in a block that
// divides them (a vector, or a half or quarter of one: MobileNetV3's 72 channels in
// blocks of 8 under AVX-512), as the layout policy says, and match the reference, or
// take another strategy (10 channels: no block of 4 floats or more divides them), under
// every ISA level the host has.
func TestDepthwiseConvOnChannelsNoBlockDividesIsRightOrRefused(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	taken := map[bool]int{}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			policy := LayoutPolicy(target.Host(), reg)
			for _, c := range []int{12, 20, 36, 72, 10} {
				tc := dwCase{c, 1, 9, 10, 3, 3, []int64{1, 1}, []int64{1, 1}, []int64{1, 1, 1, 1}, "", true, 0}
				a, args := tc.attrs(), tc.args(uint64(c))
				mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
				_, out, anchored := policy.Anchor(mod.Main.Nodes[len(mod.Main.Nodes)-1])
				if anchored && (out == 0 || int64(c)%out != 0) {
					t.Fatalf("%d channels: anchored with output block %d", c, out)
				}
				strategy := nt.CheckNode(t, l, graph.OpConv, a, 1, args...)
				if (strategy == "conv2d-depthwise-nchwc") != anchored {
					t.Fatalf("%d channels: strategy %s, anchored %v", c, strategy, anchored)
				}
				if anchored != (c%4 == 0) {
					t.Fatalf("%d channels: anchored %v, want the blocked strategy exactly where 4 divides them", c, anchored)
				}
				taken[anchored]++
			}
		})
	}
	if taken[true] == 0 || taken[false] == 0 {
		t.Fatalf("blocked %d times, refused %d times: the cases no longer cover both", taken[true], taken[false])
	}
}

// TestDepthwiseConvOfSymbolicExtentsIsRefused: a depthwise or grouped convolution over
// a symbolic image size is left to the generic rule, which answers it.
func TestDepthwiseConvOfSymbolicExtentsIsRefused(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, tc := range []dwCase{dwCases[0], dwCases[10]} {
		a, args := tc.attrs(), tc.args(7)
		nt.CheckSymbolic(t, l, graph.OpConv, a, 1, []nt.SymArg{nt.Sym(tensor.Float32, "2", fmt.Sprint(tc.c), "h", "w"), nt.SymC(args[1].T), nt.SymC(args[2].T)},
			map[string]int64{"h": 9, "w": 7}, map[string]int64{"h": 12, "w": 13})
	}
}
