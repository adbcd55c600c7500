package serve

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestRepositoryControl(t *testing.T) {
	repo, x, _ := testRepo(t)
	if err := openService(t, repo, t.TempDir()).LoadModel("mlp"); !errors.Is(err, ErrDisabled) {
		t.Fatalf("load without repository control: %v", err)
	}
	s := openServiceWith(t, repo, t.TempDir(), Options{RepositoryControl: true})
	if _, err := s.Infer(context.Background(), request(x)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("before load: %v", err)
	}
	if idx := s.Index(); len(idx) != 2 || idx[1].Reason != "unloaded" || idx[1].Version != "" {
		t.Fatalf("index %+v", idx)
	}
	if err := s.LoadModel("mlp"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Infer(context.Background(), request(x)); err != nil {
		t.Fatalf("after load: %v", err)
	}
	if err := s.LoadModel("broken"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("loading a broken model: %v", err)
	}
	if err := s.LoadModel("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("loading an unknown model: %v", err)
	}
	// unload and reload under load: requests succeed or are refused, nothing breaks
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				if _, err := s.Infer(context.Background(), request(x)); err != nil && !errors.Is(err, ErrUnavailable) {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 3 {
		if err := s.UnloadModel("mlp"); err != nil {
			t.Fatal(err)
		}
		if err := s.LoadModel("mlp"); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := s.UnloadModel("mlp"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Infer(context.Background(), request(x)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("after unload: %v", err)
	}
}

// TestReloadingABatchingModelLeavesNoBatcherRunning: every reload retires the old
// version, and its batcher's loop ends with it.
func TestReloadingABatchingModelLeavesNoBatcherRunning(t *testing.T) {
	repo, _, _ := testRepo(t)
	writeConfig(t, repo, "mlp", `
max_batch_size: 4
dynamic_batching { max_queue_delay_microseconds: 1000 }
`)
	s := openServiceWith(t, repo, t.TempDir(), Options{RepositoryControl: true, Load: []string{"mlp"}})
	if err := s.LoadModel("mlp"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	for range 30 {
		if err := s.LoadModel("mlp"); err != nil {
			t.Fatal(err)
		}
	}
	var after int
	for range 100 { // retired loops end asynchronously
		if after = runtime.NumGoroutine(); after < before+5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after >= before+5 {
		t.Fatalf("%d goroutines before 30 reloads, %d after", before, after)
	}
}
