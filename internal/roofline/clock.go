package roofline

import (
	"time"

	"github.com/kilnrt/kiln/vm"
)

// Clock is what a measurement is timed with.
type Clock int

const (
	// Wall is the wall-clock time (monotonic).
	Wall Clock = iota
	// ThreadCPU is the CPU time of the calling OS thread: the caller locks its goroutine
	// to its thread, and the work must run on that thread alone (a kernel on one thread
	// runs on the caller's).
	ThreadCPU
)

// ClockFor is the clock that times work on threads threads: the thread's CPU time on
// one thread where the system has it, else the wall clock.
func ClockFor(threads int) Clock {
	if threads == 1 && threadCPU != nil {
		return ThreadCPU
	}
	return Wall
}

var (
	wallStart = time.Now()
	threadCPU = vm.ThreadCPUClock()
)

// Now reads the clock: a duration from an arbitrary origin, to subtract.
func (c Clock) Now() time.Duration {
	if c == ThreadCPU {
		if threadCPU == nil {
			panic("BUG: the thread CPU clock read where ClockFor does not choose it")
		}
		return threadCPU()
	}
	return time.Since(wallStart)
}

func (c Clock) String() string {
	if c == ThreadCPU {
		return "thread CPU time"
	}
	return "wall time"
}
