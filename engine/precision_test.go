package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
)

// TestPrecisionIsParsedAndFP16IsRefused: "" and fp32 are the exact default, tf32 is
// accepted, fp16 is refused as not built and anything else as unknown (ErrPrecision).
func TestPrecisionIsParsedAndFP16IsRefused(t *testing.T) {
	for in, want := range map[string]engine.Precision{"": engine.PrecisionFP32, "fp32": engine.PrecisionFP32, "tf32": engine.PrecisionTF32} {
		if got, err := engine.ParsePrecision(in); err != nil || got != want {
			t.Errorf("ParsePrecision(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{"fp16": "not built yet", "bf16": "want fp32 or tf32", "TF32": "want fp32 or tf32"} {
		if _, err := engine.ParsePrecision(in); !errors.Is(err, engine.ErrPrecision) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParsePrecision(%q): %v, want ErrPrecision saying %q", in, err, msg)
		}
	}
}

// TestTF32BuildIsAnotherJournalEntry: the recipe's text names tf32 (fp32 prints as the
// default), so a tf32 build never answers a request for the exact build: on the CPU,
// which builds float32 either way, the tf32 build is a miss naming the options.
func TestTF32BuildIsAnotherJournalEntry(t *testing.T) {
	if s := (engine.Recipe{Precision: engine.PrecisionFP32}).String(); s != (engine.Recipe{}).String() {
		t.Errorf("an fp32 recipe prints %q, the default %q", s, engine.Recipe{}.String())
	}
	if s := (engine.Recipe{Precision: engine.PrecisionTF32}).String(); s != "O3 layout=blocked precision=tf32" {
		t.Errorf("a tf32 recipe prints %q", s)
	}
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := t.TempDir()
	exact, want, _ := journalRun(t, dir, src, cfg, shapes)
	cfg.Recipe.Precision = engine.PrecisionTF32
	c, got, _ := journalRun(t, dir, src, cfg, shapes)
	if c.Outcome != compilecache.Built || c.Key == exact.Key || !slices.Contains(c.Miss.Differs, "options") {
		t.Fatalf("tf32 build after the exact one: %v, key %s, miss %s", c.Outcome, c.Key.Short(), c.Miss)
	}
	if got.String() != want.String() {
		t.Error("the CPU's tf32 build differs from its exact build (the CPU has no tensor cores)")
	}
}
