package cpu

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/codegen"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir/passes"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// pointwiseShapes are NCHW pointwise convolutions: a full tile grid, partial channel
// and pixel tiles, a reduction longer than the blocked strategy's channel block, two
// columns, one row, two images.
var pointwiseShapes = []struct{ n, c, m, h, w int }{
	{1, 16, 96, 16, 32},
	{1, 16, 22, 23, 29},
	{1, 70, 10, 16, 33},
	{1, 8, 16, 257, 2},
	{2, 12, 18, 1, 515},
}

func pointwiseAttrs() *graph.ConvAttrs {
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.KernelShape = []int64{1, 1}
	return a
}

func wantPointwise(t *testing.T, got string) {
	t.Helper()
	if got != "conv2d-pointwise-tensorized" && got != "conv2d-pointwise-tensorized+epilogue" {
		t.Fatalf("strategy %s, want conv2d-pointwise-tensorized", got)
	}
}

func scalar(v float32) *tensor.Tensor { return tensor.MustFromSlice(tensor.Shape{}, []float32{v}) }

// TestPointwiseConvMatchesReference: 1×1 stride-1 unpadded convolutions with and without
// bias, explicit zero pads and SAME, against the reference evaluator.
func TestPointwiseConvMatchesReference(t *testing.T) {
	l := Strategies(kernels.Default())
	for i, sh := range pointwiseShapes {
		a := pointwiseAttrs()
		if i%2 == 1 {
			a.AutoPad = "SAME_UPPER"
		} else {
			a.Pads = []int64{0, 0, 0, 0}
		}
		args := []nt.Arg{nt.In(f32(uint64(20+i), sh.n, sh.c, sh.h, sh.w)), nt.C(f32(uint64(30+i), sh.m, sh.c, 1, 1))}
		wantPointwise(t, nt.CheckNode(t, l, graph.OpConv, a, 1, args...))
		args = append(args, nt.C(f32(uint64(40+i), sh.m)))
		wantPointwise(t, nt.CheckNode(t, l, graph.OpConv, a, 1, args...))
	}
}

// TestPointwiseConvEpilogues: every activation the fusion puts after a convolution,
// over the bias, on each tile (on a full tile grid and on partial tiles); side operands
// per channel, of the output's shape and along a row, on every shape.
func TestPointwiseConvEpilogues(t *testing.T) {
	l := Strategies(kernels.Default())
	f := tensor.Float32
	unary := func(op graph.Op, attrs any) nt.SymStage {
		if attrs == nil {
			attrs = op.NewAttrs()
		}
		return nt.SymStage{Op: op, Attrs: attrs, Args: []nt.SymArg{nt.SymNone}}
	}
	leaky := graph.OpLeakyRelu.NewAttrs().(*graph.LeakyReluAttrs)
	leaky.Alpha = 0.1
	gelu := graph.OpGelu.NewAttrs().(*graph.GeluAttrs)
	gelu.Approximate = "tanh"
	for i, sh := range pointwiseShapes {
		hw := []string{strconv.Itoa(sh.h), strconv.Itoa(sh.w)}
		args := []nt.SymArg{nt.Sym(f, append([]string{strconv.Itoa(sh.n), strconv.Itoa(sh.c)}, hw...)...),
			nt.SymC(f32(uint64(50+i), sh.m, sh.c, 1, 1)), nt.SymC(f32(uint64(60+i), sh.m))}
		silu := []nt.SymStage{unary(graph.OpSigmoid, nil),
			{Op: graph.OpMul, Attrs: graph.OpMul.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.SymNone}, Anchor: []int{1}}}
		chains := map[string][]nt.SymStage{
			"silu":        silu,
			"hardswish":   {unary(graph.OpHardSwish, nil)},
			"hardsigmoid": {unary(graph.OpHardSigmoid, nil)},
			"mish":        {unary(graph.OpMish, nil)},
			"gelu":        {unary(graph.OpGelu, nil)},
			"gelu-tanh":   {unary(graph.OpGelu, gelu)},
			"relu6":       {{Op: graph.OpClip, Attrs: graph.OpClip.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.SymC(scalar(0)), nt.SymC(scalar(6))}}},
			"leakyrelu":   {unary(graph.OpLeakyRelu, leaky)},
			"prelu":       {{Op: graph.OpPRelu, Attrs: graph.OpPRelu.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.SymC(f32(uint64(70+i), sh.m, 1, 1))}}},
			"relu":        {unary(graph.OpRelu, nil)},
			"tanh":        {unary(graph.OpTanh, nil)},
			"sigmoid":     {unary(graph.OpSigmoid, nil)},
			"residual": {unary(graph.OpRelu, nil), {Op: graph.OpAdd, Attrs: graph.OpAdd.NewAttrs(), At: 1,
				Args: []nt.SymArg{nt.Sym(f, append([]string{strconv.Itoa(sh.n), strconv.Itoa(sh.m)}, hw...)...), nt.SymNone}}},
			"row": {{Op: graph.OpMul, Attrs: graph.OpMul.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.Sym(f, strconv.Itoa(sh.w))}}},
		}
		for name, stages := range chains {
			if i >= 2 && name != "silu" && name != "residual" && name != "row" {
				continue // every activation on the first two shapes, the side operands on all
			}
			t.Run(fmt.Sprintf("%s/%dx%dx%dx%d→%d", name, sh.n, sh.c, sh.h, sh.w, sh.m), func(t *testing.T) {
				wantPointwise(t, nt.CheckSymbolicFused(t, l, graph.OpConv, pointwiseAttrs(), args, stages, map[string]int64{}))
			})
		}
	}
}

