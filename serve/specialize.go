package serve

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
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

// genericFor returns p's device's generic executable when the service serves shapes
// from one (Options.SpecializeAfter > 0) and the model has one there or can build it:
// building it the first time (the caller waits, as for any first compile), and counting
// the request's shape signature, whose specialized executable is built in the
// background once it has been seen SpecializeAfter times on that device. nil and no
// error: compile per shape. waited: the caller waited for the generic executable's
// compile (its own, or one already running).
func (m *model) genericFor(ctx context.Context, p *placement, shapes map[string][]int64, key string) (g *variant, waited bool, err error) {
	after := m.svc.opts.SpecializeAfter
	if after <= 0 || !m.hasSymbolicInputs() {
		return nil, false, nil
	}
	m.mu.Lock()
	g, no := p.generic, p.noGen
	m.mu.Unlock()
	if no != "" {
		return nil, false, nil
	}
	if g == nil {
		waited = true
		g, err = m.genericOn(ctx, p)
		switch {
		case err == errGaveUp:
			return nil, true, fmt.Errorf("%w: waiting for model %q to compile: %v", ErrDeadline, m.name, ctx.Err())
		case errors.Is(err, errChanged):
			return nil, true, err
		case err != nil:
			return nil, true, nil // recorded in noGen, or cancelled: compile per shape
		}
	}
	m.mu.Lock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[key]++
	start := p.seen[key] == after && p.variants[key] == nil
	m.mu.Unlock()
	if start {
		m.svc.log.Info("shape seen often: specializing in the background", zap.String("model", m.name),
			zap.Int64("version", m.version), zap.String("device", p.dev.name), zap.Any("shapes", shapes), zap.Int("requests", after))
		// not awaited: requests go on generically
		p.flights.start(m.svc.ctx, key, func(bctx context.Context) (*variant, error) { return m.build(bctx, p, shapes, key) })
	}
	return g, waited, nil
}

// genericOn waits for p's device's generic executable, building it (or joining the
// build in progress) under the service's context.
func (m *model) genericOn(ctx context.Context, p *placement) (*variant, error) {
	return p.flights.do(ctx, m.svc.ctx, genericKey, func(bctx context.Context) (*variant, error) { return m.buildGeneric(bctx, p) })
}

// buildGeneric builds the executable for every shape on p's device; a failure is
// recorded (the model then compiles per shape there) and logged with the reason, not
// made the model's state. A cancelled build or changed files record nothing.
func (m *model) buildGeneric(ctx context.Context, p *placement) (*variant, error) {
	v, err := m.buildVariant(ctx, p, nil, genericKey)
	if err == nil {
		m.reserveBounds(v)
	}
	if err != nil && (errors.Is(err, errChanged) || ctx.Err() != nil) {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		p.noGen = err.Error()
		m.svc.log.Info("no generic executable: compiling per shape", zap.String("model", m.name),
			zap.Int64("version", m.version), zap.String("device", p.dev.name), zap.Error(err))
		return nil, err
	}
	p.generic = v
	return v, nil
}

// classified reports an error that already says how the request failed (a compile's
// outcome in runVariant): it reaches the client as it is.
func classified(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDeadline)
}

// runVariant runs v on args. When v is p's generic executable and refuses the shapes
// (vm.ErrGenericShape: free dims that meet in a broadcast and differ, one of them 1
// say, which the model may well broadcast), it compiles the executable for these
// shapes, as a new shape compiles with SpecializeAfter 0, and runs that instead: the
// request waits for the compile (wait) and gets the model's answer. The variant that
// answered is returned, for its outputs' order.
func (m *model) runVariant(ctx context.Context, p *placement, v *variant, shapes map[string][]int64, args []*tensor.Tensor) (outs []*tensor.Tensor, ran *variant, wait time.Duration, err error) {
	outs, err = v.machine.Run(ctx, args)
	if !errors.Is(err, vm.ErrGenericShape) {
		return outs, v, 0, err
	}
	m.mu.Lock()
	generic := v == p.generic
	m.mu.Unlock()
	if !generic {
		return outs, v, 0, err
	}
	start := time.Now()
	key := shapesKey(shapes)
	s, err := p.flights.do(ctx, m.svc.ctx, key, func(bctx context.Context) (*variant, error) { return m.build(bctx, p, shapes, key) })
	wait = time.Since(start)
	if err == errGaveUp {
		return nil, v, wait, fmt.Errorf("%w: waiting for model %q to compile: %v", ErrDeadline, m.name, ctx.Err())
	}
	if err != nil {
		return nil, v, wait, err
	}
	outs, err = s.machine.Run(ctx, args)
	return outs, s, wait, err
}
