package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestOneByOneConvOnOneChannelBlockRunsTheZeroInitializingKernel: under each ISA level
// the host has, a 1×1 convolution over one input channel block (at most 64 channels:
// MobileNet's and EfficientNet's expansion layers) makes one micro-kernel call per tile
// the whole reduction, in the kernel's zero-initializing form (no init pass, the tile
// never read back); a 1×1 window over several channel blocks and output rows of at
// least two tiles makes one call per tile of the Blocks form (the reduction over the
// blocks inside the call), rows of one tile or a 3×3 window keep the accumulating form.
// Rows of 7, 19 and 29 columns end in a partial tile (29 spans two tiles on every level:
// AVX-512's 14 rows, AVX2's 6 or 7), channel counts of 3, 13 and 72 (9 blocks of 8) are
// not a multiple of the kernel's unroll; every result matches the reference.
func TestOneByOneConvOnOneChannelBlockRunsTheZeroInitializingKernel(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			for _, tc := range []struct {
				c, m, k, w    int
				whole, blocks bool
			}{{16, 96, 1, 7, true, false}, {3, 32, 1, 7, true, false}, {13, 24, 1, 7, true, false}, {64, 16, 1, 7, true, false},
				{96, 32, 1, 7, false, false}, {96, 32, 1, 29, false, true}, {72, 40, 1, 29, false, true}, {16, 32, 3, 7, false, false}, {72, 40, 3, 19, false, false}} {
				const h = 5
				w := tc.w
				name := fmt.Sprintf("%d→%d k%d w%d", tc.c, tc.m, tc.k, w)
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.KernelShape = []int64{int64(tc.k), int64(tc.k)}
				if tc.k == 3 {
					a.Pads = []int64{1, 1, 1, 1}
				}
				args := []nt.Arg{nt.In(f32(51, 1, tc.c, h, w)), nt.C(f32(52, tc.m, tc.c, tc.k, tc.k)), nt.C(f32(53, tc.m))}
				n := convNode(t, a, args)
				impl := lowerConv(t, l, tg, n, name)
				if impl.Strategy != "conv2d-nchwc-tensorized" {
					t.Fatalf("%s: strategy %s", name, impl.Strategy)
				}
				g := convGemm(tg, n)
				if got := strings.Contains(impl.Trace.String(), g.Init.Name); got != tc.whole {
					t.Errorf("%s: calls %s: %v, want %v:\n%s", name, g.Init.Name, got, tc.whole, impl.Trace)
				}
				if got := strings.Contains(impl.Trace.String(), g.Blocks.Name); got != tc.blocks {
					t.Errorf("%s: calls %s: %v, want %v:\n%s", name, g.Blocks.Name, got, tc.blocks, impl.Trace)
				}
				got, _, err := nt.RunNode(l, n, args)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T, args[2].T})
				kerneltest.Close(t, name, got[0].Data.([]float32), want)
			}
		})
	}
}

// TestConvOverALargeInputCallsTheMicroKernelPerChannelBlock: a blocked convolution
// (a strided 1×1 one) whose input exceeds blocksMaxInputBytes makes a call per input channel block (the
// accumulating form, each plane streamed), not one Blocks call per tile; the result
// matches the reference.
func TestConvOverALargeInputCallsTheMicroKernelPerChannelBlock(t *testing.T) {
	l := Strategies(kernels.Default())
	tg := target.Host()
	const c, m, h, w = 96, 16, 64, 61 // 1.4 MiB of input in 3 blocks of 32 channels
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape = []int64{1, 1}
	a.Strides = []int64{2, 2} // as resnet's downsampling convolutions
	args := []nt.Arg{nt.In(f32(71, 1, c, h, w)), nt.C(f32(72, m, c, 1, 1)), nt.C(f32(73, m))}
	n := convNode(t, a, args)
	impl := lowerConv(t, l, tg, n, "")
	if impl.Strategy != "conv2d-nchwc-tensorized" {
		t.Fatalf("strategy %s", impl.Strategy)
	}
	g := convGemm(tg, n)
	tr := impl.Trace.String()
	if strings.Contains(tr, g.Blocks.Name) || !strings.Contains(tr, g.Update.Name) {
		t.Errorf("want calls of %s, not %s:\n%s", g.Update.Name, g.Blocks.Name, tr)
	}
	got, _, err := nt.RunNode(l, n, args)
	if err != nil {
		t.Fatal(err)
	}
	want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T, args[2].T})
	kerneltest.Close(t, "large input", got[0].Data.([]float32), want)
}

