package serve

import (
	"errors"
	"sync"

	"go.uber.org/zap"
)

// Loads at start and readiness. Options.LoadMode says when a model version compiles:
//
//   - LoadLazy: on its first request. The model is READY before it; the request that
//     compiles it turns it LOADING (with progress) until the compile ends.
//   - LoadBackground: at start, in the background. The model is LOADING from start
//     until its executables are loaded (a journal hit only loads them); a request that
//     comes meanwhile waits for that same compile (InferResponse.CompileWait says how
//     long), and the server's readiness does not wait for it.
//   - LoadEager: at start, and the server is not ready until it is done.
//
// A model whose configuration asks for it (the parameter compile: "eager", or
// model_warmup samples, which Triton runs before a model is ready) loads at start as
// with LoadEager, whatever the mode. What loads at start: the warm-up samples' shapes;
// else the shapes the interface fixes; else, for a model with free input dims served
// generically (Options.SpecializeAfter > 0), the generic executable; else nothing (it
// compiles on its first request). Each version loads on every device of its instances,
// each model on a goroutine of its own, Options.Compiles compiles at once.
//
// Readiness (Ready, the protocols' server-ready and grpc.health.v1) is strict, as
// Triton's --strict-readiness is by default: the server is ready when it is not
// draining, no load at start that readiness waits for is in progress, and every model
// version that should serve has not failed. A model that failed to load (unreadable, a
// configuration that contradicts it, a failed first compile or warm-up) makes the
// server unready for as long as it is configured, so that a probe takes the replica
// out of rotation; a compile in progress for a request or in the background does not.
// Models that are not meant to serve (explicit model control: not loaded, or unloaded)
// do not count. Options.LenientReadiness ignores failed models.

// LoadMode is when models compile: on their first request, or at start.
type LoadMode string

const (
	LoadLazy       LoadMode = "lazy"       // on the first request (the zero value means it too)
	LoadEager      LoadMode = "eager"      // at start; readiness waits for it
	LoadBackground LoadMode = "background" // at start; readiness does not wait for it
)

// markStartup marks a newly registered, servable model version for its load at start,
// if it has one (before the version is shared: no lock).
func (s *Service) markStartup(m *model) {
	switch {
	case s.opts.LoadMode == LoadEager || m.spec.Eager:
		m.state, m.startup, m.gates = StateLoading, true, true
	case s.opts.LoadMode == LoadBackground:
		m.state, m.startup = StateLoading, true
	}
}

// startLoads starts the loads at start of the model versions marked for one that has
// not begun.
func (s *Service) startLoads() {
	for _, m := range s.allModels() {
		if m.takeStartup() {
			go s.loadAtStart(m)
		}
	}
}

// loadAtStart compiles (or loads from the journal) a model version's executables on
// every device: those of its warm-up samples by running them (warmup.go), else for
// the shapes its interface fixes, else its generic executable.
func (s *Service) loadAtStart(m *model) {
	defer m.endStartup()
	if m.config != nil && len(m.config.ModelWarmup) > 0 {
		if err := s.warmup(m); errors.Is(err, errChanged) {
			s.reloadChanged(m)
		} else if err != nil {
			m.setState(StateUnavailable, "warm-up failed: "+err.Error())
			s.log.Error("model warm-up failed", zap.String("model", m.name), zap.Error(err))
		} else {
			m.setState(StateReady, "")
		}
		return
	}
	shapes, static := staticShapes(m)
	if !static && (s.opts.SpecializeAfter <= 0 || !m.hasSymbolicInputs()) {
		s.log.Info("model has free input dims: it compiles on its first request", zap.String("model", m.name))
		return
	}
	if err := s.compileOnEvery(m, shapes); errors.Is(err, errChanged) {
		s.reloadChanged(m) // the reload loads the new content at start
	}
}

// endStartup ends a model version's load at start: readiness no longer waits for it,
// and a version still LOADING (nothing compiled at start, or no generic executable:
// it compiles per shape) is READY.
func (m *model) endStartup() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gates = false
	if m.state == StateLoading && !m.warming {
		m.state, m.progress = StateReady, ""
	}
}

// compileOnEvery compiles a model version on each of its devices at once, for the
// shapes (nil: its generic executable), and returns errChanged when one of them found
// its files replaced (the other failures are logged, and the first on a device is the
// model's state; a generic executable that cannot be built is recorded and the model
// compiles per shape).
func (s *Service) compileOnEvery(m *model, shapes map[string][]int64) error {
	errs := make([]error, len(m.places))
	var wg sync.WaitGroup
	for i, p := range m.places {
		wg.Go(func() {
			if shapes == nil {
				_, errs[i] = m.genericOn(s.ctx, p)
				return
			}
			if _, errs[i] = m.variantFor(s.ctx, p, shapes); errs[i] != nil && !errors.Is(errs[i], errChanged) {
				s.log.Error("compile at start failed", zap.String("model", m.name), zap.String("device", p.dev.name), zap.Error(errs[i]))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if errors.Is(err, errChanged) {
			return err
		}
	}
	return nil
}

// staticShapes returns the input shapes a model's interface fixes, if it fixes all.
func staticShapes(m *model) (map[string][]int64, bool) {
	out := map[string][]int64{}
	for _, p := range m.iface.Inputs {
		if p.Type.UnknownRank {
			return nil, false
		}
		d := dimsOf(p.Type)
		for _, x := range d {
			if x < 0 {
				return nil, false
			}
		}
		out[p.Name] = d
	}
	return out, true
}

// Ready is the server's readiness (see above): not draining, no load at start that
// readiness waits for in progress, and (strict) no model that should serve failed.
func (s *Service) Ready() bool {
	if s.draining.Load() {
		return false
	}
	strict := !s.opts.LenientReadiness
	for _, m := range s.allModels() {
		if m.holdsReadiness(strict) {
			return false
		}
	}
	return true
}

// holdsReadiness reports whether the model version keeps the server unready: it
// failed and should serve (strict), or readiness waits for its load at start.
func (m *model) holdsReadiness(strict bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.dormant || m.retired:
		return false
	case m.state == StateUnavailable:
		return strict
	case m.state == StateLoading:
		return m.gates
	}
	return false
}
