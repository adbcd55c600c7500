package main

import (
	"context"
	"errors"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/internal/testdata"
)

// gpuNode stands for a GPU node's CUDA device in a key test: a GPU of arch with no
// NVRTC (an empty toolchain), as cuda.Open describes one; its other methods are the
// compile-only device's (nothing runs here).
type gpuNode struct {
	devices.Device
	arch string
}

func (g gpuNode) Info() devices.Info {
	return devices.Info{Kind: "cuda", Name: "a GPU node's " + g.arch, Fingerprint: "cuda/" + g.arch}
}

// TestCUDAPrebuildIsReadByAGPUNodeWithoutNVRTC: an executable prebuilt for sm_90 on
// a machine without a GPU (cuda.Offline) is found, not rebuilt, by a serve-only kiln
// (no compiler) whose GPU is an sm_90 without NVRTC; an sm_80 GPU node finds nothing
// (ErrNotPrebuilt), since the PTX was built for sm_90.
func TestCUDAPrebuildIsReadByAGPUNodeWithoutNVRTC(t *testing.T) {
	off := gputest.CUDAArch(t, "sm_90")
	cpu, err := devcpu.Open(devcpu.Options{Threads: 1})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	j, err := compilecache.Open(compilecache.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	m, err := engine.Open("mlp", "../../examples/mlp/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := off.Target()
	if err != nil {
		t.Fatal(err)
	}
	prebuild, err := engine.New(engine.Config{Target: tg, Device: off, Host: cpu, Compiler: compiler.JIT{}, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	first, err := prebuild.Executable(context.Background(), m, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Outcome != compilecache.Built {
		t.Fatalf("prebuild: %v, want built", first.Outcome)
	}
	node := func(arch string) *engine.Engine {
		tg, err := cuda.ArchTarget(arch)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{Target: tg, Device: gpuNode{off, arch}, Host: cpu, Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	got, err := node("sm_90").Executable(context.Background(), m, nil, nil)
	if err != nil {
		t.Fatalf("the sm_90 node: %v", err)
	}
	if got.Outcome != compilecache.Hit || got.Key != first.Key {
		t.Fatalf("the sm_90 node: %v under key %s, want a hit under the prebuilt key %s", got.Outcome, got.Key.Short(), first.Key.Short())
	}
	var ptx int
	for _, b := range got.Exe.Binaries {
		if b.Device == "cuda" && b.Fingerprint == "cuda/sm_90" {
			ptx++
		}
	}
	if ptx != 1 {
		t.Fatalf("the sm_90 node's executable has %d PTX modules for sm_90, want 1", ptx)
	}
	if _, err := node("sm_80").Executable(context.Background(), m, nil, nil); !errors.Is(err, engine.ErrNotPrebuilt) {
		t.Fatalf("the sm_80 node: %v, want ErrNotPrebuilt", err)
	}
}
