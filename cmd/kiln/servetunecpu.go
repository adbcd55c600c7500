package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/serve"
)

// tuneBudgetOf reads the tune keys' budgets (everything but the tuner). Candidates are
// measured on the server's own thread count (threads), because a record applies only to
// executables of the thread count it was measured at; tune.cpu is the share of the idle
// time spent measuring (1: all of it; 0.25: after a measurement that took d, rest 3d).
func tuneBudgetOf(c configs.Tune, threads int) (serve.TuneOptions, error) {
	o := serve.TuneOptions{Budget: time.Duration(c.Budget), Trials: c.Trials, IdleAfter: time.Duration(c.IdleAfter), Threads: threads, Duty: 1}
	cpu, err := strconv.ParseFloat(c.CPU, 64)
	if err != nil || !(cpu > 0) || cpu > 1 {
		return o, usageError{fmt.Errorf("tune.cpu (--tune-cpu) %q: want the share of the idle time tuning may measure, 0 < cpu <= 1", c.CPU)}
	}
	o.Duty = cpu
	return o, nil
}
