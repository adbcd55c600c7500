package main

import (
	"testing"
	"time"

	"github.com/kilnrt/kiln/configs"
)

// TestTuneCPUIsAShareOfTheIdleTime: candidates are measured on the server's threads
// (records apply to executables of the thread count they were measured at), and tune.cpu
// is the share of the idle time spent measuring: 0.25 rests three times a measurement's
// time after it; a share above 1, 0 or a non-number is refused.
func TestTuneCPUIsAShareOfTheIdleTime(t *testing.T) {
	base := configs.Tune{Mode: "background", Budget: configs.Duration(time.Minute), IdleAfter: configs.Duration(time.Second)}
	for _, c := range []struct {
		cpu  string
		duty float64
		bad  bool
	}{{"1", 1, false}, {"0.25", 0.25, false}, {"2", 0, true}, {"0", 0, true}, {"x", 0, true}} {
		tc := base
		tc.CPU = c.cpu
		o, err := tuneBudgetOf(tc, 3)
		if c.bad {
			if err == nil {
				t.Errorf("tune.cpu %s accepted", c.cpu)
			}
			continue
		}
		if err != nil || o.Threads != 3 || o.Duty != c.duty || o.Budget != time.Minute || o.IdleAfter != time.Second {
			t.Errorf("tune.cpu %s: %+v, %v; want the server's 3 threads, duty %v", c.cpu, o, err, c.duty)
		}
	}
}
