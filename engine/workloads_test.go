package engine_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/tensor"
)

// otherModel is cacheModel's matmul with a Sigmoid after it instead of a Relu: another
// fused kernel, so another workload.
func otherModel(t *testing.T) *graph.Module {
	t.Helper()
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("b"), graph.Const(512)))
	w := make([]float32, 512*600)
	for i := range w {
		w[i] = float32(i%13)/13 - 0.5
	}
	y, _ := b.Op1(graph.OpMatMul, nil, x, b.Const("w", tensor.MustFromSlice(tensor.Shape{512, 600}, w)))
	r, err := b.Op1(graph.OpSigmoid, nil, y)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTuningOneModelLeavesAnotherModelsKey: a record for model A's kernel changes A's
// executable key and rebuilds A, while model B, whose kernels it does not name, keeps
// its key and is served from the journal.
func TestTuningOneModelLeavesAnotherModelsKey(t *testing.T) {
	cfg := cpuConfig(t)
	a := engine.InMemory("a", cacheModel(t))
	a.Digest = "sha256:model-a"
	b := engine.InMemory("b", otherModel(t))
	b.Digest = "sha256:model-b"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plainA, _, _ := journalRun(t, dir, a, cfg, shapes)
	plainB, _, _ := journalRun(t, dir, b, cfg, shapes)
	ga, gb := matmulGroup(t, plainA), matmulGroup(t, plainB)
	if ga.Workload == gb.Workload {
		t.Fatalf("the two models' kernels share workload %s", ga.Workload)
	}
	e := newEngine(t, cfg)
	putRecord(t, dir, compilecache.TuningRecord{Workload: ga.Workload, Target: e.TargetFingerprint(), Threads: e.Threads(),
		Strategy: strings.TrimSuffix(ga.Strategy, "+epilogue"), Knobs: "KC=64,MC=1,parallel=0", Speedup: 1.5})
	againB, _, _ := journalRun(t, dir, b, cfg, shapes)
	if againB.Outcome != compilecache.Hit || againB.Key != plainB.Key {
		t.Fatalf("model B after tuning A: %v, key %v (was %v)", againB.Outcome, againB.Key.Short(), plainB.Key.Short())
	}
	tunedA, _, _ := journalRun(t, dir, a, cfg, shapes)
	if tunedA.Outcome != compilecache.Built || tunedA.Key == plainA.Key || !strings.Contains(matmulGroup(t, tunedA).Tuned, "KC=64") {
		t.Fatalf("model A after tuning A: %v, key %v (was %v)", tunedA.Outcome, tunedA.Key.Short(), plainA.Key.Short())
	}
}

// TestModelCompiledFirstWithForeignRecordsGetsItsUntunedKey: with records of other
// models' kernels already in the journal, a model compiled for the first time (no
// workload list yet) is built once and stored under the key it would have without
// records, and served from it afterwards.
func TestModelCompiledFirstWithForeignRecordsGetsItsUntunedKey(t *testing.T) {
	cfg := cpuConfig(t)
	b := engine.InMemory("b", otherModel(t))
	b.Digest = "sha256:model-b"
	shapes := map[string][]int64{"x": {2, 512}}
	e := newEngine(t, cfg)
	dir := filepath.Join(t.TempDir(), "cache")
	putRecord(t, dir, compilecache.TuningRecord{Workload: "matmul-0123456789abcdef0123", Target: e.TargetFingerprint(), Threads: e.Threads(),
		Strategy: "matmul.packed", Knobs: "KC=64", Speedup: 1.5})
	first, _, _ := journalRun(t, dir, b, cfg, shapes)
	if first.Outcome != compilecache.Built || first.Stats == nil {
		t.Fatalf("first compile: %v", first.Outcome)
	}
	untuned := cfg
	untuned.NoTuning = true
	if got := newEngine(t, untuned).Material(b, shapes).Key(); first.Key != got {
		t.Fatalf("key %v, the untuned key %v", first.Key.Short(), got.Short())
	}
	again, _, _ := journalRun(t, dir, b, cfg, shapes)
	if again.Outcome != compilecache.Hit || again.Key != first.Key {
		t.Fatalf("second load: %v, key %v (first %v)", again.Outcome, again.Key.Short(), first.Key.Short())
	}
}

// TestServeOnlyEngineFindsTheExecutableOfItsModelsRecords: a serve-only engine (no
// compiler) computes the key a compiling engine stored a tuned executable under, with
// records of another model's kernels in the journal too.
func TestServeOnlyEngineFindsTheExecutableOfItsModelsRecords(t *testing.T) {
	cfg := cpuConfig(t)
	a := engine.InMemory("a", cacheModel(t))
	a.Digest = "sha256:model-a"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plain, _, _ := journalRun(t, dir, a, cfg, shapes)
	g := matmulGroup(t, plain)
	e := newEngine(t, cfg)
	for _, r := range []compilecache.TuningRecord{
		{Workload: g.Workload, Target: e.TargetFingerprint(), Threads: e.Threads(), Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"), Knobs: "KC=64,MC=1,parallel=0", Speedup: 1.5},
		{Workload: "matmul-0123456789abcdef0123", Target: e.TargetFingerprint(), Threads: e.Threads(), Strategy: "matmul.packed", Knobs: "KC=64", Speedup: 1.5},
	} {
		putRecord(t, dir, r)
	}
	tuned, want, _ := journalRun(t, dir, a, cfg, shapes)
	if tuned.Outcome != compilecache.Built {
		t.Fatalf("tuned compile: %v", tuned.Outcome)
	}
	serve := cfg
	serve.Compiler = nil
	served, got, _ := journalRun(t, dir, a, serve, shapes)
	if served.Outcome != compilecache.Hit || served.Key != tuned.Key {
		t.Fatalf("serve-only: %v, key %v (the compile stored %v)", served.Outcome, served.Key.Short(), tuned.Key.Short())
	}
	assertClose(t, got.Data.([]float32), want.Data.([]float32))
}
