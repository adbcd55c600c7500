package conformance

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/gputest"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/tensor"
)

// TestZooKernelsCompileForCUDA: every zoo model, for the shapes of every data set,
// compiles for CUDA sm_80 and sm_90 with no GPU (the compile-only architecture of
// `kiln prebuild --cuda-arch`): NVRTC builds one PTX module per executable for the
// architecture, holding an entry for every kernel that runs on the GPU, and the
// convolutions, matmuls, reductions and elementwise kernels of resnet18, mobilenet_v2,
// bert_tiny and gpt2_tiny are among them.
func TestZooKernelsCompileForCUDA(t *testing.T) {
	zoo := testdata.Zoo(t)
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, arch := range []string{"sm_80", "sm_90"} {
		off := gputest.CUDAArch(t, arch)
		tg, err := off.Target()
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(dev, CompiledOptions{Level: 3, GPU: off, Target: tg})
		for _, c := range cases {
			name := filepath.Base(c)
			m, err := onnx.Load(filepath.Join(c, "model.onnx"), onnx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sets, err := dataSets(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, set := range sets {
				inputs, err := readInputs(m, set)
				if err != nil {
					t.Fatalf("%s: %v", set, err)
				}
				ts := map[string]*tensor.Tensor{}
				for k, v := range inputs {
					ts[k] = v.(*tensor.Tensor)
				}
				b, err := e.Executable(context.Background(), engine.InMemory(name, m), engine.ShapesOf(ts), nil)
				if err != nil {
					t.Errorf("%s %s for %s: %v", name, filepath.Base(set), arch, err)
					continue
				}
				checkPTX(t, name+" "+filepath.Base(set)+" "+arch, arch, b)
			}
		}
	}
}

// checkPTX fails unless b's executable carries one CUDA binary, PTX for arch with an
// entry for each unique kernel that runs on the GPU, and (in the models that have
// them) the heavy ops run there.
func checkPTX(t *testing.T, what, arch string, b *engine.Built) {
	t.Helper()
	var ptx []byte
	for _, bin := range b.Exe.Binaries {
		if bin.Device == "cuda" {
			if ptx != nil {
				t.Errorf("%s: two CUDA binaries", what)
			}
			ptx = bin.Data
			if bin.Fingerprint != "cuda/"+arch {
				t.Errorf("%s: binary for %q", what, bin.Fingerprint)
			}
		}
	}
	onGPU := map[string]bool{}
	for _, g := range b.Stats.Groups {
		op, _, _ := strings.Cut(g.Anchor, " ")
		switch {
		case g.Device == "cuda":
			onGPU[g.Kernel] = true
		case onCPUByDesign[op]:
		case heavy[strings.Fields(what)[0]]:
			t.Errorf("%s: %s runs on the %s: %s", what, g.Anchor, g.Device, g.Why)
		}
	}
	if len(onGPU) == 0 {
		if ptx != nil {
			t.Errorf("%s: a CUDA binary with no kernel on the GPU", what)
		}
		return
	}
	if !bytes.Contains(ptx, []byte(".target "+arch)) {
		t.Fatalf("%s: the CUDA binary is not PTX for %s: %.200q", what, arch, ptx)
	}
	for k := range onGPU {
		if !bytes.Contains(ptx, []byte(".entry "+k+"(")) {
			t.Errorf("%s: no PTX entry for kernel %s", what, k)
		}
	}
	t.Logf("%s: %d unique kernels in %d bytes of PTX", what, len(onGPU), len(ptx))
}

// heavy are the zoo models whose every kernel but the recurrent cells' runs on a GPU.
var heavy = map[string]bool{"resnet18": true, "mobilenet_v2": true, "bert_tiny": true, "gpt2_tiny": true}

// TestZooOnCUDA: every zoo model, every data set, compiled for CUDA GPU 0 with the
// CPU as host, matches ONNX Runtime's outputs, and in resnet18, mobilenet_v2,
// bert_tiny and gpt2_tiny every kernel but the recurrent cells' runs on the GPU.
// Skipped without a GPU (failed under KILN_REQUIRE_GPU=1).
func TestZooOnCUDA(t *testing.T) {
	zoo := testdata.Zoo(t)
	gpu := gputest.CUDA(t)
	tg, err := gpu.Target()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := FindCases([]string{zoo})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var built []*engine.Built
	o := compiledOptsWith(t, CompiledOptions{Level: 3, GPU: gpu, Target: tg, Built: func(_ *graph.Module, b *engine.Built) {
		mu.Lock()
		defer mu.Unlock()
		built = append(built, b)
	}})
	for _, c := range cases {
		runAllPass(t, []string{c}, o)
		mu.Lock()
		for _, b := range built {
			checkPTX(t, filepath.Base(c)+" "+gpu.Arch(), gpu.Arch(), b)
		}
		built = nil
		mu.Unlock()
	}
}
