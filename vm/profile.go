package vm

import (
	"context"
	"time"

	"github.com/kilnrt/kiln/tensor"
)

// Profile accumulates time per kernel over profiled runs (kiln bench --profile). It is
// not safe for concurrent runs.
type Profile struct {
	Kernels []KernelTime // indexed like Executable.Kernels
	Runs    int
	// Clock, when set, times host kernels instead of the wall clock: a launch adds the
	// difference of its readings around it, taken on the goroutine that runs the VM. A
	// CPU kernel on one thread runs on the caller's thread, so the thread's CPU time
	// (the goroutine locked to its thread) measures it without the time the thread was
	// preempted: the tuner's measuring child and kiln bench --roofline read it.
	Clock func() time.Duration
}

// KernelTime is one kernel's launches and their total time: wall time (or the
// Profile's Clock), or for a GPU kernel on a device that measures (devices.Timer) the
// device's time of its runs.
type KernelTime struct {
	Name     string
	Launches int
	Total    time.Duration
}

// RunProfiled is Run, timing every kernel launch into p.
func (m *VM) RunProfiled(ctx context.Context, inputs []*tensor.Tensor, p *Profile) ([]*tensor.Tensor, error) {
	if len(p.Kernels) != len(m.exe.Kernels) {
		p.Kernels = make([]KernelTime, len(m.exe.Kernels))
		for i, k := range m.exe.Kernels {
			p.Kernels[i].Name = k.Name
		}
	}
	p.Runs++
	return m.run(ctx, inputs, p)
}
