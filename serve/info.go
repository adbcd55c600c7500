package serve

import "fmt"

// Health, metadata and statistics: what the protocol faces report about the service.

// Live: the process is up and serving its APIs (true while models compile).
func (s *Service) Live() bool { return true }

// ModelReady reports whether a model version can take requests now.
func (s *Service) ModelReady(name, version string) (bool, error) {
	m, err := s.lookup(name, version)
	if err != nil {
		return false, err
	}
	return m.status().State == StateReady, nil
}

// Index lists every model version with its state (the repository index).
func (s *Service) Index() []Status {
	var out []Status
	for _, m := range s.allModels() {
		out = append(out, m.status())
	}
	return out
}

// IOMeta describes an input or output: OIP datatype and shape, -1 for free dims.
type IOMeta struct {
	Name, Datatype string
	Shape          []int64
}

// Metadata is a model's metadata response.
type Metadata struct {
	Name     string
	Versions []string
	Platform string
	Inputs   []IOMeta
	Outputs  []IOMeta
}

// ModelMetadata describes a model version's interface.
func (s *Service) ModelMetadata(name, version string) (*Metadata, error) {
	m, err := s.lookup(name, version)
	if err != nil {
		return nil, err
	}
	if m.iface == nil {
		return nil, fmt.Errorf("%w: model %q: %s", ErrUnavailable, name, m.status().Reason)
	}
	md := &Metadata{Name: m.name, Platform: m.spec.Platform}
	s.mu.RLock()
	for _, v := range s.models[name] {
		md.Versions = append(md.Versions, v.versionString())
	}
	s.mu.RUnlock()
	for _, p := range m.iface.Inputs {
		if m.seq != nil && m.seq.spec.fills[p.Name] { // the server's, as Triton's metadata
			continue
		}
		md.Inputs = append(md.Inputs, IOMeta{p.Name, Datatype(p.Type.DType), m.spec.io.clientShape(p.Name, true, dimsOf(p.Type))})
	}
	for _, p := range m.iface.Outputs {
		if m.seq != nil && m.seq.spec.keeps[p.Name] {
			continue
		}
		io := IOMeta{Name: p.Name, Datatype: Datatype(p.Type.DType)}
		if !p.Type.UnknownRank {
			io.Shape = dimsOf(p.Type)
		}
		io.Shape = m.spec.io.clientShape(p.Name, false, io.Shape)
		md.Outputs = append(md.Outputs, io)
	}
	return md, nil
}

// Stats returns statistics of one model (all versions when version is ""), or of every
// model when name is "".
func (s *Service) Stats(name, version string) ([]ModelStats, error) {
	var ms []*model
	if name == "" { // every loaded version: an unloaded model has none
		for _, m := range s.allModels() {
			if m.version >= 0 {
				ms = append(ms, m)
			}
		}
	} else if version == "" {
		s.mu.RLock()
		ms = append(ms, s.models[name]...)
		s.mu.RUnlock()
		if len(ms) == 0 {
			return nil, unknownModel(name)
		}
	} else {
		m, err := s.lookup(name, version)
		if err != nil {
			return nil, err
		}
		ms = []*model{m}
	}
	var out []ModelStats
	for _, m := range ms {
		st := m.stats.snapshot(m.name, m.versionString())
		if m.batcher != nil {
			st.Pending += int64(m.batcher.queue.size())
		}
		out = append(out, st)
	}
	return out, nil
}

// CompileStats reports compiles and journal loads since start.
func (s *Service) CompileStats() CompileStats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	return s.stats.CompileStats
}
