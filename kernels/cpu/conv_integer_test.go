package cpu

import (
	"regexp"
	"testing"

	"github.com/kilnrt/kiln/graph"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// TestConvIntegerBlockedMatchesRef: under each ISA level the host has (so the AVX-512,
// AVX2 and generic integer micro-kernels each run), ConvInteger takes the blocked
// integer strategy and its int32 result equals the reference evaluator's: uint8 and
// int8 data and weights at the ends of their ranges, per-tensor and per-output-channel
// weight zero points, a data zero point at run time, constant or absent, padding,
// strides, horizontal and vertical dilation (the padded copy laid out by output
// column), a 1×1 window, channel counts that make one input block or several, output
// channels that each tile width divides and ones it pads, and rows with a partial tile.
func TestConvIntegerBlockedMatchesRef(t *testing.T) {
	l := Strategies(kernels.Default())
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	attrs := func(pads, strides, dil []int64) *graph.ConvAttrs {
		return &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: pads, Strides: strides, Dilations: dil}
	}
	extremes := func(seed uint64, dt tensor.DType, shape ...int) *tensor.Tensor {
		lo, hi := 0.0, 255.0
		if dt == tensor.Int8 {
			lo, hi = -128, 127
		}
		v := quantTensor(seed, dt, lo, hi, shape...)
		f := v.Float64s()
		for i := 0; i < len(f); i += 7 { // the range's ends, where a 16-bit product would overflow
			f[i] = hi
			if i%2 == 0 {
				f[i] = lo
			}
		}
		return tensor.FromFloat64s(dt, v.Shape, f)
	}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			for _, c := range []struct {
				name    string
				x, w    *tensor.Tensor
				zx, zw  *tensor.Tensor
				constZx bool
				a       *graph.ConvAttrs
			}{
				{"3x3 padded, u8×u8, per-tensor zero points", extremes(1, tensor.Uint8, 1, 16, 9, 15), extremes(2, tensor.Uint8, 24, 16, 3, 3),
					u8(131), u8(97), false, attrs([]int64{1, 1, 1, 1}, nil, nil)},
				{"dilated 2, u8×i8, per-channel weight zero points", extremes(3, tensor.Uint8, 1, 8, 11, 13), extremes(4, tensor.Int8, 64, 8, 3, 3),
					u8(3), quantTensor(5, tensor.Int8, -128, 127, 64), false, attrs([]int64{2, 2, 2, 2}, nil, []int64{2, 2})},
				{"strided, asymmetric pads, several input blocks", extremes(6, tensor.Uint8, 2, 96, 7, 9), extremes(7, tensor.Uint8, 32, 96, 3, 3),
					u8(255), u8(0), true, attrs([]int64{0, 1, 2, 0}, []int64{2, 2}, nil)},
				{"1x1, i8 data, no zero points", extremes(8, tensor.Int8, 1, 40, 5, 19), extremes(9, tensor.Int8, 20, 40, 1, 1),
					nil, nil, false, attrs(nil, nil, nil)},
				{"vertical dilation, 2x4 window", extremes(10, tensor.Uint8, 1, 6, 10, 12), extremes(11, tensor.Uint8, 48, 6, 2, 4),
					u8(128), u8(128), true, attrs([]int64{1, 0, 1, 3}, nil, []int64{3, 1})},
			} {
				args := []nt.Arg{nt.In(c.x), nt.C(c.w)}
				switch {
				case c.zx == nil && c.zw == nil:
				case c.constZx:
					args = append(args, nt.C(c.zx), nt.C(c.zw))
				default:
					args = append(args, nt.In(c.zx), nt.C(c.zw))
				}
				if c.x.DType == tensor.Int8 && c.zx != nil {
					args[2] = nt.In(i8(c.zx.Float64s()[0] - 128))
				}
				if got := nt.CheckNode(t, l, graph.OpConvInteger, c.a, 1, args...); got != "conv-integer-blocked" {
					t.Errorf("%s: strategy %s, want conv-integer-blocked", c.name, got)
				}
			}
		})
	}
}

