package cpu

import (
	"fmt"
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

// capLevels are the instruction-set levels this host can run kernels at (its own
// widest first), each with the target a cap to it makes: the tests below run under
// every one, so that the AVX-512, AVX2 and 128-bit micro-kernel families are each
// checked on a host that has them.
func capLevels(t *testing.T) []target.Level {
	h := target.Host()
	var out []target.Level
	if h.Has("avx512f") {
		out = append(out, target.LevelAVX512)
	}
	if h.Has("avx2") && h.Has("fma") {
		out = append(out, target.LevelAVX2)
	}
	if h.Has("sse4.1") || h.Has("avx2") || h.Has("avx512f") {
		out = append(out, target.LevelGeneric)
	}
	if len(out) == 0 {
		t.Skipf("host %v is not x86: the ISA cap does not apply", h.Features)
	}
	return out
}

// tileChannels are output channel counts of MobileNet and EfficientNet layers: multiples
// of 8 and 16 that 64 (AVX-512's default tile) or 16 (AVX2's) does not divide, and 12,
// which only the 128-bit tiles divide.
var tileChannels = []int{12, 16, 24, 40, 48, 96, 160}

// TestConvOutputChannelsPickTheirTile: under each ISA level the host has, a convolution
// with any of these output channel counts takes the tensorized strategy on the tile
// GemmTile chooses, and that tile divides the channels wherever a declared tile of the
// level does (no padded last tile): 24, 40, 48 and 96 channels keep whole tiles on
// AVX-512, 24 and 40 on AVX2. The result matches the reference.
func TestConvOutputChannelsPickTheirTile(t *testing.T) {
	l := Strategies(kernels.Default())
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			for _, m := range tileChannels {
				a := graph.OpConv.NewAttrs().(*graph.ConvAttrs)
				a.Pads, a.KernelShape = []int64{1, 1, 1, 1}, []int64{3, 3}
				args := []nt.Arg{nt.In(f32(31, 1, 16, 6, 9)), nt.C(f32(32, m, 16, 3, 3)), nt.C(f32(33, m))}
				if got := nt.CheckNode(t, l, graph.OpConv, a, 1, args...); got != "conv2d-nchwc-tensorized" {
					t.Fatalf("%d channels: strategy %s", m, got)
				}
				g := intrin.GemmTile(tg, int64(m), 9)
				if divides(tg, m) && int64(m)%g.NR != 0 {
					t.Errorf("%d channels: %dx%d pads the last tile, and a declared tile divides them", m, g.MR, g.NR)
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

// divides reports whether a declared micro-kernel of t's family divides m columns.
func divides(tg target.Target, m int) bool {
	family := strings.SplitN(strings.TrimPrefix(intrin.GemmFor(tg).Update.Name, "kiln_gemm_f32_"), "_", 2)[0]
	for _, g := range intrin.Gemms() {
		if strings.HasPrefix(g.Update.Name, "kiln_gemm_f32_"+family+"_") && int64(m)%g.NR == 0 {
			return true
		}
	}
	return false
}

// TestBlockedConvOutputMatchesItsTile: the layout policy stores a convolution's output
// in blocks of the tile its strategy runs (whenever that tile divides the channels), and
// the strategy writes exactly that blocked layout: unpacked, it matches the reference.
// Under every ISA level the host has, for channel counts whose tile is not the level's
// default.
func TestBlockedConvOutputMatchesItsTile(t *testing.T) {
	reg := kernels.Default()
	l := Strategies(reg)
	for _, level := range capLevels(t) {
		t.Run(string(level), func(t *testing.T) {
			t.Setenv(target.ISAEnv, string(level))
			tg := target.Host()
			policy := LayoutPolicy(tg, reg)
			blocked := 0
			for _, m := range tileChannels {
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
				if want := map[bool]int64{true: g.NR}[int64(m)%g.NR == 0]; out != want {
					t.Fatalf("%d channels: output block %d, the strategy's tile is %dx%d", m, out, g.MR, g.NR)
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
				want := kerneltest.Ref(t, graph.OpConv, a, []*tensor.Tensor{args[0].T, args[1].T})
				v, _ := got[0].Data.([]float32)
				kerneltest.Close(t, fmt.Sprintf("%d channels in blocks of %d", m, out), UnpackNCHWc(v, 1, m, h, w, int(out)), want)
			}
			if blocked == 0 {
				t.Fatalf("no channel count was stored blocked")
			}
		})
	}
}
