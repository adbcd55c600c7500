package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
)

// matmulGroup is the MatMul kernel's group of a compile's statistics.
func matmulGroup(t *testing.T, b *engine.Built) engine.Group {
	t.Helper()
	if b.Stats == nil {
		t.Fatalf("%v: not compiled", b.Outcome)
	}
	for _, g := range b.Stats.Groups {
		if strings.HasPrefix(g.Anchor, "MatMul") {
			return g
		}
	}
	t.Fatalf("no MatMul kernel in %+v", b.Stats.Groups)
	return engine.Group{}
}

func putRecord(t *testing.T, dir string, r compilecache.TuningRecord) {
	t.Helper()
	j, err := compilecache.Open(compilecache.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, err := j.PutTuning(r); err != nil {
		t.Fatal(err)
	}
}

// TestTuningRecordChangesTheKernelAndTheKey: a record for the matmul's workload on this
// target rebuilds the executable (its key's tuning component changes) with the record's
// knobs, a different kernel computing the same result.
func TestTuningRecordChangesTheKernelAndTheKey(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plain, want, _ := journalRun(t, dir, src, cfg, shapes)
	g := matmulGroup(t, plain)
	if g.Workload == "" || g.Tuned != "" {
		t.Fatalf("default compile: workload %q, tuned %q", g.Workload, g.Tuned)
	}
	if got := plain.Material.Parts[5]; got.Name != "tuning" || got.Value != "none" {
		t.Fatalf("default key's tuning component: %+v", got)
	}
	e := newEngine(t, cfg)
	putRecord(t, dir, compilecache.TuningRecord{Workload: g.Workload, Target: e.TargetFingerprint(), Threads: e.Threads(),
		Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"), Knobs: "KC=64,MC=1,parallel=0", Speedup: 1.5, Trials: 3})
	tuned, got, _ := journalRun(t, dir, src, cfg, shapes)
	tg := matmulGroup(t, tuned)
	if tuned.Outcome != compilecache.Built || tuned.Key == plain.Key {
		t.Fatalf("with a record: %v, key %v (default's %v)", tuned.Outcome, tuned.Key, plain.Key)
	}
	if !strings.Contains(tg.Tuned, "KC=64") || tg.Kernel == g.Kernel {
		t.Fatalf("with a record: kernel %s tuned %q, default's kernel %s", tg.Kernel, tg.Tuned, g.Kernel)
	}
	assertClose(t, got.Data.([]float32), want.Data.([]float32))
	again, _, _ := journalRun(t, dir, src, cfg, shapes)
	if again.Outcome != compilecache.Hit || again.Key != tuned.Key {
		t.Fatalf("second load with the same record: %v", again.Outcome)
	}
}

// TestTuningRecordOfAnotherTargetIsIgnored: a record measured on another target or
// device fingerprint is not applied and leaves the key as without records.
func TestTuningRecordOfAnotherTargetIsIgnored(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plain, _, _ := journalRun(t, dir, src, cfg, shapes)
	g := matmulGroup(t, plain)
	e := newEngine(t, cfg)
	putRecord(t, dir, compilecache.TuningRecord{Workload: g.Workload, Target: e.TargetFingerprint() + " (another machine)",
		Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"), Knobs: "KC=64", Speedup: 3})
	again, _, _ := journalRun(t, dir, src, cfg, shapes)
	if again.Outcome != compilecache.Hit || again.Key != plain.Key {
		t.Fatalf("a foreign record changed the executable: %v, key %v (was %v)", again.Outcome, again.Key, plain.Key)
	}
}

func assertClose(t *testing.T, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		d := got[i] - want[i]
		if d < 0 {
			d = -d
		}
		if d > 1e-3*(1+abs32(want[i])) {
			t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// TestCorruptTuningRecordIsSurvivedAndNotApplied: a damaged record file costs the
// record: the compile builds the default kernel under the untuned key.
func TestCorruptTuningRecordIsSurvivedAndNotApplied(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plain, _, _ := journalRun(t, dir, src, cfg, shapes)
	g := matmulGroup(t, plain)
	e := newEngine(t, cfg)
	putRecord(t, dir, compilecache.TuningRecord{Workload: g.Workload, Target: e.TargetFingerprint(), Threads: e.Threads(),
		Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"), Knobs: "KC=64", Speedup: 2})
	files, _ := filepath.Glob(filepath.Join(dir, "tuning", "*.rec"))
	if len(files) != 1 {
		t.Fatalf("record files %v", files)
	}
	data, _ := os.ReadFile(files[0])
	data[len(data)-3] ^= 0x20
	if err := os.WriteFile(files[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	again, _, _ := journalRun(t, dir, src, cfg, shapes)
	if again.Outcome != compilecache.Hit || again.Key != plain.Key {
		t.Fatalf("with a damaged record: %v, key %v (untuned %v)", again.Outcome, again.Key, plain.Key)
	}
	if q, _ := filepath.Glob(filepath.Join(dir, "quarantine", "tuning-*")); len(q) != 1 {
		t.Fatalf("quarantine: %v", q)
	}
}

// TestTuningRecordOfAnotherThreadCountIsNotApplied: a record measured with another
// number of threads than the engine's device runs on is not applied (the key stays the
// untuned one); the same record at the engine's thread count is.
func TestTuningRecordOfAnotherThreadCountIsNotApplied(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := filepath.Join(t.TempDir(), "cache")
	plain, _, _ := journalRun(t, dir, src, cfg, shapes)
	g := matmulGroup(t, plain)
	e := newEngine(t, cfg)
	if e.Threads() != 2 {
		t.Fatalf("engine threads %d, the device was opened with 2", e.Threads())
	}
	rec := compilecache.TuningRecord{Workload: g.Workload, Target: e.TargetFingerprint(), Threads: 1,
		Strategy: strings.TrimSuffix(g.Strategy, "+epilogue"), Knobs: "KC=64,MC=1,parallel=0", Speedup: 2}
	putRecord(t, dir, rec)
	other, _, _ := journalRun(t, dir, src, cfg, shapes)
	if other.Outcome != compilecache.Hit || other.Key != plain.Key {
		t.Fatalf("a record of 1 thread changed the 2-thread executable: %v, key %v (was %v)", other.Outcome, other.Key, plain.Key)
	}
	rec.Threads = 2
	putRecord(t, dir, rec)
	tuned, _, _ := journalRun(t, dir, src, cfg, shapes)
	if tuned.Outcome != compilecache.Built || !strings.Contains(matmulGroup(t, tuned).Tuned, "KC=64") {
		t.Fatalf("the 2-thread record was not applied: %v", tuned.Outcome)
	}
}
