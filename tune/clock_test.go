package tune

import (
	"context"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/kilnrt/kiln/compiler"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// TestThreadCPUClockLeavesOutTimeOffTheCPU: a locked thread that sleeps 60 ms (as a
// measuring thread descheduled by other processes would wait) advances its CPU clock by
// a small part of that.
func TestThreadCPUClockLeavesOutTimeOffTheCPU(t *testing.T) {
	clock := vm.ThreadCPUClock()
	if clock == nil {
		t.Skip("no thread CPU clock on this system: candidates are timed by the wall clock")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, w0 := clock(), time.Now()
	time.Sleep(60 * time.Millisecond)
	cpu, wall := clock()-c0, time.Since(w0)
	if wall < 60*time.Millisecond || cpu > 10*time.Millisecond {
		t.Fatalf("a 60 ms sleep: %v of wall time, %v of the thread's CPU time; want at least 60 ms and under 10 ms", wall, cpu)
	}
}

// TestProfileTimesHostKernelsByItsClock: a profile with a clock adds the clock's
// advance over each launch (a fake clock that moves 3 ms a reading: 3 ms a launch),
// not the wall time.
func TestProfileTimesHostKernelsByItsClock(t *testing.T) {
	needCompiler(t)
	mod, err := onnx.Load(reluModel(t), onnx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := target.HostChecked()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := devcpu.Open(devcpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	eng, err := engine.New(engine.Config{Target: tg, Device: dev, NoTuning: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Build(mod, tg, compiler.Options{CPU: dev})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eng.LoadExecutable(res.Exe)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	in, err := randomInputs(res.Exe, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Duration
	p := vm.Profile{Clock: func() time.Duration { now += 3 * time.Millisecond; return now }}
	for range 2 {
		if _, err := m.RunProfiled(context.Background(), in, &p); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.Kernels) == 0 {
		t.Fatal("no kernel profiled")
	}
	for _, k := range p.Kernels {
		if k.Launches == 0 || k.Total != time.Duration(k.Launches)*3*time.Millisecond {
			t.Errorf("kernel %s: %d launches, %v: want 3 ms a launch, the clock's", k.Name, k.Launches, k.Total)
		}
	}
}

// TestMeasuringOnOneThreadReadsTheThreadCPUClock: a request on one thread is timed by
// the thread's CPU time unless it asks for the wall clock; on two threads by the wall
// clock.
func TestMeasuringOnOneThreadReadsTheThreadCPUClock(t *testing.T) {
	needCompiler(t)
	if vm.ThreadCPUClock() == nil {
		t.Skip("no thread CPU clock on this system")
	}
	model := reluModel(t)
	for _, c := range []struct {
		threads int
		clock   string
		want    string
	}{{1, "", ClockThreadCPU}, {1, ClockWall, ClockWall}, {2, "", ClockWall}} {
		resp, err := Measure(context.Background(), Request{Model: model, Threads: c.threads, Clock: c.clock, Reps: 3, Assignments: []Assignment{{}}}, MeasureOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Clock != c.want || len(resp.Results[0].Seconds) == 0 {
			t.Errorf("%d threads, clock %q asked: measured by %q with %d workloads timed, want %q", c.threads, c.clock, resp.Clock, len(resp.Results[0].Seconds), c.want)
		}
	}
}

// TestDefaultTimeIsTheMeanOfItsCopiesOnTheCPUClockAndTheFastestOnTheWall: a workload's
// default is timed by the reference and by an assignment that leaves it alone.
func TestDefaultTimeIsTheMeanOfItsCopiesOnTheCPUClockAndTheFastestOnTheWall(t *testing.T) {
	as := []Assignment{{"b": {Strategy: "x"}}}
	resp := &Response{Results: []Result{{Seconds: map[string]float64{"a": 2, "b": 1}}, {Seconds: map[string]float64{"a": 4, "b": 3}, Applied: []string{"b"}}}}
	for clock, want := range map[string]float64{ClockWall: 2, ClockThreadCPU: 3} {
		resp.Clock = clock
		got := defaults(resp, as)
		if math.Abs(got["a"]-want) > 1e-12 || got["b"] != 1 {
			t.Errorf("clock %s: defaults %v, want a %v and b 1 (the reference's alone)", clock, got, want)
		}
	}
}
