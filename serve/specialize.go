package serve

import (
	"context"
	"fmt"

	"go.uber.org/zap"
)

// genericKey is the singleflight key of a model's generic executable (shape keys print
// as maps, so they never collide with it).
const genericKey = "generic"

// hasSymbolicInputs reports whether some input has an extent the model leaves free.
func (m *model) hasSymbolicInputs() bool {
	if m.sig == nil {
		return false
	}
	for _, p := range m.sig.Main.Params {
		for _, d := range p.Type.Shape {
			if !d.IsConst() {
				return true
			}
		}
	}
	return false
}

// genericFor returns the generic executable when the service serves shapes from one
// (Options.SpecializeAfter > 0) and the model has one or can build it: building it the
// first time (the caller waits, as for any first compile), and counting the request's
// shape signature, whose specialized executable is built in the background once it has
// been seen SpecializeAfter times. nil and no error: compile per shape.
func (m *model) genericFor(ctx context.Context, shapes map[string][]int64, key string) (*variant, error) {
	after := m.svc.opts.SpecializeAfter
	if after <= 0 || !m.hasSymbolicInputs() {
		return nil, nil
	}
	m.mu.Lock()
	g, no := m.generic, m.noGen
	m.mu.Unlock()
	if no != "" {
		return nil, nil
	}
	if g == nil {
		ch := m.compile.DoChan(genericKey, func() (any, error) { return m.buildGeneric() })
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: waiting for model %q to compile: %v", ErrDeadline, m.name, ctx.Err())
		case r := <-ch:
			if r.Err != nil {
				return nil, nil // recorded in noGen: compile per shape
			}
			g = r.Val.(*variant)
		}
	}
	m.mu.Lock()
	if m.seen == nil {
		m.seen = map[string]int{}
	}
	m.seen[key]++
	start := m.seen[key] == after && m.variants[key] == nil
	m.mu.Unlock()
	if start {
		m.svc.log.Info("shape seen often: specializing in the background", zap.String("model", m.name),
			zap.Int64("version", m.version), zap.Any("shapes", shapes), zap.Int("requests", after))
		m.compile.DoChan(key, func() (any, error) { return m.build(shapes, key) }) // not awaited: requests go on generically
	}
	return g, nil
}

// buildGeneric builds the executable for every shape; a failure is recorded (the model
// then compiles per shape) and logged with the reason, not made the model's state.
func (m *model) buildGeneric() (*variant, error) {
	v, err := m.buildVariant(nil, genericKey)
	if err == nil {
		m.reserveBounds(v)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.noGen = err.Error()
		m.svc.log.Info("no generic executable: compiling per shape", zap.String("model", m.name),
			zap.Int64("version", m.version), zap.Error(err))
		return nil, err
	}
	m.generic = v
	return v, nil
}