// TestPointwiseConvReadsInPlaceWithTileScratch: the pointwise convolution with a SiLU
// epilogue has no padded copy, and its only temporary is one micro-kernel tile,
// allocated inside the parallel loop on the stack (no whole-output buffer, no malloc).
func TestPointwiseConvReadsInPlaceWithTileScratch(t *testing.T) {
	l := Strategies(kernels.Default())
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.StaticShape(1, 16, 112, 112)...))
	c, err := b.Node(graph.OpConv, pointwiseAttrs(), 1, x, b.Const("w", f32(1, 96, 16, 1, 1)), b.Const("b", f32(2, 96)))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := b.Node(graph.OpSigmoid, graph.OpSigmoid.NewAttrs(), 1, c[0])
	if err != nil {
		t.Fatal(err)
	}
	mul, err := b.Node(graph.OpMul, graph.OpMul.NewAttrs(), 1, c[0], sig[0])
	if err != nil {
		t.Fatal(err)
	}
	conv := c[0].Def
	in, err := nt.Placeholders(conv)
	if err != nil {
		t.Fatal(err)
	}
	sin, _ := nt.Placeholders(sig[0].Def)
	min, _ := nt.Placeholders(mul[0].Def)
	epi := []kernels.Epilogue{{Node: sig[0].Def, In: sin, From: []int{0}}, {Node: mul[0].Def, In: min, From: []int{0, 1}}}
	impl, err := l.LowerFused(conv, in, epi, target.Host())
	if err != nil {
		t.Fatal(err)
	}
	wantPointwise(t, impl.Strategy)
	if tr := impl.Trace.String(); strings.Contains(tr, "\"pad\"") || !strings.Contains(tr, "compact_at") {
		t.Errorf("trace: want no pad block and a compacted tile:\n%s", tr)
	}
	low, err := passes.CPUPipeline().Run(impl.Func)
	if err != nil {
		t.Fatal(err)
	}
	src, err := codegen.EmitC(low)
	if err != nil {
		t.Fatal(err)
	}
	g := intrin.GemmTile(target.Host(), 112*112, 96)
	tile := regexp.MustCompile(fmt.Sprintf(`float v_conv\w*\[%d\] __attribute__\(\(aligned\(64\)\)\);`, g.MR*g.NR))
	if !tile.MatchString(src.Code) || strings.Contains(src.Code, "__builtin_malloc") {
		t.Errorf("generated C: want the tile scratch %q and no heap allocation:\n%s", tile, src.Code)
	}
}

