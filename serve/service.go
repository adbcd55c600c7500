package serve

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Options configure a Service.
type Options struct {
	Repository string // Triton-style model repository
	// Engine compiles (or takes from the journal) and loads the executables of the
	// CPU's instances (required); it also reads the models (Engine.Open) and reports
	// the journal's counters.
	Engine Engine
	// GPUs are the GPUs instances may run on, by ordinal: a KIND_GPU instance group's
	// gpus: [N] is GPUs[N] (instances.go). Empty: every instance runs on the CPU.
	GPUs []GPU
	Log  *zap.Logger
	// LoadMode is when models compile (startup.go): LoadLazy (the zero value) on their
	// first request, LoadEager at start with readiness waiting for it, LoadBackground
	// at start without holding readiness back.
	LoadMode LoadMode
	// LenientReadiness: the server is ready even while models that should serve failed
	// to load (Triton's --strict-readiness=false). By default it is not.
	LenientReadiness bool
	// RepositoryControl enables loading and unloading models by API (Triton's
	// explicit model control): only the models in Load are loaded at start ("*": every
	// model); without it every model is, and the load/unload API answers ErrDisabled.
	RepositoryControl bool
	Load              []string
	// Instances is how many requests a model version runs at once (0: 1); the rest queue.
	Instances int
	// SpecializeAfter > 0 serves a model with symbolic input dims from one generic
	// executable (every shape, no compile per shape) and, once a shape signature has
	// been requested that many times, builds an executable specialized for it in the
	// background (static shapes, full memory plan), which later requests of that shape
	// use; requests never wait for it. A model the generic path cannot compile yet
	// compiles per shape, as with 0, where every new shape compiles before its first
	// request is answered.
	SpecializeAfter int
	// Compiles is how many models compile at once (0: one per core), so that one slow
	// model does not hold back every other model's first request.
	Compiles int
	// SharedMemoryDir is where the system shared memory extension finds the objects
	// that clients register by key ("": DefaultSharedMemoryDir, /dev/shm).
	SharedMemoryDir string
	// Tune tunes the models that receive traffic while the server is idle and swaps
	// in the executables rebuilt with the records (tunebg.go); off without a Tuner.
	Tune TuneOptions
}

// Spec is what the server does with a model, derived from its configuration.
type Spec struct {
	Platform     string
	MaxBatchSize int
	Instances    int        // requests run at once (the instances of every device)
	Batching     *BatchSpec // nil: no dynamic batching
	Eager        bool       // compile at start (parameter compile: "eager")
	on           []instancesOn
	io           *tensorIO // reshapes and label files (tensorio.go)
	// optional are the inputs config.pbtxt marks optional: a request that omits one
	// runs with the model's default (onnx.NamedType.Default; checkAgainstModel checks
	// that the model has one)
	optional map[string]bool
}

// Service is the protocol-neutral inference service: the repository, the models'
// lifecycle, inference, metadata, statistics and health. Its methods are safe for
// concurrent use.
type Service struct {
	opts        Options
	repo        repoRoot
	log         *zap.Logger
	engine      Engine          // reads models, reports the journal
	cpu         *device         // the CPU's instances (Options.Engine)
	gpus        []*device       // by ordinal (Options.GPUs)
	ctx         context.Context // cancelled by Close: compiles stop
	cancel      context.CancelFunc
	compiles    chan struct{}  // Options.Compiles compiles at a time
	building    sync.WaitGroup // compiles in progress: Close waits for them
	buildMu     sync.Mutex     // orders building.Add against Close's Wait
	closed      bool           // Close has begun: no compile starts
	stats       serviceStats
	compileHist *prometheus.HistogramVec
	draining    atomic.Bool
	flightMu    sync.Mutex
	flight      int           // inferences in progress
	idle        chan struct{} // closed when draining and none is in progress

	reloadMu sync.Mutex // one reload of changed files at a time

	mu     sync.RWMutex
	models map[string][]*model // by name, newest version first

	shm *shmRegistry // system shared memory regions (sharedmem.go)

	tuner *backgroundTuner // nil: no background tuning
}

