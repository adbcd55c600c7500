package serve

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/loader/onnx/onnxpb"
	"github.com/kilnrt/kiln/serve/servetest"
	"github.com/kilnrt/kiln/tensor"
)

// waitSettled waits until no model version is LOADING (loads at start done or failed).
func waitSettled(t *testing.T, s *Service, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		loading := ""
		for _, st := range s.Index() {
			if st.State == StateLoading {
				loading = st.Name
			}
		}
		if loading == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("model %q still LOADING after %v", loading, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// slowAndFailing is a reference engine on which model "slow" compiles until release is
// closed (started is closed when it begins) and model "fails" fails to compile.
type slowAndFailing struct {
	servetest.Engine
	started, release chan struct{}
}

var errCompile = errors.New("cc: internal compiler error")

func newSlowAndFailing() *slowAndFailing {
	e := &slowAndFailing{started: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	e.Hook = func(ctx context.Context, m *engine.Model) error {
		switch {
		case strings.HasPrefix(m.Name, "fails/"):
			return errCompile
		case strings.HasPrefix(m.Name, "slow/"):
			once.Do(func() { close(e.started) })
			select {
			case <-e.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	return e
}

// threeModels lays out a model with a static input, y = Relu(x) of x 3×8, as "fast",
// "slow" and (with fails) "fails".
func threeModels(t *testing.T, fails bool) string {
	t.Helper()
	name, op := "relu", "Relu"
	src := onnxModel(t, []*onnxpb.NodeProto{{Name: &name, OpType: &op, Input: []string{"x"}, Output: []string{"y"}}}, nil,
		map[string][]int64{"x": {3, 8}}, "y")
	repo := t.TempDir()
	names := []string{"fast", "slow"}
	if fails {
		names = append(names, "fails")
	}
	for _, n := range names {
		os.MkdirAll(filepath.Join(repo, n, "1"), 0o755)
		if err := os.WriteFile(filepath.Join(repo, n, "1", "model.onnx"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repo
}

func mlpRequest(model string) *InferRequest {
	x := tensor.New(tensor.Float32, tensor.Shape{3, 8})
	return &InferRequest{Model: model, Inputs: []Tensor{{Name: "x", Datatype: "FP32", Shape: []int64{3, 8}, Data: x}}}
}

func stateOf(t *testing.T, s *Service, name string) Status {
	t.Helper()
	m, err := s.lookup(name, "")
	if err != nil {
		t.Fatal(err)
	}
	return m.status()
}

// TestLazyCompileKeepsTheServerReadyAndAFailedModelDoesNot: in lazy mode a model's
// first compile, however long, leaves the server ready (the model alone is LOADING),
// the request that waited for it learns how long, and a model whose compile failed
// makes the server unready until it is unloaded.
func TestLazyCompileKeepsTheServerReadyAndAFailedModelDoesNot(t *testing.T) {
	e := newSlowAndFailing()
	s, err := New(Options{Repository: threeModels(t, true), Engine: e, LoadMode: LoadLazy, RepositoryControl: true, Load: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(e.release); s.Close() })
	if !s.Ready() {
		t.Fatal("not ready before any compile")
	}
	answered := make(chan *InferResponse, 1)
	go func() {
		resp, err := s.Infer(context.Background(), mlpRequest("slow"))
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	<-e.started
	if st := stateOf(t, s, "slow"); st.State != StateLoading {
		t.Fatalf("slow while compiling: %+v", st)
	}
	if !s.Ready() {
		t.Fatal("a lazy compile in progress made the server unready")
	}
	if _, err := s.Infer(context.Background(), mlpRequest("fails")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fails: %v", err)
	}
	if s.Ready() {
		t.Fatal("ready while a model that should serve has failed to load")
	}
	if err := s.UnloadModel("fails"); err != nil {
		t.Fatal(err)
	}
	if !s.Ready() {
		t.Fatal("not ready once the failed model is unloaded")
	}
	wait := 30 * time.Millisecond
	time.Sleep(wait)
	e.release <- struct{}{} // one compile's worth; Cleanup closes it
	resp := <-answered
	if resp == nil {
		t.FailNow()
	}
	if resp.CompileWait < wait {
		t.Fatalf("the request that waited for the compile reports a wait of %v, want at least %v", resp.CompileWait, wait)
	}
	again, err := s.Infer(context.Background(), mlpRequest("slow"))
	if err != nil || again.CompileWait != 0 {
		t.Fatalf("second request: wait %v, %v; want no wait", again.CompileWait, err)
	}
}

// TestLenientReadinessIgnoresFailedModels: with LenientReadiness a model that failed
// to load does not make the server unready.
func TestLenientReadinessIgnoresFailedModels(t *testing.T) {
	e := newSlowAndFailing()
	close(e.release)
	s, err := New(Options{Repository: threeModels(t, true), Engine: e, LoadMode: LoadBackground, LenientReadiness: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitSettled(t, s, time.Minute)
	if st := stateOf(t, s, "fails"); st.State != StateUnavailable || !strings.Contains(st.Reason, errCompile.Error()) {
		t.Fatalf("fails: %+v", st)
	}
	if !s.Ready() {
		t.Fatal("lenient readiness: not ready with a failed model")
	}
}

// TestBackgroundLoadWarmsEveryModelWithoutARequest: in background mode every model
// compiles at start with no request; the server is ready while the slow one compiles,
// a request that comes meanwhile waits for that same compile (one load, a wait
// reported), and in the end every model is READY and loaded once. A model that failed
// its compile at start makes the server unready.
func TestBackgroundLoadWarmsEveryModelWithoutARequest(t *testing.T) {
	e := newSlowAndFailing()
	s, err := New(Options{Repository: threeModels(t, false), Engine: e, LoadMode: LoadBackground})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	<-e.started
	if !s.Ready() {
		t.Fatal("a compile in the background made the server unready")
	}
	answered := make(chan *InferResponse, 1)
	go func() {
		resp, err := s.Infer(context.Background(), mlpRequest("slow"))
		if err != nil {
			t.Error(err)
		}
		answered <- resp
	}()
	time.Sleep(20 * time.Millisecond) // the request joins the compile in progress
	close(e.release)
	waitSettled(t, s, time.Minute)
	for _, name := range []string{"fast", "slow"} {
		if st := stateOf(t, s, name); st.State != StateReady || st.Compiled != 1 {
			t.Fatalf("%s after the loads at start: %+v", name, st)
		}
		if n := e.LoadsOf(name + "/1"); n != 1 {
			t.Fatalf("%s loaded %d times, want once", name, n)
		}
	}
	if resp := <-answered; resp == nil || resp.CompileWait <= 0 {
		t.Fatalf("the request that came during the compile at start: %+v", resp)
	}
	if !s.Ready() {
		t.Fatal("not ready after the loads at start")
	}
	if stats, _ := s.Stats("fast", ""); stats[0].InferenceCount != 0 {
		t.Fatalf("fast compiled at start through a request: %+v", stats[0])
	}

	e = newSlowAndFailing()
	close(e.release)
	s, err = New(Options{Repository: threeModels(t, true), Engine: e, LoadMode: LoadBackground})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	waitSettled(t, s, time.Minute)
	if st := stateOf(t, s, "fails"); st.State != StateUnavailable {
		t.Fatalf("fails after its compile at start: %+v", st)
	}
	if s.Ready() {
		t.Fatal("ready with a model whose compile at start failed")
	}
}

// TestEagerLoadHoldsReadinessUntilCompiled: in eager mode the server is not ready
// until every model's compile at start is done.
func TestEagerLoadHoldsReadinessUntilCompiled(t *testing.T) {
	e := newSlowAndFailing()
	s, err := New(Options{Repository: threeModels(t, false), Engine: e, LoadMode: LoadEager})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	<-e.started
	if s.Ready() {
		t.Fatal("eager: ready while a model compiles at start")
	}
	close(e.release)
	waitSettled(t, s, time.Minute)
	if !s.Ready() {
		t.Fatalf("eager: not ready after the compiles: %+v", s.Index())
	}
}

// TestUnreadableModelMakesTheServerUnready: a model that cannot be read (listed
// UNAVAILABLE from the start) keeps the server unready; models that explicit control
// did not load do not.
func TestUnreadableModelMakesTheServerUnready(t *testing.T) {
	repo, _, _ := testRepo(t) // mlp and "broken"
	s, err := New(Options{Repository: repo, Engine: &servetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.Ready() {
		t.Fatal("ready with an unreadable model in the repository")
	}
	s2, err := New(Options{Repository: repo, Engine: &servetest.Engine{}, RepositoryControl: true, Load: []string{"mlp"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if !s2.Ready() {
		t.Fatalf("not ready with only the unloaded model broken: %+v", s2.Index())
	}
}

// TestUnknownLoadModeIsRefused: a load mode other than lazy, eager or background is an
// error, not lazy.
func TestUnknownLoadModeIsRefused(t *testing.T) {
	if _, err := New(Options{Repository: t.TempDir(), Engine: &servetest.Engine{}, LoadMode: "later"}); err == nil || !strings.Contains(err.Error(), "later") {
		t.Fatalf("load mode later: %v", err)
	}
}
