package engine_test

import (
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
)

// sigmoidMLP is relu(sigmoid(x) · w) for x of f32[b,512]: the sigmoid has a GPU kernel.
func sigmoidMLP(t *testing.T) *graph.Module {
	m := cacheModel(t)
	mm := m.Main.Nodes[0]
	b := graph.NewBuilder("main")
	x := b.Param("x", m.Main.Params[0].Type)
	s, err := b.Op1(graph.OpSigmoid, nil, x)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := b.Op1(graph.OpMatMul, nil, s, b.Const("w", mm.Inputs[1].Const))
	r, err := b.Op1(graph.OpRelu, nil, y)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Module(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenCLWarmStartBuildsNoProgram: an OpenCL engine (the CPU as host) compiles a
// model once into the journal with its OpenCL program binary; a new process (a fresh
// journal handle and a freshly opened device) finds the entry and loads the binary
// without building any program, and answers the same. The key names the GPU and the
// host, so it differs from the CPU engine's.
func TestOpenCLWarmStartBuildsNoProgram(t *testing.T) {
	cpu := cpuConfig(t)
	src := engine.InMemory("mlp", sigmoidMLP(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := t.TempDir()
	openclConfig := func() engine.Config {
		gpu := gputest.OpenCL(t)
		tg, err := gpu.Target()
		if err != nil {
			t.Fatal(err)
		}
		cfg := cpu
		cfg.Target, cfg.Device, cfg.Host = tg, gpu, cpu.Device
		return cfg
	}

	cfg := openclConfig()
	cold, want, _ := journalRun(t, dir, src, cfg, shapes)
	builds := cfg.Device.(interface{ Stats() opencl.Stats }).Stats()
	if cold.Outcome != compilecache.Built || builds.SourceBuilds == 0 {
		t.Fatalf("cold: %v, %+v: want a compile that builds the OpenCL program", cold.Outcome, builds)
	}
	onDevice := false
	for _, b := range cold.Exe.Binaries {
		onDevice = onDevice || b.Device == "opencl"
	}
	if !onDevice {
		t.Fatalf("the executable has no OpenCL binary: %+v", cold.Stats.Groups)
	}

	cfg = openclConfig()
	warm, got, _ := journalRun(t, dir, src, cfg, shapes)
	builds = cfg.Device.(interface{ Stats() opencl.Stats }).Stats()
	if warm.Outcome != compilecache.Hit || builds.SourceBuilds != 0 || builds.BinaryLoads == 0 {
		t.Fatalf("warm: %v, %+v: want a journal hit that loads the program binary and builds nothing", warm.Outcome, builds)
	}
	if got.String() != want.String() {
		t.Fatal("warm output differs from the cold compile's")
	}
	if cpuKey := newEngine(t, cpu).Material(src, shapes).Key(); cpuKey == warm.Key {
		t.Fatal("the OpenCL engine's key is the CPU engine's")
	}
}
