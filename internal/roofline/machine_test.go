package roofline

import (
	"runtime"
	"testing"

	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/internal/testdata"
)

func meter(t *testing.T) *Meter {
	t.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 1})
	if err != nil {
		testdata.NoCompiler(t, err)
	}
	t.Cleanup(func() { dev.Close() })
	m, err := NewMeter(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestMeasureReportsBothRoofsOnEachThreadCount: the fixtures build with the device's
// compiler and run on one and on two threads; both roofs come out positive and finite,
// one thread is timed by its CPU time (on Linux), several by the wall clock. (Rates are
// not compared with anything: this machine's load decides them.)
func TestMeasureReportsBothRoofsOnEachThreadCount(t *testing.T) {
	m := meter(t)
	for _, threads := range []int{1, 2} {
		mc, err := m.Measure(Options{Threads: threads, Reps: 1, PeakIters: 100_000, ArrayBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if !(mc.PeakFLOPs > 0 && mc.PeakFLOPs < 1e15) || !(mc.Bandwidth > 0 && mc.Bandwidth < 1e14) {
			t.Errorf("%d threads: peak %g FLOP/s, bandwidth %g B/s", threads, mc.PeakFLOPs, mc.Bandwidth)
		}
		want := Wall
		if threads == 1 && runtime.GOOS == "linux" {
			want = ThreadCPU
		}
		if mc.Clock != want || mc.Threads != threads || mc.ArrayBytes != 1<<20 || mc.VectorBits < 128 {
			t.Errorf("%d threads: %+v", threads, mc)
		}
	}
}

// TestMeasureRefusesNoThreadsAndEmptyArrays: a measurement on no threads, or with triad
// arrays smaller than one element per thread, is an error, not a rate from nothing.
func TestMeasureRefusesNoThreadsAndEmptyArrays(t *testing.T) {
	m := meter(t)
	if _, err := m.Measure(Options{Threads: 0}); err == nil {
		t.Error("0 threads measured")
	}
	if _, err := m.Bandwidth(2, 4, 1); err == nil {
		t.Error("a triad of one element on two threads measured")
	}
}
