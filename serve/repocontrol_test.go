package serve

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
)

func TestRepositoryControl(t *testing.T) {
	repo, x, _ := testRepo(t)
	if err := openService(t, repo, t.TempDir()).LoadModel("mlp"); !errors.Is(err, ErrDisabled) {
		t.Fatalf("load without repository control: %v", err)
	}
	dev, _ := devcpu.Open(devcpu.Options{Threads: 2})
	defer dev.Close()
	j, _ := compilecache.Open(compilecache.Options{Dir: t.TempDir()})
	defer j.Close()
	s, err := New(Options{Repository: repo, CPU: dev, Journal: j, RepositoryControl: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
