package engine_test

import (
	"slices"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
)

// TestBoundsCheckedBuildIsAnotherJournalEntry: a bounds-checked build of a model never
// shares a journal entry (executable or kernel object) with the default build: it is a
// miss naming the options, builds every kernel anew, gives the same results, and is
// itself found on the next start. The default build's options text is unchanged.
func TestBoundsCheckedBuildIsAnotherJournalEntry(t *testing.T) {
	if s := (engine.Recipe{}).String(); s != "O3 layout=blocked" {
		t.Errorf("default recipe prints %q", s)
	}
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := t.TempDir()
	plain, want, _ := journalRun(t, dir, src, cfg, shapes)
	if plain.Outcome != compilecache.Built {
		t.Fatalf("default build: %v", plain.Outcome)
	}
	cfg.Recipe.BoundsCheck = true
	c, got, _ := journalRun(t, dir, src, cfg, shapes)
	if c.Outcome != compilecache.Built || c.Key == plain.Key || c.Miss.Kind != compilecache.MissAbsent || !slices.Contains(c.Miss.Differs, "options") {
		t.Fatalf("checked build after the default one: %v, key %s, miss %s", c.Outcome, c.Key.Short(), c.Miss)
	}
	if c.Stats.KernelsCached != 0 {
		t.Errorf("the checked build took %d kernel objects of the default build from the journal", c.Stats.KernelsCached)
	}
	if got.String() != want.String() {
		t.Error("the checked build's output differs from the default build's")
	}
	if warm, _, _ := journalRun(t, dir, src, cfg, shapes); warm.Outcome != compilecache.Hit || warm.Key != c.Key {
		t.Errorf("checked build, second start: %v", warm.Outcome)
	}
}