// TestConvIntegerBlockedEpilogues: a dynamically quantized convolution's chain (Cast to
// float, Mul by the scales' product, Add of a bias, Relu) runs fused into the blocked
// integer kernel, with output channels a tile divides (the result split by channel
// block under the row loop) and ones it pads (unpacked by a nest of its own), and
// matches the reference evaluator.
func TestConvIntegerBlockedEpilogues(t *testing.T) {
	l := Strategies(kernels.Default())
	pads := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{1, 1, 1, 1}}
	scale := tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{0.0007})
	for _, m := range []int{32, 20} {
		w := quantTensor(20, tensor.Uint8, 0, 255, m, 8, 3, 3)
		bias := quantTensor(21, tensor.Float32, -1, 1, m, 1, 1)
		stages := []nt.SymStage{
			{Op: graph.OpCast, Attrs: &graph.CastAttrs{To: int64(tensor.Float32), Saturate: 1}, Args: []nt.SymArg{nt.SymNone}},
			{Op: graph.OpMul, Args: []nt.SymArg{nt.SymNone, nt.SymC(scale)}},
			{Op: graph.OpAdd, Args: []nt.SymArg{nt.SymNone, nt.SymC(bias)}},
			{Op: graph.OpRelu, Args: []nt.SymArg{nt.SymNone}},
		}
		args := []nt.SymArg{nt.Sym(tensor.Uint8, "1", "8", "12", "17"), nt.SymC(w), nt.Sym(tensor.Uint8), nt.SymC(quantTensor(22, tensor.Uint8, 0, 255))}
		if got := nt.CheckSymbolicFused(t, l, graph.OpConvInteger, pads, args, stages, map[string]int64{}); got != "conv-integer-blocked+epilogue" {
			t.Errorf("%d channels: strategy %s, want conv-integer-blocked+epilogue", m, got)
		}
	}
}

// TestConvIntegerBlockedLeavesTheRest: the blocked integer strategy declines what it
// does not compute (groups, a per-channel data zero point, weights at run time) and the
// padded strategy computes those; an odd merged reduction it takes in a padded block.
func TestConvIntegerBlockedLeavesTheRest(t *testing.T) {
	l := Strategies(kernels.Default())
	x := quantTensor(30, tensor.Uint8, 0, 255, 1, 4, 6, 7)
	w := quantTensor(31, tensor.Uint8, 0, 255, 4, 4, 3, 3)
	zx := tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{9})
	one := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1}
	for _, c := range []struct {
		name string
		a    *graph.ConvAttrs
		args []nt.Arg
	}{
		{"2 groups", &graph.ConvAttrs{AutoPad: "NOTSET", Group: 2}, []nt.Arg{nt.In(x), nt.C(quantTensor(32, tensor.Uint8, 0, 255, 4, 2, 3, 3))}},
		{"per-channel data zero point", one, []nt.Arg{nt.In(x), nt.C(w), nt.In(quantTensor(33, tensor.Uint8, 0, 255, 4))}},
		{"weights at run time", one, []nt.Arg{nt.In(x), nt.In(w), nt.In(zx)}},
	} {
		if got := nt.CheckNode(t, l, graph.OpConvInteger, c.a, 1, c.args...); got != "conv-integer-padded" {
			t.Errorf("%s: strategy %s, want conv-integer-padded", c.name, got)
		}
	}
	// an odd merged reduction over a single block is computed in one block padded by a
	// channel (whose weights are zero)
	odd := []nt.Arg{nt.In(quantTensor(34, tensor.Uint8, 0, 255, 1, 3, 6, 7)), nt.C(quantTensor(35, tensor.Uint8, 0, 255, 4, 3, 3, 3))}
	if got := nt.CheckNode(t, l, graph.OpConvInteger, one, 1, odd...); got != "conv-integer-blocked" {
		t.Errorf("3 channels × 3 columns: strategy %s, want conv-integer-blocked", got)
	}
}

// TestGemmIntTileDividesChannels: the integer tile's width divides the output channels
// where a declared width does, else it is the family's narrowest.
func TestGemmIntTileDividesChannels(t *testing.T) {
	avx512 := target.Target{Kind: target.CPU, Arch: "amd64", Features: []target.Feature{"avx2", "avx512bw", "avx512f", "fma"}}
	avx2 := target.Target{Kind: target.CPU, Arch: "amd64", Features: []target.Feature{"avx2", "fma"}}
	for _, c := range []struct {
		t    target.Target
		cols int64
		nr   int64
	}{{avx512, 128, 64}, {avx512, 96, 32}, {avx512, 48, 16}, {avx512, 20, 16}, {avx2, 64, 16}, {avx2, 24, 8}, {avx2, 12, 8}} {
		if g := intrin.GemmIntTile(c.t, c.cols); g.NR != c.nr {
			t.Errorf("%v, %d channels: tile %dx%d, want %d wide", c.t.Features, c.cols, g.MR, g.NR, c.nr)
		}
	}
}

