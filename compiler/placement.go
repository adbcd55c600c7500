package compiler

import (
	"fmt"

	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels"
	"github.com/kilnrt/kiln/loopir"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/vm"
)

// place is one device of the executable: its index (vm.Instr.Device; 0 is the CPU,
// where inputs arrive, host builtins run and constants are bound), the backend that
// builds its kernels, the target they are lowered for and its strategy table.
type place struct {
	dev        int
	be         *Backend
	t          target.Target
	strategies *kernels.Strategies
}

// placeDevices sets the compile's devices. A backend whose kernels run on the CPU has
// one. A GPU backend (one that Launches) has two:
// the CPU (device 0, the host backend, lowering for target.Host()) and the GPU
// (device 1); a node's kernel is tried on the GPU first and runs on the CPU when no GPU
// strategy builds it (lowerKernelFor), with copies at every boundary (the emitter's
// readOn).
func (c *compile) placeDevices() error {
	primary := &place{be: c.be, t: c.t, strategies: c.be.Strategies(c.registry)}
	if tx := c.textures(); tx != nil && tx.Strategies != nil {
		primary.strategies = primary.strategies.First(tx.Strategies(c.registry)...)
	}
	if c.opts.Recipe.TF32() && c.be.TensorCores != nil {
		primary.strategies = primary.strategies.First(c.be.TensorCores(c.registry)...)
	}
	if !c.be.Launches {
		c.places = []*place{primary}
		c.order = c.places
		return nil
	}
	host, err := c.opts.backendFor(target.CPU)
	if err != nil {
		return fmt.Errorf("the CPU runs what the %s backend does not: %w", c.be.Name, err)
	}
	cpu := &place{dev: 0, be: host, t: target.Host(), strategies: host.Strategies(c.registry)}
	primary.dev = 1
	c.places = []*place{cpu, primary}
	c.order = []*place{primary, cpu}
	return nil
}

// lowerKernelFor lowers n (with its chain of epilogues) on the first device of the
// order whose backend builds it. A device that refuses (no strategy, an element type its
// language lacks, a launch over its limits) passes the node to the next, and the kernel
// records why; the last device's error is the compile's. With a chain, a device that
// builds no fused kernel gives nil and no error (the members are then lowered one by
// one, each placed on its own), unless it cannot run the anchor alone either: then the
// next device's fused kernel is tried, which saves the members a round trip.
func (c *compile) lowerKernelFor(n *graph.Node, chain []*graph.Node) (*kernelUse, error) {
	why := ""
	for i, p := range c.order {
		use, err := c.lowerKernelOn(p, n, chain)
		if err == nil && use == nil && i < len(c.order)-1 {
			if lerr := c.refuses(p, n); lerr != nil {
				why = fmt.Sprintf("not on %s: %v", p.be.Name, lerr)
				continue
			}
		}
		if err == nil {
			if use != nil {
				use.why = why
			}
			return use, nil
		}
		if i == len(c.order)-1 {
			return nil, err
		}
		if cause := c.stopped(); cause != nil {
			return nil, cause
		}
		why = fmt.Sprintf("not on %s: %v", p.be.Name, err)
	}
	panic("BUG: a compile with no device")
}

// refuses reports why p's strategies build no kernel for n alone (nil: they do).
func (c *compile) refuses(p *place, n *graph.Node) error {
	c.vars = map[string]*loopir.Var{}
	in, err := c.inputs(n)
	if err != nil {
		return err
	}
	_, err = p.strategies.Lower(n, in, p.t)
	return err
}

// deviceName names device dev of the executable (its backend's binary device).
func (c *compile) deviceName(dev int) string { return c.places[dev].be.Device }

// aligns is each device's alignment of planned tensors: PlanAlign on the CPU, the
// GPU device's base alignment rounded up to a multiple of it (vm.DeviceAlign).
func (c *compile) aligns() []int64 {
	out := make([]int64, len(c.places))
	for i, p := range c.places {
		out[i] = vm.PlanAlign
		if p.be.Launches && c.opts.GPU != nil {
			out[i] = vm.DeviceAlign(c.opts.GPU)
		}
	}
	return out
}
