//go:build !linux

package vm

import "time"

// ThreadCPUClock is nil where kiln does not read a thread's CPU time: callers time by
// the wall clock.
func ThreadCPUClock() func() time.Duration { return nil }
