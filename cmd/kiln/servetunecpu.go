package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kilnrt/kiln/configs"
	"github.com/kilnrt/kiln/serve"
)

// tuneBudgetOf reads the tune keys' budgets (everything but the tuner): tune.cpu is a
// thread count, at most the machine's cores, or a fraction of one core, which is one
// thread measuring at most that fraction of the idle time.
func tuneBudgetOf(c configs.Tune, cores int) (serve.TuneOptions, error) {
	o := serve.TuneOptions{Budget: time.Duration(c.Budget), Trials: c.Trials, IdleAfter: time.Duration(c.IdleAfter), Threads: 1, Duty: 1}
	cpu, err := strconv.ParseFloat(c.CPU, 64)
	switch {
	case err != nil || !(cpu > 0):
		return o, usageError{fmt.Errorf("tune.cpu (--tune-cpu) %q: want a thread count or a fraction of one core", c.CPU)}
	case cpu < 1:
		o.Duty = cpu
	case cpu > float64(cores):
		return o, usageError{fmt.Errorf("tune.cpu (--tune-cpu) %s: the machine has %d cores", c.CPU, cores)}
	default:
		o.Threads = int(cpu)
	}
	return o, nil
}
