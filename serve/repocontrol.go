package serve

import (
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kilnrt/kiln/serve/modelrepo"
	"github.com/kilnrt/kiln/serve/modelrepo/modelpb"
)

// Explicit model control (Triton's model_repository extension): with
// Options.RepositoryControl the repository is scanned at start but only the models in
// Options.Load are loaded; LoadModel (re)reads a model from the repository — new
// versions, a changed config.pbtxt — and UnloadModel retires it. A retired version takes
// no new requests; those in flight finish before its executables are closed.

// admit counts a request in on a model version unless it is retired.
func (m *model) admit() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.retired {
		return false
	}
	m.active++
	return true
}

func (m *model) release() {
	m.mu.Lock()
	m.active--
	idle := m.retired && m.active == 0
	m.mu.Unlock()
	if idle {
		m.closeVariants()
	}
}

// retire refuses new requests and closes the executables once in-flight ones are done.
func (m *model) retire() {
	m.mu.Lock()
	m.retired = true
	idle := m.active == 0
	m.mu.Unlock()
	if idle {
		m.closeVariants()
	}
}

func (m *model) closeVariants() {
	if m.batcher != nil {
		m.batcher.stop()
	}
	if m.seq != nil {
		m.seq.stop()
	}
	m.mu.Lock()
	var vs []*variant
	for _, p := range m.places {
		vs = append(vs, p.take()...)
	}
	m.mu.Unlock()
	for _, v := range vs {
		v.machine.Close()
	}
}

// unloaded is the placeholder listed for a model that is not loaded.
func (s *Service) unloaded(name string) []*model {
	return []*model{{svc: s, name: name, version: -1, stats: &modelStats{}, spec: &Spec{},
		state: StateUnavailable, reason: "unloaded", dormant: true}}
}

// LoadModel loads (or reloads) a model from the repository; the versions it replaces
// are retired. It needs Options.RepositoryControl.
func (s *Service) LoadModel(name string) error { return s.loadModel(name, nil) }

// LoadModelWithConfig is LoadModel with a configuration given in JSON (Triton's load
// parameter "config", modelrepo.ParseModelConfigJSON) used instead of the model's
// config.pbtxt; it is completed, validated and checked against the model as
// config.pbtxt is. A config that does not parse is ErrInvalid naming the problem.
func (s *Service) LoadModelWithConfig(name string, configJSON []byte) error {
	if configJSON == nil {
		configJSON = []byte{}
	}
	return s.loadModel(name, configJSON)
}

// loadModel loads a model with the configuration configJSON, or with its config.pbtxt
// when configJSON is nil.
func (s *Service) loadModel(name string, configJSON []byte) error {
	if !ValidModelName(name) {
		return errBadName
	}
	if !s.opts.RepositoryControl {
		return fmt.Errorf("%w: loading model %q: explicit model control is off (start the server with --model-control-mode explicit)", ErrDisabled, name)
	}
	var override *modelpb.ModelConfig
	if configJSON != nil {
		c, err := modelrepo.ParseModelConfigJSON(configJSON)
		if err != nil {
			return fmt.Errorf("%w: loading model %q: parameter \"config\": %v", ErrInvalid, name, err)
		}
		override = c
	}
	d, err := scanModel(s.repo, name, override.GetDefaultModelFilename())
	if err == errBadName {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: loading model %q: %v", ErrNotFound, name, err)
	}
	d.override = override
	fresh := s.replace(name, s.register(d))
	s.log.Info("model loaded", zap.String("model", name), zap.Int("versions", len(fresh)))
	for _, m := range fresh {
		if m.status().State == StateUnavailable {
			return fmt.Errorf("%w: model %q version %d: %s", ErrUnavailable, name, m.version, m.status().Reason)
		}
	}
	s.startLoads()
	return nil
}

// UnloadModel retires every version of a model; it stays listed as UNAVAILABLE
// ("unloaded").
func (s *Service) UnloadModel(name string) error {
	if !ValidModelName(name) {
		return errBadName
	}
	if !s.opts.RepositoryControl {
		return fmt.Errorf("%w: unloading model %q: explicit model control is off (start the server with --model-control-mode explicit)", ErrDisabled, name)
	}
	s.mu.Lock()
	old, ok := s.models[name]
	if ok {
		s.models[name] = s.unloaded(name)
	}
	s.mu.Unlock()
	if !ok {
		return unknownModel(name)
	}
	s.compileHist.DeletePartialMatch(prometheus.Labels{"model": name}) // its series leave with it
	for _, m := range old {
		m.retire()
	}
	s.log.Info("model unloaded", zap.String("model", name))
	return nil
}

// replace installs a model's new versions and retires the ones they replace.
func (s *Service) replace(name string, fresh []*model) []*model {
	s.mu.Lock()
	old := s.models[name]
	s.models[name] = fresh
	s.mu.Unlock()
	for _, m := range old {
		m.retire()
	}
	return fresh
}

// reloadChanged reads a model again from the repository after a version's files were
// found changed on disk (errChanged), unless another request did already; requests
// then run on the new content, never on the old key with the new files.
func (s *Service) reloadChanged(m *model) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	s.mu.RLock()
	current := s.models[m.name]
	s.mu.RUnlock()
	if !slices.Contains(current, m) {
		return // reloaded already
	}
	var fresh []*model
	if d, err := scanModel(s.repo, m.name, m.given.GetDefaultModelFilename()); err != nil {
		fresh = s.unloaded(m.name)
		fresh[0].reason = fmt.Sprintf("the model's files changed on disk and it cannot be read again: %v", err)
		fresh[0].dormant = false // it should serve: readiness counts it as failed
	} else {
		d.override = m.given
		fresh = s.register(d)
	}
	s.replace(m.name, fresh)
	s.log.Warn("model files changed on disk: reloaded", zap.String("model", m.name), zap.Int64("version", m.version))
	s.startLoads()
}
