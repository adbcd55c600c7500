package vm_test

import (
	"context"
	"testing"
	"time"

	"github.com/kilnrt/kiln/devices"
	"github.com/kilnrt/kiln/vm"
)

// TestProfileClockTimesHostLaunches: with a Profile's Clock, a CPU kernel's launches are
// timed by that clock, read once before and once after each launch, not by the wall
// clock (a clock that advances 5 ms per reading makes each of the loop program's four
// launches take exactly 5 ms).
func TestProfileClockTimesHostLaunches(t *testing.T) {
	dev := openCPU(t)
	bin, kernel := addKernel(t, dev)
	const n = 37
	m, err := vm.Load(loopProgram(dev, bin, kernel, n), []devices.Device{dev}, builtins())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var now time.Duration
	p := vm.Profile{Clock: func() time.Duration { now += 5 * time.Millisecond; return now }}
	in, _ := inputs(n)
	for range 2 {
		if _, err := m.RunProfiled(context.Background(), in, &p); err != nil {
			t.Fatal(err)
		}
	}
	if k := p.Kernels[0]; p.Runs != 2 || k.Launches != 8 || k.Total != 40*time.Millisecond {
		t.Errorf("2 runs of 4 launches: runs %d, kernel %+v; want 8 launches of 5 ms", p.Runs, k)
	}
}