// TestLargeSplitResultsStoreByColumns: a split result larger than
// channelsInnerMaxBytes, for the float and the integer convolutions, unpacked alone
// (along the columns: the other order of scheduleRowEpilogue) and with the epilogues
// the models put there (after the staged unpacking), matches the reference.
func TestLargeSplitResultsStoreByColumns(t *testing.T) {
	l := Strategies(kernels.Default())
	const c, m, h, w = 8, 64, 48, 180
	if 4*m*h*w <= channelsInnerMaxBytes {
		t.Fatalf("a %d-channel %dx%d result fits channelsInnerMaxBytes", m, h, w)
	}
	pads := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{1, 1, 1, 1}, KernelShape: []int64{3, 3}}
	if got := nt.CheckNode(t, l, graph.OpConv, pads, 1, nt.In(f32(46, 1, c, h, w)), nt.C(f32(44, m, c, 3, 3)), nt.C(f32(45, m))); got != "conv2d-nchwc-tensorized" {
		t.Errorf("float, unpacked alone: strategy %s, want conv2d-nchwc-tensorized", got)
	}
	relu := []nt.SymStage{{Op: graph.OpRelu, Args: []nt.SymArg{nt.SymNone}}}
	fargs := []nt.SymArg{nt.Sym(tensor.Float32, "1", "8", "48", "180"), nt.SymC(f32(40, m, c, 3, 3)), nt.SymC(f32(41, m))}
	if got := nt.CheckSymbolicFused(t, l, graph.OpConv, pads, fargs, relu, map[string]int64{}); got != "conv2d-nchwc-tensorized+epilogue" {
		t.Errorf("float: strategy %s, want conv2d-nchwc-tensorized+epilogue", got)
	}
	cast := []nt.SymStage{{Op: graph.OpCast, Attrs: &graph.CastAttrs{To: int64(tensor.Float32), Saturate: 1}, Args: []nt.SymArg{nt.SymNone}}}
	iargs := []nt.SymArg{nt.Sym(tensor.Uint8, "1", "8", "48", "180"), nt.SymC(quantTensor(42, tensor.Uint8, 0, 255, m, c, 3, 3)), nt.Sym(tensor.Uint8), nt.SymC(quantTensor(43, tensor.Uint8, 0, 255))}
	if got := nt.CheckSymbolicFused(t, l, graph.OpConvInteger, pads, iargs, cast, map[string]int64{}); got != "conv-integer-blocked+epilogue" {
		t.Errorf("integer: strategy %s, want conv-integer-blocked+epilogue", got)
	}
}

