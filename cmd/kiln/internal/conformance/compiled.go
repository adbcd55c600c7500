package conformance

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// CompiledEngine compiles each model for the shapes of its inputs (once per model and
// shape binding) and runs it on the VM with dev. The executables it keeps are freed by
// the returned close function. level is the graph optimization level (0..3).
func CompiledEngine(dev *devcpu.Device, level int) (Engine, func()) {
	return CompiledEngineWith(dev, CompiledOptions{Level: level})
}

// CompiledOptions configure CompiledEngineWith.
type CompiledOptions struct {
	Level int // the graph optimization level (0..3)
	// BoundsCheck builds bounds-checked kernels (engine.Recipe.BoundsCheck): a kernel
	// that accesses an element outside a buffer fails its case with vm.ErrOutOfBounds.
	BoundsCheck bool
	// GPU, when set, is the device the models compile for (Target, a GPU target), with
	// dev as the host CPU that runs what the GPU does not.
	GPU    devices.Device
	Target target.Target
	// NoTextures and TextureLimit steer a GPU target's textures (engine.Recipe).
	NoTextures   bool
	TextureLimit int64
	// Precision is the recipe's arithmetic for float32 matrix products (engine.Recipe).
	Precision engine.Precision
	// Built, when set, sees every executable compiled for a model (its statistics:
	// the kernels, their devices).
	Built func(m *graph.Module, b *engine.Built)
}

// newEngine is kiln's engine for dev with the options' recipe and no journal: every
// model of a suite is compiled in memory.
func newEngine(dev *devcpu.Device, o CompiledOptions) *engine.Engine {
	level, err := engine.LevelOf(o.Level)
	if err != nil {
		panic("BUG: conformance: " + err.Error())
	}
	cfg := engine.Config{Target: target.Host(), Device: dev, Compiler: compiler.JIT{Jobs: runtime.NumCPU()},
		Recipe: engine.Recipe{Level: level, BoundsCheck: o.BoundsCheck, NoTextures: o.NoTextures, TextureLimit: o.TextureLimit, Precision: o.Precision}}
	if o.GPU != nil {
		cfg.Target, cfg.Device, cfg.Host = o.Target, o.GPU, dev
	}
	e, err := engine.New(cfg)
	if err != nil {
		panic("BUG: conformance: " + err.Error())
	}
	return e
}

// CompiledEngineWith is CompiledEngine with more options.
func CompiledEngineWith(dev *devcpu.Device, o CompiledOptions) (Engine, func()) {
	e := &compiled{engine: newEngine(dev, o), cache: map[compiledKey]engine.Runner{}, built: o.Built}
	return e.run, e.close
}

type compiledKey struct {
	m    *graph.Module
	dims string
}

type compiled struct {
	engine   *engine.Engine
	generic  bool // one executable per model, its symbolic dims left free
	mu       sync.Mutex
	cache    map[compiledKey]engine.Runner
	compiles map[*graph.Module]int
	built    func(*graph.Module, *engine.Built)
}

// GenericEngine compiles each model once with its symbolic dims left free (one
// executable for every shape) and runs every input on it. compiles reports how many
// compiles a model took.
func GenericEngine(dev *devcpu.Device) (run Engine, compiles func(*graph.Module) int, closeAll func()) {
	return GenericEngineWith(dev, CompiledOptions{Level: 3})
}

// GenericEngineWith is GenericEngine with more options.
func GenericEngineWith(dev *devcpu.Device, o CompiledOptions) (run Engine, compiles func(*graph.Module) int, closeAll func()) {
	e := &compiled{engine: newEngine(dev, o), generic: true, cache: map[compiledKey]engine.Runner{}, compiles: map[*graph.Module]int{}, built: o.Built}
	return e.run, func(m *graph.Module) int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.compiles[m]
	}, e.close
}

func (c *compiled) run(ctx context.Context, m *graph.Module, inputs map[string]ref.Value) ([]ref.Value, error) {
	ts := map[string]*tensor.Tensor{}
	for k, v := range inputs {
		if t, ok := v.(*tensor.Tensor); ok {
			ts[k] = t
		}
	}
	machine, err := c.load(ctx, m, ts)
	if err != nil {
		return nil, err
	}
	var args []any
	for _, p := range m.Main.Params {
		v, ok := inputs[p.Name]
		if !ok && p.Const != nil {
			v = p.Const
		}
		if v == nil && p.Type.Kind != graph.KindOptional {
			return nil, fmt.Errorf("missing input %q", p.Name)
		}
		a, err := vmValue(v)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", p.Name, err)
		}
		args = append(args, a)
	}
	vr, ok := machine.(engine.ValueRunner)
	if !ok {
		return nil, fmt.Errorf("%w: its runner %T takes tensors only", ErrCompiledUnsupported, machine)
	}
	got, err := vr.RunValues(ctx, args)
	if err != nil {
		return nil, err
	}
	out := make([]ref.Value, len(got))
	for i, v := range got {
		var t graph.Type
		if i < len(m.Main.Results) {
			t = m.Main.Results[i].Type
		}
		out[i] = refValue(v, t)
	}
	return out, nil
}

func (c *compiled) load(ctx context.Context, m *graph.Module, inputs map[string]*tensor.Tensor) (engine.Runner, error) {
	dims, err := engine.DimsFromInputs(m, inputs)
	if err != nil {
		return nil, err
	}
	shapes := engine.ShapesOf(inputs)
	var keys []string
	for k, v := range dims {
		keys = append(keys, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(keys)
	key := compiledKey{m, strings.Join(keys, ",")}
	if c.generic {
		key, shapes = compiledKey{m: m}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if machine, ok := c.cache[key]; ok {
		return machine, nil
	}
	if c.compiles != nil {
		c.compiles[m]++
	}
	l, err := c.engine.Load(ctx, engine.InMemory("", m), shapes, nil)
	if err != nil {
		return nil, err
	}
	if c.built != nil {
		c.built(m, l.Built)
	}
	machine := l.Runner
	c.cache[key] = machine
	return machine, nil
}

func (c *compiled) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, machine := range c.cache {
		machine.Close()
		delete(c.cache, k)
	}
}
