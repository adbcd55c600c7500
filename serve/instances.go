package serve

import (
	"fmt"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// Instances on devices. A model version's instance groups become instances on devices:
// a KIND_CPU (or KIND_MODEL) group's on the CPU engine (Options.Engine), a KIND_GPU
// group's on the GPUs it lists (Options.GPUs by ordinal; no list: every GPU), Count
// instances per device; KIND_AUTO is KIND_GPU when the service has a GPU, else
// KIND_CPU. A group asking for a GPU the service does not have runs on the CPU, with
// a warning naming the model and the ordinal. Each device keeps the version's
// executables loaded from its own engine (a placement): loaded once per version and
// shape, whatever the number of instances on it. Every instance of every device
// waits in one queue of free instances (Model.slots): a request takes the first one
// free and runs on that instance's device.

// GPU is a GPU the service can run instances on; Options.GPUs lists them by ordinal.
type GPU struct {
	// Name names the device in logs and metrics, e.g. "opencl:0".
	Name string
	// Engine compiles (or takes from the journal) and loads executables for this GPU.
	Engine Engine
}

// cpuName names the CPU engine's device in logs and metrics.
const cpuName = "cpu"

// device is an engine that instances run on.
type device struct {
	name   string
	engine Engine
	on     string // where, in messages: " on opencl:0"; empty for the CPU, which goes without saying
}

// instancesOn is a number of instances of a model version on one device.
type instancesOn struct {
	dev   *device
	count int
}

// placement is a model version's instances on one device and the executables that
// device's engine loaded for them (guarded by the model's mu).
type placement struct {
	dev      *device
	count    int
	variants map[string]*variant // by shape signature
	generic  *variant            // one executable for every shape (SpecializeAfter > 0)
	noGen    string              // why the generic executable cannot be built ("": not tried or built)
	seen     map[string]int      // requests per shape signature served by generic
	flights  flights             // builds in progress, one per shape key
	runs     atomic.Int64        // executions on this device (a batch is one)
}

// empty reports whether nothing is loaded on the placement (m.mu held).
func (p *placement) empty() bool { return len(p.variants) == 0 && p.generic == nil }

// take empties the placement and returns the executables it held (m.mu held).
func (p *placement) take() []*variant {
	var out []*variant
	for _, v := range p.variants {
		out = append(out, v)
	}
	if p.generic != nil {
		out = append(out, p.generic)
	}
	p.variants, p.generic = map[string]*variant{}, nil
	return out
}

// newPlacements makes a model version's placements and its queue of free instances,
// one entry per instance.
func newPlacements(on []instancesOn) ([]*placement, chan *placement) {
	total := 0
	var ps []*placement
	for _, o := range on {
		ps = append(ps, &placement{dev: o.dev, count: o.count, variants: map[string]*variant{}})
		total += o.count
	}
	slots := make(chan *placement, total)
	for _, p := range ps {
		for range p.count {
			slots <- p
		}
	}
	return ps, slots
}

// instancesOf resolves a configuration's instance groups to devices, in the order
// the groups name them; a device named twice gets the sum of the counts.
func (s *Service) instancesOf(c *modelpb.ModelConfig) []instancesOn {
	var out []instancesOn
	add := func(d *device, n int) {
		for i := range out {
			if out[i].dev == d {
				out[i].count += n
				return
			}
		}
		out = append(out, instancesOn{dev: d, count: n})
	}
	for i, g := range c.InstanceGroup {
		n := max(int(g.Count), 1)
		kind := g.Kind
		if kind == modelpb.ModelInstanceGroup_KIND_AUTO && (len(s.gpus) > 0 || len(g.Gpus) > 0) {
			kind = modelpb.ModelInstanceGroup_KIND_GPU
		}
		if kind != modelpb.ModelInstanceGroup_KIND_GPU {
			add(s.cpu, n)
			continue
		}
		group := g.Name
		if group == "" {
			group = fmt.Sprintf("instance_group[%d]", i)
		}
		if len(g.Gpus) == 0 {
			if len(s.gpus) == 0 {
				s.log.Warn("instance_group asks for GPUs and kiln has none: its instances run on the CPU",
					zap.String("model", c.Name), zap.String("group", group), zap.String("gpus", s.gpuList()))
				add(s.cpu, n)
			}
			for _, d := range s.gpus {
				add(d, n)
			}
			continue
		}
		for _, id := range g.Gpus {
			if int(id) >= len(s.gpus) {
				s.log.Warn("instance_group asks for a GPU kiln does not have: its instances run on the CPU",
					zap.String("model", c.Name), zap.String("group", group), zap.Int32("gpu", id), zap.String("gpus", s.gpuList()))
				add(s.cpu, n)
				continue
			}
			add(s.gpus[id], n)
		}
	}
	if len(out) == 0 { // validation and auto-complete leave at least one group
		add(s.cpu, 1)
	}
	return out
}

// gpuList names the service's GPUs for messages: "opencl:0, opencl:1" or "none".
func (s *Service) gpuList() string {
	if len(s.gpus) == 0 {
		return "none (no OpenCL device, or the server runs without GPUs)"
	}
	names := make([]string, len(s.gpus))
	for i, d := range s.gpus {
		names[i] = fmt.Sprintf("%d=%s", i, d.name)
	}
	return strings.Join(names, ", ")
}
