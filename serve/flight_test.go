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