// tunedLowerer lowers every node with one strategy's Tuned builder under fixed knobs.
type tunedLowerer struct {
	st    kernels.Strategy
	knobs kernels.Knobs
	epi   []kernels.Epilogue
}

func (l tunedLowerer) Lower(n *graph.Node, in []kernels.Input, t target.Target) (*kernels.Impl, error) {
	impl, err := l.st.Tuned(n, in, l.epi, t, l.knobs)
	if impl != nil {
		impl.Strategy = l.st.Name
	}
	return impl, err
}

// tunedConv is the tunable convolution strategy name of the CPU table; it fails the
// test unless the strategy declares (at least) the knobs want and a tuned builder.
func tunedConv(t *testing.T, name string, want ...string) kernels.Strategy {
	t.Helper()
	return tunedStrategy(t, graph.OpConv, name, want...)
}

// tunedStrategy is tunedConv for the strategies of op.
func tunedStrategy(t *testing.T, op graph.Op, name string, want ...string) kernels.Strategy {
	t.Helper()
	reg := kernels.Default()
	table := tensorizedStrategies(reg)
	withKnobs(reg, table)
	for _, st := range table[op] {
		if st.Name != name {
			continue
		}
		names := map[string]bool{}
		for _, k := range st.Knobs {
			names[k.Name] = true
		}
		for _, w := range want {
			if st.Tuned == nil || !names[w] {
				t.Fatalf("%s declares knobs %v (tuned builder %v), want %v", name, st.Knobs, st.Tuned != nil, want)
			}
		}
		return st
	}
	t.Fatalf("no strategy %s", name)
	return kernels.Strategy{}
}

// TestBlockedConvKnobsAllMatchTheReference: the blocked convolution declares its
// schedule's knobs (parallel rows, a call per channel block and kernel row, tiles
// outside the reduction) for the tuner, and every assignment builds a kernel that
// matches the reference: a 3×3 window over several input channel blocks (the order the
// knobs move), a strided one, a 1×1 one and a dilated one.
func TestBlockedConvKnobsAllMatchTheReference(t *testing.T) {
	st := tunedConv(t, "conv2d-nchwc-tensorized", "parallel", "split_k", "tiles_outer", "rows_inner")
	for _, tc := range []struct{ c, m, k, stride, dil int }{{128, 32, 3, 1, 1}, {40, 24, 3, 2, 1}, {16, 48, 1, 1, 1}, {72, 16, 3, 1, 2}} {
		for _, par := range []int64{0, 1} {
			for _, outer := range []int64{0, 1, 2, 3} { // 2: the Blocks form (split_k 0); 3: rows_inner
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.KernelShape = []int64{int64(tc.k), int64(tc.k)}
				a.Strides = []int64{int64(tc.stride), int64(tc.stride)}
				a.Dilations = []int64{int64(tc.dil), int64(tc.dil)}
				if tc.k == 3 {
					a.Pads = []int64{1, 1, 1, 1}
				}
				args := []nt.Arg{nt.In(f32(61, 1, tc.c, 6, 9)), nt.C(f32(62, tc.m, tc.c, tc.k, tc.k)), nt.C(f32(63, tc.m))}
				knobs := kernels.Knobs{"parallel": par, "split_k": 1, "tiles_outer": outer}
				switch outer {
				case 2:
					knobs["split_k"], knobs["tiles_outer"] = 0, 0
				case 3:
					knobs["tiles_outer"], knobs["rows_inner"] = 0, 1
				}
				l := tunedLowerer{st: st, knobs: knobs}
				if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != st.Name {
					t.Fatalf("%v knobs %v: strategy %s", tc, knobs, got)
				}
			}
		}
	}
}

