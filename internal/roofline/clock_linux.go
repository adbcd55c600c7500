package roofline

import (
	"time"

	"golang.org/x/sys/unix"
)

func threadCPUAvailable() bool {
	var ts unix.Timespec
	return unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) == nil
}

func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("BUG: CLOCK_THREAD_CPUTIME_ID failed after it was found available: " + err.Error())
	}
	return time.Duration(ts.Nano())
}
