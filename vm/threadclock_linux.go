//go:build linux

package vm

import (
	"time"

	"golang.org/x/sys/unix"
)

// ThreadCPUClock reads the calling OS thread's CPU time (CLOCK_THREAD_CPUTIME_ID): the
// time the thread ran, which other processes on the machine do not add to. It is nil
// where the clock cannot be read. Its readings mean something only while the goroutine
// is locked to its thread; a Profile's Clock may be it (a kernel on one thread runs on
// the caller's thread).
func ThreadCPUClock() func() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return nil
	}
	return readThreadCPU
}

func readThreadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("BUG: the thread CPU clock read once and then failed: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
