package conformance

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/internal/testdata"
)

// onCPUByDesign are the ops whose kernels stay on the CPU at an OpenCL target: the
// recurrent cells (a sequential loop nest, CPU strategies only).
var onCPUByDesign = map[string]bool{"LSTM": true, "GRU": true, "RNN": true}

// TestZooOnOpenCL: every zoo model, every data set, compiled for the OpenCL device
// (PoCL in CI) with the CPU as host, matches ONNX Runtime's outputs; in resnet18,
// mobilenet_v2, bert_tiny and gpt2_tiny every convolution, matmul, reduction,
// normalization and elementwise kernel runs on the device; and in the three
// convolutional networks at least 80% of the bytes the kernels write are in image2d
// textures.
func TestZooOnOpenCL(t *testing.T) {
	zoo := testdata.Zoo(t)
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stats := map[*graph.Module]*engine.Stats{}
	o := compiledOptsWith(t, CompiledOptions{Level: 3, GPU: gpu, Target: tg, Built: func(m *graph.Module, b *engine.Built) {
		mu.Lock()
		defer mu.Unlock()
		stats[m] = b.Stats
	}})
	seen := map[string][]engine.Group{}
	for _, c := range cases {
		runAllPass(t, []string{c}, o)
		if len(stats) == 0 {
			t.Fatalf("%s: no executable reported", c)
		}
		for _, st := range stats { // the case's one model
			seen[filepath.Base(c)] = st.Groups
			if textured[filepath.Base(c)] {
				checkTextureShare(t, filepath.Base(c), st)
			}
		}
		clear(stats)
	}
	for _, name := range []string{"resnet18", "mobilenet_v2", "bert_tiny", "gpt2_tiny"} {
		gs, ok := seen[name]
		if !ok {
			t.Errorf("%s: not in the zoo", name)
			continue
		}
		on := 0
		for _, g := range gs {
			op, _, _ := strings.Cut(g.Anchor, " ")
			switch {
			case g.Device == "opencl":
				on++
			case onCPUByDesign[op]:
			default:
				t.Errorf("%s: %s runs on the %s: %s", name, g.Anchor, g.Device, g.Why)
			}
		}
		t.Logf("%s: %d of %d kernel launches on the OpenCL device", name, on, len(gs))
	}
}

// textured are the zoo's convolutional networks, whose activations the texture
// kernels hold.
var textured = map[string]bool{"resnet18": true, "mobilenet_v2": true, "squeezenet1_1": true}

// checkTextureShare fails unless at least 80% of the bytes st's kernels write are in
// textures (when the device has images).
func checkTextureShare(t *testing.T, name string, st *engine.Stats) {
	t.Helper()
	var all int64
	for _, p := range st.Tensors {
		all += p.Bytes
	}
	t.Logf("%s: %d of %d bytes written by kernels in textures", name, st.TextureBytes, all)
	if all == 0 || st.TextureBytes*5 < all*4 {
		t.Errorf("%s: %d of %d bytes in textures, want at least 80%%", name, st.TextureBytes, all)
	}
}

// TestZooCNNsOnOpenCLWithTexturesOff: the convolutional networks of the zoo compiled
// for the OpenCL device with textures off (every tensor in a buffer) match ONNX
// Runtime's outputs too, with no byte in a texture.
func TestZooCNNsOnOpenCLWithTexturesOff(t *testing.T) {
	zoo := testdata.Zoo(t)
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var inTextures int64
	o := compiledOptsWith(t, CompiledOptions{Level: 3, GPU: gpu, Target: tg, NoTextures: true, Built: func(m *graph.Module, b *engine.Built) {
		mu.Lock()
		defer mu.Unlock()
		inTextures += b.Stats.TextureBytes
	}})
	for name := range textured {
		runAllPass(t, []string{filepath.Join(zoo, name)}, o)
	}
	if inTextures != 0 {
		t.Errorf("%d bytes in textures with textures off", inTextures)
	}
}

// TestNodeSuiteOnOpenCL runs the ONNX node suite compiled for the OpenCL device: no case
// may crash or fail, and at least 910 pass (916 with textures on when last counted, as
// many as on the CPU's compiled engine).
func TestNodeSuiteOnOpenCL(t *testing.T) {
	if testing.Short() {
		t.Skip("the node suite takes a while; skipped with -short")
	}
	gpu := gputest.OpenCL(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	s, n := runNodeSuite(t, compiledOptsWith(t, CompiledOptions{Level: 3, GPU: gpu, Target: tg}), "panic", "BUG")
	t.Logf("node suite, compiled for OpenCL: %v", s)
	if s.Passed < 910 {
		t.Errorf("only %d of %d node cases pass on OpenCL, want at least 910", s.Passed, n)
	}
	if s.Failed > 0 {
		t.Errorf("%d node cases fail on OpenCL, want none", s.Failed)
	}
}