// TestSplitResultEpilogueReadsStagedUnpack: the requantization of a split QLinearConv
// result reads the row's unpacked channels from a row-local [sb, OW] buffer
// (scheduleStagedUnpack) along the columns, vectorized, and writes each channel's row
// contiguously; the unpacking reads the conv row buffer along its channels.
func TestSplitResultEpilogueReadsStagedUnpack(t *testing.T) {
	l := Strategies(kernels.Default())
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	args := []nt.Arg{nt.In(quantTensor(50, tensor.Uint8, 0, 255, 1, 16, 9, 14)), nt.In(f(0.031)), nt.In(u8(140)),
		nt.C(quantTensor(55, tensor.Int8, -128, 127, 64, 16, 3, 3)), nt.C(quantTensor(56, tensor.Float32, 0.001, 0.02, 64)),
		nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{64}, make([]float64, 64))), nt.In(f(0.7)), nt.In(u8(9))}
	pads := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{1, 1, 1, 1}}
	if got := nt.CheckNode(t, l, graph.OpQLinearConv, pads, 1, args...); got != "conv-integer-blocked" {
		t.Fatalf("strategy %s, want conv-integer-blocked", got)
	}
	m, _ := nt.Build(t, graph.OpQLinearConv, pads, 1, args...)
	n := m.Main.Nodes[len(m.Main.Nodes)-1]
	in, err := nt.Placeholders(n)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := l.Lower(n, in, target.Host())
	if err != nil {
		t.Fatal(err)
	}
	text := loopir.Print(impl.Func)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?s)parallel \{\s*alloc unpack: i32\[1, 1, (\d+), 1, \d+\] local`),
		regexp.MustCompile(`for unpack_c4 in \[0, \d+\) \{\s*for unpack_c2 in \[0, \d+\)`),
		regexp.MustCompile(`for requantize_c4 in \[0, \d+\) vectorized \{\s*block requantize`),
	} {
		if !want.MatchString(text) {
			t.Errorf("lowered kernel lacks %s:\n%s", want, text)
		}
	}
}

// TestQLinearConvBlockedMatchesRef: QLinearConv with constant weights takes the blocked
// integer strategy under each ISA level the host has (its requantization after the
// accumulator) and equals the reference evaluator: per-tensor and per-output-channel
// weight scales and zero points, an int32 bias, to uint8 and int8, power-of-two scales
// (ties) and an output scale small enough to saturate, padding and a stride, a stem's
// 3 input channels in one padded block, constant scales (one multiplier per channel), output
// channels a tile pads (the result unpacked by a nest of its own) and ones it divides
// (the requantization on the split result, under the row loop).
func TestQLinearConvBlockedMatchesRef(t *testing.T) {
	l := Strategies(kernels.Default())
	f := func(v float64) *tensor.Tensor {
		return tensor.FromFloat64s(tensor.Float32, tensor.Shape{}, []float64{v})
	}
	u8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Uint8, tensor.Shape{}, []float64{v}) }
	i8 := func(v float64) *tensor.Tensor { return tensor.FromFloat64s(tensor.Int8, tensor.Shape{}, []float64{v}) }
	x := quantTensor(50, tensor.Uint8, 0, 255, 1, 16, 9, 14)
	w := quantTensor(51, tensor.Int8, -128, 127, 20, 16, 3, 3)
	bias := quantTensor(52, tensor.Int32, -20000, 20000, 20)
	pads := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{1, 1, 1, 1}}
	strided := &graph.ConvAttrs{AutoPad: "NOTSET", Group: 1, Pads: []int64{0, 1, 1, 0}, Strides: []int64{2, 2}}
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			for _, c := range []struct {
				name string
				a    *graph.ConvAttrs
				args []nt.Arg
			}{
				{"ties, to uint8", pads, []nt.Arg{nt.In(x), nt.In(f(1.0 / 16)), nt.In(u8(128)), nt.C(w), nt.C(f(1.0 / 8)), nt.C(i8(0)), nt.In(f(64)), nt.In(u8(120)), nt.C(bias)}},
				{"saturating, to int8", strided, []nt.Arg{nt.In(x), nt.In(f(0.02)), nt.In(u8(3)), nt.C(w), nt.C(f(0.01)), nt.C(i8(2)), nt.In(f(0.001)), nt.In(i8(-1))}},
				{"per channel", pads, []nt.Arg{nt.In(x), nt.In(f(0.031)), nt.In(u8(140)), nt.C(w), nt.C(quantTensor(53, tensor.Float32, 0.001, 0.02, 20)),
					nt.C(quantTensor(54, tensor.Int8, -5, 5, 20)), nt.In(f(0.7)), nt.In(i8(4)), nt.C(bias)}},
				// a stem's 3 channels: one block of 4 (2 on the int16 pairs' levels), padded
				{"3 channels, a padded block", strided, []nt.Arg{nt.In(quantTensor(59, tensor.Uint8, 0, 255, 1, 3, 9, 14)), nt.In(f(0.02)), nt.In(u8(3)),
					nt.C(quantTensor(60, tensor.Int8, -128, 127, 20, 3, 3, 3)), nt.C(quantTensor(61, tensor.Float32, 0.001, 0.02, 20)),
					nt.C(tensor.FromFloat64s(tensor.Int8, tensor.Shape{20}, make([]float64, 20))), nt.C(f(0.3)), nt.C(u8(100)), nt.C(bias)}},
				// 64 channels: a tile width divides them, the result is split by block
				{"per channel, split result", pads, []nt.Arg{nt.In(x), nt.In(f(0.031)), nt.In(u8(140)), nt.C(quantTensor(55, tensor.Int8, -128, 127, 64, 16, 3, 3)),
					nt.C(quantTensor(56, tensor.Float32, 0.001, 0.02, 64)), nt.C(quantTensor(57, tensor.Int8, -5, 5, 64)), nt.In(f(0.7)), nt.In(u8(9)),
					nt.C(quantTensor(58, tensor.Int32, -20000, 20000, 64))}},
			} {
				if got := nt.CheckNode(t, l, graph.OpQLinearConv, c.a, 1, c.args...); got != "conv-integer-blocked" {
					t.Errorf("%s: strategy %s, want conv-integer-blocked", c.name, got)
				}
			}
		})
	}
}