// TestBlockedConvReadsItsInputInPlace: the blocked convolution over blocked data (and
// over plain data with a 1×1 kernel) without padding has no padded copy and still
// matches the reference; with padding it keeps the copy. Output plain and blocked,
// strides 1 and 2.
func TestBlockedConvReadsItsInputInPlace(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	cases := []struct {
		xb, c, m, h, w, k int
		stride, pad       int64
	}{
		{8, 16, 32, 9, 10, 1, 1, 0},
		{8, 16, 32, 9, 10, 1, 2, 0},
		{16, 32, 48, 8, 7, 3, 1, 0},
		{16, 32, 48, 8, 7, 3, 2, 0},
		{8, 16, 32, 9, 10, 3, 1, 1},
		{0, 24, 32, 11, 9, 1, 2, 0},
	}
	for _, tc := range cases {
		for _, blockedOut := range []bool{false, true} {
			name := fmt.Sprintf("x/%d %dx%d k%d s%d p%d blocked out %v", tc.xb, tc.c, tc.m, tc.k, tc.stride, tc.pad, blockedOut)
			a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
			a.KernelShape = []int64{int64(tc.k), int64(tc.k)}
			a.Strides = []int64{tc.stride, tc.stride}
			a.Pads = []int64{tc.pad, tc.pad, tc.pad, tc.pad}
			x, w, bias := f32(81, 1, tc.c, tc.h, tc.w), f32(82, tc.m, tc.c, tc.k, tc.k), f32(83, tc.m)
			args := []nt.Arg{nt.In(x), nt.C(w), nt.C(bias)}
			mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
			n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
			run := args
			if tc.xb != 0 {
				n.Inputs[0].Type.Block = int64(tc.xb)
				packed := tensor.MustFromSlice(tensor.Shape{1, tc.c / tc.xb, tc.h, tc.w, tc.xb}, PackNCHWc(x.Data.([]float32), 1, tc.c, tc.h, tc.w, tc.xb))
				run = []nt.Arg{nt.In(packed), args[1], args[2]}
			}
			ot, _ := n.Outputs[0].Type.ConstShape()
			g := convGemm(target.Host(), n)
			if blockedOut {
				if int64(tc.m)%g.NR != 0 {
					continue
				}
				n.Outputs[0].Type.Block = g.NR
			}
			in, err := nt.Placeholders(n)
			if err != nil {
				t.Fatal(err)
			}
			impl, err := l.Lower(n, in, target.Host())
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if hasPad := strings.Contains(impl.Trace.String(), "\"pad\""); impl.Strategy != "conv2d-nchwc-tensorized" || hasPad != (tc.pad != 0) {
				t.Fatalf("%s: strategy %s, padded copy %v:\n%s", name, impl.Strategy, hasPad, impl.Trace)
			}
			got, _, err := nt.RunNode(l, n, run)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			v := got[0].Data.([]float32)
			if blockedOut {
				v = UnpackNCHWc(v, 1, tc.m, ot[2], ot[3], int(g.NR))
			}
			want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{x, w, bias})
			kerneltest.Close(t, name, v, want)
		}
	}
}

// TestBlockedConvEpiloguesUnderTheRow: the blocked convolution with a plain NCHW output
// and fused activations (a 3×3 window, padded, strides 1 and 2; a 1×1 stride-2 one read
// in place), with the unpacking and the epilogues under the output row loop, matches the
// reference; so do 24 and 20 output channels, fewer than one block of the kernel (a
// projection's residual add, under the row in a block of its own channel count).
func TestBlockedConvEpiloguesUnderTheRow(t *testing.T) {
	l := Strategies(kernels.Default())
	f := tensor.Float32
	silu := []nt.SymStage{{Op: graph.OpSigmoid, Attrs: graph.OpSigmoid.NewAttrs(), Args: []nt.SymArg{nt.SymNone}},
		{Op: graph.OpMul, Attrs: graph.OpMul.NewAttrs(), Args: []nt.SymArg{nt.SymNone, nt.SymNone}, Anchor: []int{1}}}
	hswish := []nt.SymStage{{Op: graph.OpHardSwish, Attrs: graph.OpHardSwish.NewAttrs(), Args: []nt.SymArg{nt.SymNone}}}
	residual := func(m string) []nt.SymStage {
		return []nt.SymStage{{Op: graph.OpAdd, Attrs: graph.OpAdd.NewAttrs(), At: 1, Args: []nt.SymArg{nt.Sym(f, "1", m, "5", "6"), nt.SymNone}}}
	}
	for _, tc := range []struct {
		k, stride, m int64
		stages       []nt.SymStage
	}{{3, 1, 32, silu}, {3, 2, 32, hswish}, {1, 2, 32, silu}, {3, 2, 32, residual("32")},
		{1, 1, 24, residual("24")}, {3, 1, 20, residual("20")}, {3, 2, 24, hswish}} {
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape, a.Strides = []int64{tc.k, tc.k}, []int64{tc.stride, tc.stride}
		h, w := "9", "11"
		if tc.k == 3 {
			a.Pads = []int64{1, 1, 1, 1}
		}
		if tc.stride == 1 {
			h, w = "5", "6"
		}
		if tc.k == 1 && tc.stride == 1 {
			h, w = "5", "6"
		}
		args := []nt.SymArg{nt.Sym(f, "1", "8", h, w), nt.SymC(f32(91, int(tc.m), 8, int(tc.k), int(tc.k))), nt.SymC(f32(92, int(tc.m)))}
		got := nt.CheckSymbolicFused(t, l, graph.OpConv, a, args, tc.stages, map[string]int64{})
		if got != "conv2d-nchwc-tensorized+epilogue" {
			t.Fatalf("k%d s%d →%d: strategy %s", tc.k, tc.stride, tc.m, got)
		}
	}
}
