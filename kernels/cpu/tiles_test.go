package cpu

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/kerneltest"
	nt "github.com/kilnrt/kiln/internal/nodetest"
	"github.com/kilnrt/kiln/intrin"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// capLevels are the instruction-set levels this host can run kernels at, its own
// widest first: the tests below run under a cap to each one (target.ISAEnv), so that
// the AVX-512, AVX2 and 128-bit micro-kernel families are each checked on a host that
// has them. The x86-64 baseline runs everywhere on x86-64.
func capLevels(t *testing.T) []target.Level {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the ISA cap applies to x86-64; this host is %s", runtime.GOARCH)
	}
	h := target.Host()
	var out []target.Level
	if h.Has("avx512f") {
		out = append(out, target.LevelAVX512)
	}
	if h.Has("avx2") && h.Has("fma") {
		out = append(out, target.LevelAVX2)
	}
	return append(out, target.LevelGeneric)
}

// tileChannels are output channel counts of MobileNet and EfficientNet layers: multiples
// of 8 and 16 that 64 (AVX-512's default tile) or 16 (AVX2's) does not divide, and 12,
// which only the 128-bit tiles divide.
var tileChannels = []int{12, 16, 24, 40, 48, 96, 160}

// levelTiles: per ISA level, output channel counts whose convolution runs a tile other
// than the level's default, one that divides them (the default pads them).
var levelTiles = map[target.Level]map[int]int64{
	target.LevelAVX512:  {16: 16, 24: 24, 48: 48, 96: 48, 160: 32}, // 24: 14×24 with AVX512VL, else 32
	target.LevelAVX2:    {24: 24, 40: 8},
	target.LevelGeneric: {12: 4},
}

// TestConvOutputChannelsPickTheirTile: under each ISA level the host has, a convolution
// with any of these output channel counts takes the tensorized strategy on the tile
// GemmTile chooses (the kernel calls it), MobileNet's channel counts that the level's
// default tile does not divide run a narrower tile that does, and the result matches the
// reference.
func TestConvOutputChannelsPickTheirTile(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			const c, h, w = 16, 6, 56
			for _, m := range tileChannels {
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.Pads, a.KernelShape = []int64{1, 1, 1, 1}, []int64{3, 3}
				args := []nt.Arg{nt.In(f32(31, 1, c, h, w)), nt.C(f32(32, m, c, 3, 3)), nt.C(f32(33, m))}
				if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != "conv2d-nchwc-tensorized" {
					t.Fatalf("%d channels: strategy %s", m, got)
				}
				g := intrin.GemmTile(tg, int64(m), w)
				nr, ok := levelTiles[level][m]
				if m == 24 && level == target.LevelAVX512 && !tg.Has("avx512vl") {
					nr = 32 // no half vectors without AVX512VL
				}
				if ok && g.NR != nr {
					t.Errorf("%d channels: %dx%d, want a tile %d wide", m, g.MR, g.NR, nr)
				}
				m0, _ := nt.Build(t, graph.OpConv, a, 1, args...)
				n := m0.Main.Nodes[len(m0.Main.Nodes)-1]
				in, err := nt.Placeholders(n)
				if err != nil {
					t.Fatal(err)
				}
				impl, err := l.Lower(n, in, tg)
				if err != nil {
					t.Fatal(err)
				}
				if tr := impl.Trace.String(); !strings.Contains(tr, g.Update.Name) {
					t.Errorf("%d channels: the kernel does not run %s:\n%s", m, g.Update.Name, tr)
				}
			}
		})
	}
}

// TestBlockedConvOutputMatchesItsTile: the layout policy stores a convolution's output
// in blocks of the tile its strategy runs (whenever that tile divides the channels),
// else in blocks of one vector where those divide the channels and the tile (80 and
// RegNetX's 400 channels in tiles of 48 and 32 on AVX-512: the strategy repacks its
// tiles), and the strategy writes exactly that blocked layout: unpacked, it matches the
// reference. Under every ISA level the host has, for channel counts whose tile is not
// the level's default.
func TestBlockedConvOutputMatchesItsTile(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			policy := LayoutPolicy(tg, reg)
			blocked, repacked := 0, 0
			for _, m := range append(tileChannels, 80, 400) {
				const c, h, w = 8, 5, 7
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.KernelShape = []int64{1, 1}
				args := []nt.Arg{nt.In(f32(41, 1, c, h, w)), nt.C(f32(42, m, c, 1, 1))}
				mod, _ := nt.Build(t, graph.OpConv, a, 1, args...)
				n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
				_, out, ok := policy.Anchor(n)
				if !ok {
					t.Fatalf("%d channels: the layout policy does not anchor the convolution", m)
				}
				g := intrin.GemmTile(tg, int64(m), w)
				want, lanes := int64(0), channelMultiple(tg)
				switch {
				case int64(m)%g.NR == 0:
					want = g.NR
				case lanes != 0 && int64(m)%lanes == 0 && g.NR%lanes == 0:
					want = lanes
					repacked++
				}
				if out != want {
					t.Fatalf("%d channels: output block %d, want %d (the strategy's tile is %dx%d)", m, out, want, g.MR, g.NR)
				}
				if out == 0 {
					continue
				}
				blocked++
				n.Outputs[0].Type.Block = out
				got, strategy, err := nt.RunNode(l, n, args)
				if err != nil {
					t.Fatalf("%d channels in blocks of %d: %v", m, out, err)
				}
				if strategy != "conv2d-nchwc-tensorized" {
					t.Fatalf("%d channels: strategy %s", m, strategy)
				}
				ref := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T})
				v, _ := got[0].Data.([]float32)
				kerneltest.Close(t, fmt.Sprintf("%d channels in blocks of %d", m, out), UnpackNCHWc(v, 1, m, h, w, int(out)), ref)
			}
			if blocked == 0 {
				t.Fatalf("no channel count was stored blocked")
			}
			if level == target.LevelAVX512 && repacked == 0 {
				t.Fatalf("no channel count was stored in blocks of a vector narrower than its tile")
			}
		})
	}
}