// TestPointwiseConvKnobsAllMatchTheReference: the pointwise convolution declares its
// parallel knob for the tuner, and both values build a kernel that matches the
// reference, on whole and partial tiles.
func TestPointwiseConvKnobsAllMatchTheReference(t *testing.T) {
	st := tunedConv(t, "conv2d-pointwise-tensorized", "parallel")
	for _, tc := range []struct{ c, m, h, w int }{{16, 96, 32, 32}, {13, 20, 23, 29}} {
		for _, par := range []int64{0, 1} {
			a := pointwiseAttrs()
			a.Pads = []int64{0, 0, 0, 0}
			args := []nt.Arg{nt.In(f32(71, 1, tc.c, tc.h, tc.w)), nt.C(f32(72, tc.m, tc.c, 1, 1)), nt.C(f32(73, tc.m))}
			l := tunedLowerer{st: st, knobs: kernels.Knobs{"parallel": par}}
			if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != st.Name {
				t.Fatalf("%v parallel %d: strategy %s", tc, par, got)
			}
		}
	}
}

// TestConvWithRunTimeWeightsFallsBackAndMatchesTheReference: a convolution whose weights
// are an input (the ONNX node suite's) is refused by the blocked strategy's default
// schedule choice, not crashed on, and another strategy matches the reference.
func TestConvWithRunTimeWeightsFallsBackAndMatchesTheReference(t *testing.T) {
	l := Strategies(kernels.Default())
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape = []int64{1, 1}
	args := []nt.Arg{nt.In(f32(81, 1, 40, 5, 19)), nt.In(f32(82, 16, 40, 1, 1))}
	if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got == "conv2d-nchwc-tensorized" {
		t.Fatalf("strategy %s for run-time weights", got)
	}
}

// TestConvOfFewerChannelsThanABlockUnpacksUnderTheRow: a blocked convolution whose
// output channels are fewer than the micro-kernel's block (a projection to 24 or 20
// channels, a 3×3 and a 1×1 window) unpacks each output row to NCHW right after its
// tiles, in a row-sized buffer (reverse_compute_at and compact_at in its trace), not in
// a pass of its own over a whole-output buffer, and matches the reference.
func TestConvOfFewerChannelsThanABlockUnpacksUnderTheRow(t *testing.T) {
	l := Strategies(kernels.Default())
	tg := target.Host()
	checked := 0
	for _, tc := range []struct{ c, m, k int }{{8, 24, 3}, {40, 20, 1}} {
		name := fmt.Sprintf("%d→%d k%d", tc.c, tc.m, tc.k)
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape = []int64{int64(tc.k), int64(tc.k)}
		if tc.k == 3 {
			a.Pads = []int64{1, 1, 1, 1}
		}
		args := []nt.Arg{nt.In(f32(81, 1, tc.c, 5, 9)), nt.C(f32(82, tc.m, tc.c, tc.k, tc.k)), nt.C(f32(83, tc.m))}
		n := convNode(t, a, args)
		if g := convGemm(tg, n); SplitBlock(int64(tc.m), g.NR) == 0 {
			t.Logf("%s: blocks of %d channels here, neither dividing %d nor more: unpacked in a pass of its own", name, g.NR, tc.m)
			continue
		}
		checked++
		impl := lowerConv(t, l, tg, n, name)
		tr := impl.Trace.String()
		if impl.Strategy != "conv2d-nchwc-tensorized" || !strings.Contains(tr, "reverse_compute_at") || !strings.Contains(tr, "compact_at") {
			t.Fatalf("%s: strategy %s, want the unpacking under the row loop:\n%s", name, impl.Strategy, tr)
		}
		got, _, err := nt.RunNode(l, n, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T, args[2].T})
		kerneltest.Close(t, name, got[0].Data.([]float32), want)
	}
	if checked == 0 {
		t.Fatal("no case split its output on this host")
	}
}

