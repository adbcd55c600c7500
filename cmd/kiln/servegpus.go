package main

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/compilecache"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/devices/cuda"
	"github.com/kilnrt/kiln/devices/opencl"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/serve"
)

// serveGPUs are the GPUs kiln serve offers its models' KIND_GPU instance groups: with
// gpus: auto the CUDA GPUs when the NVIDIA driver reports any (GPU ordinal N is cuda:N,
// as in Triton), else every OpenCL device in kiln's numbering (openCLDevices; ordinal N
// is opencl:N), each opened on the first load a model asks of it, so a server whose
// models want no GPU opens none; with gpus: none, or neither driver, none (KIND_GPU
// groups then run on the CPU, with a warning from serve). cfg is the CPU engine's
// configuration: each GPU's engine shares its journal, compiler, limits and timeout,
// with the CPU as host. close closes the devices opened.
func serveGPUs(mode string, cfg engine.Config, cpu *devcpu.Device, log *zap.Logger) (gpus []serve.GPU, close func()) {
	if mode == "none" {
		log.Info("gpus: none: every model instance runs on the CPU")
		return nil, func() {}
	}
	var engines []*gpuEngine
	add := func(name string, open func() (gpuDevice, error), fields ...zap.Field) {
		g := &gpuEngine{name: name, openDevice: open, cfg: cfg, cpu: cpu}
		engines = append(engines, g)
		gpus = append(gpus, serve.GPU{Name: g.name, Engine: g})
		log.Info("GPU for KIND_GPU instance groups (opened when first needed)", append([]zap.Field{zap.String("gpu", g.name)}, fields...)...)
	}
	closeAll := func() {
		for _, g := range engines {
			g.close()
		}
	}
	if n, err := cuda.Count(); err == nil && n > 0 {
		for i := 0; i < n; i++ {
			add(fmt.Sprintf("cuda:%d", i), func() (gpuDevice, error) { return cuda.Open(cuda.Options{Ordinal: i}) })
		}
		return gpus, closeAll
	}
	all, err := openCLDevices()
	if err != nil {
		log.Info("no CUDA GPU or OpenCL device: KIND_GPU instance groups run on the CPU (install the NVIDIA driver, or an OpenCL driver, e.g. Debian's pocl-opencl-icd, and the ICD loader ocl-icd-libopencl1)",
			zap.Error(err))
		return nil, func() {}
	}
	for i, d := range all {
		opts := opencl.Options{Platform: d.platform.Index, Device: d.device.Index}
		add(fmt.Sprintf("opencl:%d", i), func() (gpuDevice, error) { return opencl.Open(opts) },
			zap.String("device", d.device.Name), zap.String("type", d.device.Type), zap.String("platform", d.platform.Name))
	}
	return gpus, closeAll
}

// gpuEngine is the serve.Engine of one GPU (CUDA or OpenCL), opened on its first Load;
// a device that does not open fails the loads asked of it (the models placed there),
// never the server.
type gpuEngine struct {
	name       string
	openDevice func() (gpuDevice, error)
	cfg        engine.Config // the CPU engine's: Target, Device and Host are set on open
	cpu        *devcpu.Device

	once sync.Once
	mu   sync.Mutex
	dev  gpuDevice
	eng  *engine.Engine
	err  error
}

// open opens the device and its engine, once.
func (g *gpuEngine) open() (*engine.Engine, error) {
	g.once.Do(func() {
		dev, err := g.openDevice()
		if err != nil {
			g.err = fmt.Errorf("opening %s: %w", g.name, err)
			return
		}
		tg, err := dev.Target()
		if err != nil {
			dev.Close()
			g.err = fmt.Errorf("%s: %w", g.name, err)
			return
		}
		cfg := g.cfg
		cfg.Target, cfg.Device, cfg.Host = tg, dev, g.cpu
		eng, err := engine.New(cfg)
		if err != nil {
			dev.Close()
			g.err = fmt.Errorf("%s: %w", g.name, err)
			return
		}
		g.mu.Lock()
		g.dev, g.eng = dev, eng
		g.mu.Unlock()
	})
	return g.eng, g.err
}

// Open reads a model version's file once (the device is not needed for it).
func (g *gpuEngine) Open(name, path string) (*engine.Model, error) { return engine.Open(name, path) }

// Load opens the device on first use, then loads the model's executable on it.
func (g *gpuEngine) Load(ctx context.Context, m *engine.Model, shapes map[string][]int64, progress func(engine.Progress)) (*engine.Loaded, error) {
	eng, err := g.open()
	if err != nil {
		return nil, err
	}
	return eng.Load(ctx, m, shapes, progress)
}

// JournalStats are the shared journal's counters.
func (g *gpuEngine) JournalStats() compilecache.Stats {
	if g.cfg.Journal == nil {
		return compilecache.Stats{}
	}
	return g.cfg.Journal.Stats()
}

// close closes the device if it was opened (after the service closed its executables).
func (g *gpuEngine) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dev != nil {
		g.dev.Close()
		g.dev = nil
	}
}
