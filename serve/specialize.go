package serve

import (
	"context"
	"errors"
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
		var err error
		g, err = m.flights.do(ctx, m.svc.ctx, genericKey, m.buildGeneric)
		switch {
		case err == errGaveUp:
			return nil, fmt.Errorf("%w: waiting for model %q to compile: %v", ErrDeadline, m.name, ctx.Err())
		case errors.Is(err, errChanged):
			return nil, err
		case err != nil:
			return nil, nil // recorded in noGen, or cancelled: compile per shape
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
		// not awaited: requests go on generically
		m.flights.start(m.svc.ctx, key, func(bctx context.Context) (*variant, error) { return m.build(bctx, shapes, key) })
	}
	return g, nil
}

// buildGeneric builds the executable for every shape; a failure is recorded (the model
// then compiles per shape) and logged with the reason, not made the model's state. A
// cancelled build or changed files record nothing.
func (m *model) buildGeneric(ctx context.Context) (*variant, error) {
	v, err := m.buildVariant(ctx, nil, genericKey)
	if err == nil {
		m.reserveBounds(v)
	}
	if err != nil && (errors.Is(err, errChanged) || ctx.Err() != nil) {
		return nil, err
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
