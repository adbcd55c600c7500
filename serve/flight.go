package serve

import (
	"context"
	"errors"
	"sync"
)

// flights runs at most one build per key at a time and shares its result with every
// caller that asks meanwhile. A build runs detached from any one request, under a
// context of its own that is cancelled when every caller waiting for it has given up:
// a client that disconnects stops a compile nobody else needs, never one that others
// (or a background job: eager compile, warm-up, specialization) still wait for. The
// zero value is ready to use.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

// errGaveUp: the caller's context ended before the build did.
var errGaveUp = errors.New("gave up waiting")

type flight struct {
	done      chan struct{}
	val       *variant
	err       error
	waiters   int  // callers still waiting
	pinned    bool // a caller that never gives up (a background job) asked for it
	cancelled bool // every caller gave up: the build is being stopped
	cancel    context.CancelFunc
}

// join returns the flight for key, starting fn under a context derived from parent
// when none is running, or when the one running is being stopped because everyone
// gave up: a caller that comes in that window gets a build of its own, not the stopped
// one's cancellation. pinned callers keep the build alive whatever the others do.
func (fs *flights) join(parent context.Context, key string, pinned bool, fn func(context.Context) (*variant, error)) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f := fs.m[key]
	if f == nil || f.cancelled {
		ctx, cancel := context.WithCancel(parent)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		fs.m[key] = f
		go func() {
			v, err := fn(ctx)
			fs.mu.Lock()
			f.val, f.err = v, err
			if fs.m[key] == f { // a stopped flight may have been replaced
				delete(fs.m, key)
			}
			fs.mu.Unlock()
			cancel()
			close(f.done)
		}()
	}
	f.waiters++
	f.pinned = f.pinned || pinned
	return f
}

// do waits for key's build (starting it if needed) until it is done or ctx ends (then
// it returns errGaveUp); a caller that gives up while others still wait leaves the
// build running.
func (fs *flights) do(ctx, parent context.Context, key string, fn func(context.Context) (*variant, error)) (*variant, error) {
	f := fs.join(parent, key, false, fn)
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		fs.mu.Lock()
		f.waiters--
		if f.waiters == 0 && !f.pinned {
			f.cancelled = true
			f.cancel()
		}
		fs.mu.Unlock()
		return nil, errGaveUp
	}
}

// start runs key's build in the background (pinned: it is never cancelled for lack
// of waiters) without waiting for it.
func (fs *flights) start(parent context.Context, key string, fn func(context.Context) (*variant, error)) {
	fs.join(parent, key, true, fn)
}