// New scans the repository and registers every model it finds (a model that cannot be
// read is listed as UNAVAILABLE with the reason, never fatal), and starts the loads at
// start that Options.LoadMode and the models' configurations ask for (startup.go).
func New(opts Options) (*Service, error) {
	if opts.Engine == nil {
		return nil, errors.New("serve: no engine")
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	switch opts.LoadMode {
	case "", LoadLazy, LoadEager, LoadBackground:
	default:
		return nil, fmt.Errorf("serve: load mode %q: want %s, %s or %s", opts.LoadMode, LoadLazy, LoadEager, LoadBackground)
	}
	if opts.Instances <= 0 {
		opts.Instances = 1
	}
	if opts.Compiles <= 0 {
		opts.Compiles = runtime.NumCPU()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	s := &Service{opts: opts, log: opts.Log, engine: opts.Engine, ctx: ctx, cancel: cancel, compiles: make(chan struct{}, opts.Compiles), models: map[string][]*model{}, idle: make(chan struct{}), compileHist: newCompileHistogram(), shm: newShmRegistry(opts.SharedMemoryDir)}
	s.cpu = &device{name: cpuName, engine: opts.Engine}
	for i, g := range opts.GPUs {
		if g.Engine == nil || g.Name == "" {
			cancel()
			return nil, fmt.Errorf("serve: GPU %d has no engine or no name", i)
		}
		s.gpus = append(s.gpus, &device{name: g.Name, engine: g.Engine, on: " on " + g.Name})
	}
	if s.repo, err = openRepo(opts.Repository); err != nil {
		cancel()
		return nil, err
	}
	dirs, warnings, err := scanRepository(s.repo)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, w := range warnings {
		s.log.Warn("model repository", zap.String("problem", w))
	}
	load := map[string]bool{}
	for _, n := range opts.Load {
		load[n] = true
	}
	for _, d := range dirs {
		if opts.RepositoryControl && !load[d.name] && !load["*"] {
			s.models[d.name] = s.unloaded(d.name)
			continue
		}
		s.models[d.name] = s.register(d)
	}
	s.startLoads()
	if opts.Tune.Tuner != nil {
		s.tuner = newBackgroundTuner(s, opts.Tune)
		s.tuner.start()
	}
	return s, nil
}

// register reads the configuration (config.pbtxt completed from the newest version's
// interface) and every served version's interface and digest; a failure makes the
// model's versions UNAVAILABLE with the reason, never the server.
func (s *Service) register(d modelDir) []*model {
	unavailable := func(vs []version, err error) []*model {
		var out []*model
		for _, v := range vs {
			out = append(out, &model{svc: s, name: d.name, version: v.number, path: v.path, stats: &modelStats{},
				spec: &Spec{}, state: StateUnavailable, reason: err.Error()})
		}
		s.log.Error("model unavailable", zap.String("model", d.name), zap.Error(err))
		return out
	}
	label := func(v version) string { return fmt.Sprintf("%s/%d", d.name, v.number) }
	newest, err := s.engine.Open(label(d.versions[0]), d.versions[0].path)
	if err != nil {
		return unavailable(d.versions, err)
	}
	cfg, err := s.loadConfig(d, newest.Interface)
	if err != nil {
		return unavailable(d.versions, err)
	}
	spec := s.specOf(cfg)
	if spec.io, err = tensorIOOf(cfg, d.dir); err != nil {
		return unavailable(d.versions, err)
	}
	var out []*model
	for _, v := range servedVersions(cfg, d.versions) {
		m := &model{svc: s, name: d.name, version: v.number, path: v.path, stats: &modelStats{},
			spec: spec, config: cfg, given: d.override, state: StateReady}
		m.places, m.slots = newPlacements(spec.on)
		sc := newest
		if v.number != d.versions[0].number {
			sc, err = s.engine.Open(label(v), v.path)
		}
		if err == nil {
			m.src, m.iface, m.sig = sc, sc.Interface, sc.Signature
		}
		if err == nil && v.number != d.versions[0].number {
			err = checkAgainstModel(cfg, m.iface)
		}
		if err != nil {
			m.state, m.reason = StateUnavailable, err.Error()
			s.log.Error("model unavailable", zap.String("model", d.name), zap.Int64("version", v.number), zap.Error(err))
		} else {
			s.markStartup(m)
		}
		if spec.Batching != nil && m.state != StateUnavailable {
			m.batcher = newBatcher(m, *spec.Batching)
		}
		if cfg.GetSequenceBatching() != nil && m.state != StateUnavailable {
			if sp, err := seqSpecOf(m, cfg, d.dir); err != nil {
				m.state, m.reason = StateUnavailable, err.Error()
			} else {
				m.seq = newSeqBatcher(m, sp)
			}
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return unavailable(d.versions[:1], fmt.Errorf("the version policy selects none of the versions present"))
	}
	return out
}

// startBuild admits a compile unless the service is closing.
func (s *Service) startBuild() bool {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if s.closed {
		return false
	}
	s.building.Add(1)
	return true
}

func (s *Service) allModels() []*model {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*model
	names := make([]string, 0, len(s.models))
	for n := range s.models {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, s.models[n]...)
	}
	return out
}

// lookup finds a model version ("" or "-1": the newest).
func (s *Service) lookup(name, version string) (*model, error) {
	s.mu.RLock()
	vs := s.models[name]
	s.mu.RUnlock()
	if len(vs) == 0 {
		return nil, unknownModel(name)
	}
	if version == "" || version == "-1" {
		return vs[0], nil
	}
	n, ok := parseVersion(version)
	if !ok {
		return nil, fmt.Errorf("%w: model %q: version %q is not a decimal number (or -1 for the newest)", ErrInvalid, name, version)
	}
	for _, m := range vs {
		if m.version == n {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: model %q has no version %d", ErrNotFound, name, n)
}

// Infer runs one inference. The context carries the request's deadline.
func (s *Service) Infer(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	if !s.enter() {
		return nil, fmt.Errorf("%w: the server is shutting down", ErrUnavailable)
	}
	defer s.leave()
	if usesSharedMemory(req) {
		return s.inferShared(ctx, req)
	}
	return s.inferModel(ctx, req)
}

// inferModel runs a request whose inputs hold their data on the model it names.
func (s *Service) inferModel(ctx context.Context, req *InferRequest) (*InferResponse, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.lookup(req.Model, req.Version)
		if err != nil {
			return nil, err
		}
		resp, err := s.inferOn(ctx, m, req)
		if errors.Is(err, errChanged) && attempt == 0 {
			s.reloadChanged(m) // and run the request on what the files hold now
			continue
		}
		return resp, err
	}
}

func (s *Service) inferOn(ctx context.Context, m *model, req *InferRequest) (*InferResponse, error) {
	if !m.admit() {
		return nil, fmt.Errorf("%w: model %q was unloaded", ErrUnavailable, req.Model)
	}
	defer m.release()
	start := time.Now()
	resp, err := m.inferConfigured(ctx, req)
	if err != nil {
		if !errors.Is(err, errChanged) {
			m.stats.failed(time.Since(start))
		}
		return nil, err
	}
	m.stats.ok(resp.timing, time.Since(start))
	return resp, nil
}

// Drain stops accepting inferences (Ready turns false) and waits for the ones in
// flight, or for ctx.
func (s *Service) Drain(ctx context.Context) error {
	s.flightMu.Lock()
	if !s.draining.Swap(true) && s.flight == 0 {
		close(s.idle)
	}
	s.flightMu.Unlock()
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enter admits an inference unless draining.
func (s *Service) enter() bool {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.flight++
	if s.tuner != nil && s.tuner.gate.arrive() {
		s.log.Info("tuning paused: a request arrived")
	}
	return true
}

func (s *Service) leave() {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	s.flight--
	if s.tuner != nil {
		s.tuner.gate.depart()
	}
	if s.flight == 0 && s.draining.Load() {
		close(s.idle)
	}
}

// Close drains (without waiting for requests), cancels compiles and waits for them to
// return, and unloads every executable; the caller closes the journal and the device
// after it.
func (s *Service) Close() error {
	s.flightMu.Lock()
	if !s.draining.Swap(true) && s.flight == 0 {
		close(s.idle)
	}
	s.flightMu.Unlock()
	s.buildMu.Lock()
	s.closed = true
	s.buildMu.Unlock()
	s.cancel()
	if s.tuner != nil {
		s.tuner.wg.Wait() // a cancelled session returns soon: its measuring child is killed
	}
	s.building.Wait() // a cancelled compile returns soon; the journal and device outlive it
	for _, m := range s.allModels() {
		m.closeVariants()
	}
	s.shm.close()
	return nil
}
