package compilecache

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Do returns m's content from the journal or builds it: once per key in this process
// (concurrent callers share the build) and, through the build lock, once per key among
// the processes sharing the directory (waiters poll for the published entry and build
// themselves if the owner gives up).
func (j *Journal) Do(ctx context.Context, m Material, label string, build func(context.Context) ([]byte, int, error)) (Result, error) {
	k := m.Key()
	res := Result{Key: k}
	if j.jf == nil {
		content, _, err := build(ctx)
		res.Blob, res.Outcome, res.Miss = &Blob{head: content}, Uncached, MissCause{Kind: MissOff}
		return res, err
	}
	if j.opts.Policy != PolicyRedo {
		b, err := j.Get(m)
		if err == nil {
			j.stats.hits.Add(1)
			res.Blob, res.Outcome = b, Hit
			return res, nil
		}
		var miss *MissError
		if !errors.As(err, &miss) {
			return res, err
		}
		res.Miss = miss.Cause
	} else {
		res.Miss = MissCause{Kind: MissRedo}
	}
	j.stats.misses.Add(1)
	logMiss := j.log.Info
	if m.Kind == KindKernel { // one line per kernel would drown the executable's
		logMiss = j.log.Debug
	}
	logMiss("cache miss", zap.String("key", k.Short()), zap.String("label", label), zap.String("kind", string(m.Kind)), zap.String("miss", res.Miss.Kind.String()), zap.String("cause", res.Miss.String()))
	if j.opts.Policy == PolicyReadOnly {
		content, _, err := build(ctx)
		j.stats.builds.Add(1)
		res.Blob, res.Outcome = &Blob{head: content}, Uncached
		return res, err
	}
	v, err, shared := j.sf.Do(k.String(), func() (any, error) { return j.buildLocked(ctx, m, label, build) })
	if err != nil {
		return res, err
	}
	r := v.(Result)
	res.Blob, res.Outcome = r.Blob, r.Outcome
	if shared && r.Outcome == Built {
		res.Outcome = Shared
	}
	return res, nil
}

// buildLocked builds under the cross-process lock, or waits for its holder.
func (j *Journal) buildLocked(ctx context.Context, m Material, label string, build func(context.Context) ([]byte, int, error)) (Result, error) {
	k := m.Key()
	waited := false
	for {
		l, holder, err := j.tryLock(k)
		if err != nil {
			// no lock directory (read-only volume) or another I/O failure: build anyway
			j.log.Warn("build lock unavailable; building without it", zap.String("key", k.Short()), zap.Error(err))
		}
		if l != nil || err != nil {
			if l != nil {
				defer l.release()
			}
			if waited || j.opts.Policy != PolicyRedo {
				if b, err := j.Get(m); err == nil { // published between our miss and the lock
					j.stats.waits.Add(1)
					return Result{Blob: b, Outcome: Waited}, nil
				}
			}
			content, rawFrom, err := build(ctx)
			if err != nil {
				return Result{}, err
			}
			j.stats.builds.Add(1)
			if err := j.Put(m, label, content, rawFrom); err != nil {
				j.log.Warn("publishing to the journal failed; serving the build", zap.String("key", k.Short()), zap.Error(err))
				return Result{Blob: &Blob{head: content}, Outcome: Uncached}, nil
			}
			return Result{Blob: &Blob{head: content}, Outcome: Built}, nil
		}
		if !waited {
			j.log.Info("waiting for another process's build", zap.String("key", k.Short()), zap.String("label", label), zap.String("owner", holder.Owner))
			waited = true
		}
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(j.opts.Poll):
		}
		if e, ok := j.entryNow(k); ok {
			if b, err := j.Get(m); err == nil {
				j.stats.waits.Add(1)
				return Result{Blob: b, Outcome: Waited}, nil
			}
			_ = e
		}
	}
}

func (j *Journal) entryNow(k Key) (Entry, bool) {
	if err := j.jf.refresh(); err != nil {
		return Entry{}, false
	}
	return j.jf.lookup(k)
}

// Invalidate quarantines m's entry (the caller found its content unusable, e.g. an
// executable that does not decode); the next lookup misses.
func (j *Journal) Invalidate(m Material, cause string) {
	if j.jf == nil {
		return
	}
	if e, ok := j.jf.lookup(m.Key()); ok {
		j.quarantine(e, cause)
	}
}
