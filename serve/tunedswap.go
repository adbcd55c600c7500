package serve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/kilnrt/kiln/tensor"
)

// rebuildTuned swaps in a model's executables rebuilt with new tuning records, by the
// mechanism a reload uses (replace): the model is registered again from the
// repository, each new version gets built, before it serves, what the version it
// replaces had loaded (its generic executable, its specialized ones for the shape
// signatures given), the rebuilt executable is measured against the serving one on
// zero inputs of the first signature, and the new versions replace the old ones: new
// requests take the new executables, requests in flight finish on the old ones, which
// close after them. The new versions keep the old ones' statistics. Nothing is swapped
// when the model was reloaded meanwhile or its files or versions changed; ctx ending
// (an inference arrived) before the swap is errPaused and throws the rebuild away.
func (s *Service) rebuildTuned(ctx context.Context, m *model, sigs []map[string][]int64, onSwap func(speedup float64)) error {
	s.mu.RLock()
	olds := slices.Clone(s.models[m.name])
	s.mu.RUnlock()
	if !slices.Contains(olds, m) {
		return fmt.Errorf("model %q version %d is no longer served", m.name, m.version)
	}
	d, err := scanModel(s.repo, m.name, m.given.GetDefaultModelFilename())
	if err != nil {
		return fmt.Errorf("model %q: reading it again: %w", m.name, err)
	}
	d.override = m.given
	fresh := s.register(d)
	swapped := false
	defer func() {
		if !swapped {
			for _, f := range fresh {
				f.retire() // closes what was built
			}
		}
	}()
	if len(fresh) != len(olds) {
		return fmt.Errorf("model %q: its versions changed on disk", m.name)
	}
	var tuned *model
	for i, f := range fresh {
		o := olds[i]
		f.takeStartup() // built here, not by a load at start, which readiness would wait for
		f.endStartup()
		if f.version != o.version || f.src == nil || o.src == nil || f.src.Digest != o.src.Digest || len(f.places) != len(o.places) {
			return fmt.Errorf("model %q version %d: its files or configuration changed on disk", m.name, o.version)
		}
		f.stats = o.stats
		if err := f.prebuildLike(ctx, o, sigs); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %v", errPaused, err)
			}
			return err
		}
		if o == m {
			tuned = f
		}
	}
	speedup, merr := measureSwap(ctx, m, tuned, sigs[0])
	if ctx.Err() != nil {
		return errPaused
	}
	s.reloadMu.Lock()
	s.mu.RLock()
	current := s.models[m.name]
	s.mu.RUnlock()
	if !slices.Equal(current, olds) {
		s.reloadMu.Unlock()
		return fmt.Errorf("model %q was reloaded meanwhile", m.name)
	}
	s.replace(m.name, fresh)
	swapped = true
	s.reloadMu.Unlock()
	log := s.log.With(zap.String("model", m.name), zap.Int64("version", m.version))
	if merr != nil {
		log.Info("tuned executable swapped in (speedup not measured)", zap.Error(merr))
		return nil
	}
	onSwap(speedup)
	log.Info("tuned executable swapped in", zap.Float64("speedup", speedup), zap.Any("shapes", sigs[0]))
	return nil
}

// prebuildLike builds on f's placements what o's had loaded: the generic executable
// and the specialized ones of the signatures given (others compile again when first
// needed); f's shape counts continue o's.
func (f *model) prebuildLike(ctx context.Context, o *model, sigs []map[string][]int64) error {
	for i, p := range f.places {
		op := o.places[i]
		if op.dev.name != p.dev.name {
			return fmt.Errorf("model %q version %d: its instances moved", f.name, f.version)
		}
		o.mu.Lock()
		hadGen, noGen := op.generic != nil, op.noGen
		have := map[string]bool{}
		for k := range op.variants {
			have[k] = true
		}
		seen := map[string]int{}
		for k, n := range op.seen {
			seen[k] = n
		}
		o.mu.Unlock()
		f.mu.Lock()
		p.noGen, p.seen = noGen, seen
		f.mu.Unlock()
		if hadGen {
			if _, err := f.buildGeneric(ctx, p); err != nil {
				return err
			}
		}
		for _, sig := range sigs {
			key := fmt.Sprint(sig)
			if !have[key] {
				continue
			}
			delete(have, key)
			if _, err := f.build(ctx, p, sig, key); err != nil {
				return err
			}
		}
		if len(have) > 0 {
			f.svc.log.Info("tuned version: shapes not seen lately compile again when requested", zap.String("model", f.name),
				zap.Int64("version", f.version), zap.String("device", p.dev.name), zap.Int("executables", len(have)))
		}
	}
	return nil
}

// loadedFor is the executable p runs the shape key on now: its own or the generic one.
func (m *model) loadedFor(p *placement, key string) *variant {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := p.variants[key]; v != nil {
		return v
	}
	return p.generic
}

// measureSwap times the serving and the rebuilt executable of the version on zero
// inputs of the signature, alternately, after a run of each, and returns the ratio of
// the medians (serving over rebuilt). The serving version is held (admit) meanwhile,
// so that it is not closed under the measurement.
func measureSwap(ctx context.Context, old, fresh *model, sig map[string][]int64) (float64, error) {
	if fresh == nil || !old.admit() {
		return 0, errors.New("the version is no longer served")
	}
	defer old.release()
	key := fmt.Sprint(sig)
	var a, b *variant
	for i, p := range old.places {
		if a, b = old.loadedFor(p, key), fresh.loadedFor(fresh.places[i], key); a != nil && b != nil {
			break
		}
	}
	if a == nil || b == nil {
		return 0, errors.New("no executable of the shapes on both sides")
	}
	args := make([]*tensor.Tensor, len(old.iface.Inputs))
	for i, in := range old.iface.Inputs {
		shape, ok := sig[in.Name]
		switch {
		case ok:
			dims := make(tensor.Shape, len(shape))
			for k, d := range shape {
				dims[k] = int(d)
			}
			args[i] = tensor.New(in.Type.DType, dims)
		case in.Default != nil:
			args[i] = in.Default
		default:
			return 0, fmt.Errorf("no shape for input %q", in.Name)
		}
	}
	const rounds = 7
	var ta, tb []time.Duration
	for r := 0; r <= rounds; r++ {
		for _, x := range []struct {
			v *variant
			t *[]time.Duration
		}{{a, &ta}, {b, &tb}} {
			start := time.Now()
			if _, err := x.v.machine.Run(ctx, args); err != nil {
				return 0, err
			}
			if r > 0 { // the first run of each warms it
				*x.t = append(*x.t, time.Since(start))
			}
		}
	}
	med := func(ts []time.Duration) float64 {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		return float64(ts[len(ts)/2])
	}
	return med(ta) / max(med(tb), 1), nil
}
