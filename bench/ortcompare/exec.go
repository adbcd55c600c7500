package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// procStats is how one process ran: its wall and CPU time, and the CPU time the rest of
// the machine took meanwhile (other processes, and the hypervisor's steal).
type procStats struct {
	wall   time.Duration
	cpu    float64 // the process's user+system seconds, its waited-for children included
	others float64 // busy CPU seconds of everything else
	steal  float64 // CPU seconds stolen by the hypervisor
	ok     bool    // others and steal are known
}

// execute runs cmd in dir with its own process group, capturing its output. The error
// says how it ended (timeout, exit status) with the last lines of its stderr.
func execute(ctx context.Context, cmd *exec.Cmd, dir string) (stdout, stderr []byte, ps procStats, err error) {
	var out, errb bytes.Buffer
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	ownGroup(cmd)
	busy0, steal0, ok0 := cpuTimes()
	start := time.Now()
	err = cmd.Run()
	ps.wall = time.Since(start)
	busy1, steal1, ok1 := cpuTimes()
	if st := cmd.ProcessState; st != nil {
		ps.cpu = (st.UserTime() + st.SystemTime()).Seconds()
		if ok0 && ok1 {
			ps.ok = true
			ps.steal = max(steal1-steal0, 0)
			ps.others = max(busy1-busy0-ps.steal-ps.cpu, 0)
		}
	}
	if err != nil {
		msg := lastLines(errb.String(), 3)
		if msg == "" {
			msg = lastLines(out.String(), 3)
		}
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("timed out after %s: %s", ps.wall.Round(time.Second), msg)
		case ctx.Err() != nil:
			err = fmt.Errorf("interrupted: %w", ctx.Err())
		default:
			err = fmt.Errorf("%w: %s", err, msg)
		}
	}
	return out.Bytes(), errb.Bytes(), ps, err
}