// avx512Target is an AVX-512 CPU, for lowering (never running) kernels on any host.
var avx512Target = target.Target{Kind: target.CPU, Arch: "amd64", Cores: 2, VectorBits: 512,
	Features: []target.Feature{"avx", "avx2", "avx512f", "avx512vl", "fma", "sse4.1", "sse4.2"}}

// TestAVX512KeepsTheFastPathOnMobileNetChannels lowers (without running: the host may
// lack AVX-512) MobileNet's pointwise and 3×3 convolutions for an AVX-512 CPU: every one
// takes a tensorized strategy on the tile GemmTile chooses, the output channel counts
// that 64 does not divide but a narrower tile does (16, 96, 160) keep a blocked output
// in that tile's width, and a 3×3 convolution with 96 output channels takes Winograd
// (its products on whole 48-column tiles); depthwise convolutions over channel counts
// that 16 does not divide but 8 does run blocked in 8.
func TestAVX512KeepsTheFastPathOnMobileNetChannels(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	policy := LayoutPolicy(avx512Target, reg)
	lower := func(n *graph.Node) *kernels.Impl {
		t.Helper()
		in, err := nt.Placeholders(n)
		if err != nil {
			t.Fatal(err)
		}
		impl, err := l.Lower(n, in, avx512Target)
		if err != nil {
			t.Fatalf("%v: %v", n, err)
		}
		return impl
	}
	for _, m := range []int{16, 24, 32, 64, 96, 160, 320} {
		const c, h, w = 32, 4, 56
		a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
		a.KernelShape = []int64{1, 1}
		mod, _ := nt.Build(t, graph.OpConv, a, 1, nt.In(f32(51, 1, c, h, w)), nt.C(f32(52, m, c, 1, 1)))
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		_, out, ok := policy.Anchor(n)
		if !ok {
			t.Fatalf("%d channels: not anchored", m)
		}
		g := intrin.GemmTile(avx512Target, int64(m), w)
		if m == 16 || m == 96 || m == 160 {
			if out == 0 || out != g.NR || int64(m)%out != 0 {
				t.Errorf("%d channels: output block %d, tile %dx%d", m, out, g.MR, g.NR)
			}
		}
		n.Outputs[0].Type.Block = out
		impl := lower(n)
		if impl.Strategy != "conv2d-nchwc-tensorized" || !strings.Contains(impl.Trace.String(), g.Update.Name) {
			t.Errorf("%d channels: strategy %s, want the tensorized one on %s", m, impl.Strategy, g.Update.Name)
		}
	}
	// MobileNetV3's depthwise convolutions over 72, 120, 184 and 200 channels, which 16
	// does not divide: blocks of 8 (half a zmm), not the generic strategy
	for _, c := range []int{72, 120, 184, 200} {
		tc := dwCase{c, 1, 14, 14, 5, 5, []int64{1, 1}, []int64{1, 1}, []int64{2, 2, 2, 2}, "", true, 0}
		mod, _ := nt.Build(t, graph.OpConv, tc.attrs(), 1, tc.args(uint64(c))...)
		n := mod.Main.Nodes[len(mod.Main.Nodes)-1]
		if _, out, ok := policy.Anchor(n); !ok || out != 8 {
			t.Errorf("depthwise, %d channels: anchored %v in blocks of %d, want 8", c, ok, out)
		}
		n.Outputs[0].Type.Block = 8
		if impl := lower(n); strings.TrimSuffix(impl.Strategy, "+epilogue") != "conv2d-depthwise-nchwc" {
			t.Errorf("depthwise, %d channels: strategy %s", c, impl.Strategy)
		}
	}
	a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
	a.Pads, a.KernelShape = []int64{1, 1, 1, 1}, []int64{3, 3}
	mod, _ := nt.Build(t, graph.OpConv, a, 1, nt.In(f32(53, 1, 128, 28, 28)), nt.C(f32(54, 96, 128, 3, 3)))
	if impl := lower(mod.Main.Nodes[len(mod.Main.Nodes)-1]); impl.Strategy != "conv2d-winograd-tensorized" || !strings.Contains(impl.Trace.String(), "kiln_gemm_f32_avx512_8x48") {
		t.Errorf("3×3, 96 channels: strategy %s, want Winograd on 8×48 tiles", impl.Strategy)
	}
}
