package serve

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// blockingBuild is a build that runs until its context is cancelled or release closes,
// counting how many builds started.
func blockingBuild(started *atomic.Int32, release chan struct{}) func(context.Context) (*variant, error) {
	return func(ctx context.Context) (*variant, error) {
		started.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-release:
			return &variant{}, nil
		}
	}
}

func TestCompileNobodyWaitsForIsCancelled(t *testing.T) {
	var fs flights
	var started atomic.Int32
	cancelled := make(chan error, 1)
	build := func(ctx context.Context) (*variant, error) {
		started.Add(1)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := fs.do(ctx, context.Background(), "k", build); err != errGaveUp {
		t.Fatalf("the only waiter gave up: %v", err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("build context: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the build nobody waits for is still running")
	}
}

func TestCompileOthersWaitForKeepsRunning(t *testing.T) {
	var fs flights
	var started atomic.Int32
	release := make(chan struct{})
	build := blockingBuild(&started, release)
	patient := make(chan error, 1)
	go func() { _, err := fs.do(context.Background(), context.Background(), "k", build); patient <- err }()
	for started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := fs.do(ctx, context.Background(), "k", build); err != errGaveUp {
		t.Fatalf("the impatient waiter: %v", err)
	}
	close(release)
	if err := <-patient; err != nil {
		t.Fatalf("the patient waiter's build was cancelled: %v", err)
	}
	if n := started.Load(); n != 1 {
		t.Fatalf("%d builds for one key", n)
	}
}

func TestBackgroundCompileIsNeverCancelledByWaiters(t *testing.T) {
	var fs flights
	result := make(chan error, 1)
	fs.start(context.Background(), "k", func(ctx context.Context) (*variant, error) {
		select {
		case <-ctx.Done():
			result <- ctx.Err()
		case <-time.After(200 * time.Millisecond):
			result <- nil
		}
		return &variant{}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := fs.do(ctx, context.Background(), "k", func(context.Context) (*variant, error) {
		t.Error("a second build started for a key in flight")
		return nil, nil
	}); err != errGaveUp {
		t.Fatalf("waiter: %v", err)
	}
	if err := <-result; err != nil {
		t.Fatalf("the background build was cancelled when a waiter gave up: %v", err)
	}
}

// TestCallerAfterEveryoneGaveUpGetsItsOwnBuild: when the only waiter gives up, its build
// is cancelled, but the build function may take a while to return; a caller that asks
// in that window must not receive the stopped build's cancellation (a request without a
// deadline failed with "compile cancelled" that way) but a build of its own.
func TestCallerAfterEveryoneGaveUpGetsItsOwnBuild(t *testing.T) {
	var fs flights
	var started atomic.Int32
	unwind := make(chan struct{}) // holds the cancelled build before it returns
	build := func(ctx context.Context) (*variant, error) {
		if started.Add(1) == 1 {
			<-ctx.Done()
			<-unwind
			return nil, ctx.Err()
		}
		return &variant{}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := fs.do(ctx, context.Background(), "k", build); err != errGaveUp {
		t.Fatalf("the only waiter gave up: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		v, err := fs.do(context.Background(), context.Background(), "k", build)
		if err == nil && v == nil {
			err = errors.New("no variant")
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a caller after the cancellation: %v, want its own build's result", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller after the cancellation waits for the stopped build")
	}
	close(unwind)
	if n := started.Load(); n != 2 {
		t.Fatalf("%d builds started, want 2", n)
	}
	// the stopped build's return leaves the newer flight's entry alone
	for i := 0; i < 100; i++ {
		fs.mu.Lock()
		n := len(fs.m)
		fs.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a finished flight is still registered")
}
