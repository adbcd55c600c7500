//go:build !linux

package roofline

import "time"

func threadCPUAvailable() bool { return false }

func threadCPUTime() time.Duration {
	panic("BUG: the thread CPU clock read where ClockFor does not choose it")
}
