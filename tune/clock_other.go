//go:build !linux

package tune

import "time"

// threadCPUClock is nil where kiln does not read a thread's CPU time: candidates are
// timed by the wall clock.
func threadCPUClock() func() time.Duration { return nil }
