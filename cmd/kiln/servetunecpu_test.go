package main

import (
	"testing"
	"time"

	"github.com/kilnrt/kiln/configs"
)

// TestTuneCPUIsThreadsOrAFractionOfOneCore: tune.cpu 2 is two measuring threads, 0.25
// one thread measuring a quarter of the idle time, more threads than cores is refused.
func TestTuneCPUIsThreadsOrAFractionOfOneCore(t *testing.T) {
	base := configs.Tune{Mode: "background", Budget: configs.Duration(time.Minute), IdleAfter: configs.Duration(time.Second)}
	for _, c := range []struct {
		cpu     string
		threads int
		duty    float64
		bad     bool
	}{{"1", 1, 1, false}, {"2", 2, 1, false}, {"0.25", 1, 0.25, false}, {"5", 0, 0, true}, {"0", 0, 0, true}, {"x", 0, 0, true}} {
		tc := base
		tc.CPU = c.cpu
		o, err := tuneBudgetOf(tc, 4)
		if c.bad {
			if err == nil {
				t.Errorf("tune.cpu %s on 4 cores accepted", c.cpu)
			}
			continue
		}
		if err != nil || o.Threads != c.threads || o.Duty != c.duty || o.Budget != time.Minute || o.IdleAfter != time.Second {
			t.Errorf("tune.cpu %s: %+v, %v; want %d threads, duty %v", c.cpu, o, err, c.threads, c.duty)
		}
	}
}