// TestStemConvRunsEachTileReductionInOneCall: a convolution over at most stemChannels
// input channels (an RGB stem: 3×3 stride 2, a 4×4 stride-4 patchify, a one-channel
// 5×5) takes the micro-kernel's Blocks form whatever its window, one call per tile for
// its whole reduction, and matches the reference; 16 input channels under a 3×3 window
// keep a call per kernel row (the reduction decomposed into an init pass).
func TestStemConvRunsEachTileReductionInOneCall(t *testing.T) {
	l := Strategies(kernels.Default())
	tg := target.Host()
	for _, tc := range []struct{ c, m, k, s, p, h, w int }{
		{3, 32, 3, 2, 1, 29, 31}, {3, 64, 4, 4, 0, 32, 28}, {1, 16, 5, 1, 2, 12, 17}, {16, 32, 3, 1, 1, 12, 17},
	} {
		name := fmt.Sprintf("%d→%d k%d s%d", tc.c, tc.m, tc.k, tc.s)
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape, a.Strides = []int64{int64(tc.k), int64(tc.k)}, []int64{int64(tc.s), int64(tc.s)}
		p := int64(tc.p)
		a.Pads = []int64{p, p, p, p}
		args := []nt.Arg{nt.In(f32(91, 1, tc.c, tc.h, tc.w)), nt.C(f32(92, tc.m, tc.c, tc.k, tc.k)), nt.C(f32(93, tc.m))}
		n := convNode(t, a, args)
		impl := lowerConv(t, l, tg, n, name)
		tr := impl.Trace.String()
		blocks := strings.Contains(tr, convGemm(tg, n).Blocks.Name)
		if impl.Strategy != "conv2d-nchwc-tensorized" || blocks != (tc.c <= stemChannels) || blocks == strings.Contains(tr, "decompose_reduction") {
			t.Fatalf("%s: strategy %s, Blocks form %v (want %v):\n%s", name, impl.Strategy, blocks, tc.c <= stemChannels, tr)
		}
		got, _, err := nt.RunNode(l, n, args)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T, args[2].T})
		kerneltest.Close(t, name, got[0].Data.([]float32), want)
	}
}

// convNode is the Conv node of a one-node graph over args (nt.Build).
func convNode(t *testing.T, a *graph.ConvAttrs, args []nt.Arg) *graph.Node {
	t.Helper()
	mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
	return mod.Main.Nodes[len(mod.Main.Nodes)-1]
}

// lowerConv lowers the convolution n through l's strategies for tg on placeholder
// inputs; a failure names the case.
func lowerConv(t *testing.T, l *kernels.Strategies, tg target.Target, n *graph.Node, name string) *kernels.Impl {
	t.Helper()
	in, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := l.Lower(n, in, tg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return impl
}

// TestDilatedConvRunsBlockedAndMatchesTheReference: under each ISA level the host has,
// convolutions dilated along the row (the "pad" stage then lays out each output
// column's kernel columns side by side) take the blocked strategy and match the
// reference: DeepLabV3's atrous 3×3 over a 14×14 map (dilation and padding 12), one
// dilated along the row only and strided, a 5×3 window over several channel blocks,
// and a 1×3 window that does not fit without its padding.
func TestDilatedConvRunsBlockedAndMatchesTheReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			for _, tc := range []struct {
				c, m, h, w         int
				kh, kw             int
				dil, strides, pads []int64
			}{
				{64, 32, 14, 14, 3, 3, []int64{12, 12}, nil, []int64{12, 12, 12, 12}},
				{16, 24, 9, 17, 3, 3, []int64{1, 3}, []int64{2, 2}, []int64{1, 2, 0, 3}},
				{96, 16, 11, 13, 5, 3, []int64{2, 2}, nil, []int64{4, 2, 4, 2}},
				{8, 8, 4, 5, 1, 3, []int64{1, 4}, nil, []int64{0, 4, 0, 4}},
			} {
				name := fmt.Sprintf("%d→%d %dx%d k%dx%d dil %v", tc.c, tc.m, tc.h, tc.w, tc.kh, tc.kw, tc.dil)
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.KernelShape = []int64{int64(tc.kh), int64(tc.kw)}
				a.Dilations, a.Strides, a.Pads = tc.dil, tc.strides, tc.pads
				args := []nt.Arg{nt.In(f32(91, 1, tc.c, tc.h, tc.w)), nt.C(f32(92, tc.m, tc.c, tc.kh, tc.kw)), nt.C(f32(93, tc.m))}
				n := convNode(t, a, args)
				if impl := lowerConv(t, l, tg, n, name); impl.Strategy != "conv2d-nchwc-tensorized" {
					t.Fatalf("%s: strategy %s", name, impl.Strategy)
				}
				got, _, err := nt.RunNode(l, n, args)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T, args[2].T})
				kerneltest.Close(t, name, got[0].Data.([]float32), want)
			}
		})
	}
}
