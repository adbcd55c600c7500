package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// finishingGPU stands for a GPU whose driver compiles "PTX" at load: Finish prefixes
// its input with "SASS:" and counts its calls. Nothing else of it is used.
type finishingGPU struct {
	devices.Device
	kind, key string
	calls     int
}

func (g *finishingGPU) Info() devices.Info {
	return devices.Info{Kind: g.kind, Fingerprint: g.kind + "/sm_90"}
}
func (g *finishingGPU) FinishKey() string { return g.key }
func (g *finishingGPU) Finish(b []byte) ([]byte, error) {
	g.calls++
	return append([]byte("SASS:"), b...), nil
}

type plainDevice struct{ devices.Device }

func (plainDevice) Info() devices.Info { return devices.Info{Kind: "cpu", Fingerprint: "cpu/test"} }

// TestFinishedBinariesComeFromTheJournal: a GPU binary its driver finishes at load is
// finished once and published; a second engine on the same journal (a restart) loads
// the finished binary without finishing; another driver (finish key) finishes again;
// other devices' binaries and the executable itself are left alone.
func TestFinishedBinariesComeFromTheJournal(t *testing.T) {
	dir := t.TempDir()
	exe := &vm.Executable{Binaries: []vm.Binary{{Device: "cpu", Data: []byte("ELF")}, {Device: "cuda", Fingerprint: "cuda/sm_90", Data: []byte("PTX")}}}
	tg, err := target.GPU(target.CUDA, "sm_90", target.GPUFacts{MaxWorkGroup: 1024, LocalMemBytes: 48 << 10, ComputeUnits: 132})
	if err != nil {
		t.Fatal(err)
	}
	start := func(key string) (*finishingGPU, *vm.Executable) {
		j, err := compilecache.Open(compilecache.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		gpu := &finishingGPU{kind: "cuda", key: key}
		e, err := New(Config{Target: tg, Device: gpu, Host: plainDevice{}, Journal: j})
		if err != nil {
			t.Fatal(err)
		}
		return gpu, e.finished(context.Background(), exe)
	}
	gpu, got := start("driver 13000")
	if gpu.calls != 1 || !bytes.Equal(got.Binaries[1].Data, []byte("SASS:PTX")) || !bytes.Equal(got.Binaries[0].Data, []byte("ELF")) {
		t.Fatalf("first start: %d finishes, binaries %q", gpu.calls, got.Binaries)
	}
	if !bytes.Equal(exe.Binaries[1].Data, []byte("PTX")) {
		t.Fatal("the executable itself was changed")
	}
	gpu, got = start("driver 13000")
	if gpu.calls != 0 || !bytes.Equal(got.Binaries[1].Data, []byte("SASS:PTX")) {
		t.Fatalf("restart: %d finishes, binary %q; want the journal's", gpu.calls, got.Binaries[1].Data)
	}
	gpu, _ = start("driver 13010")
	if gpu.calls != 1 {
		t.Fatalf("another driver: %d finishes, want 1", gpu.calls)
	}
}
