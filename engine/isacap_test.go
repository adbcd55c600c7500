package engine_test

import (
	"runtime"
	"testing"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/target"
)

// TestExecutableBuiltUnderAnISACapIsNotLoadedUnderALowerOne: an executable compiled
// with the host capped at avx2 is a miss in the same journal with the host capped at
// generic (the target component differs, and no kernel object is reused: the compiler
// flags differ), the generic compile runs, and the avx2 entry is still a hit under its
// own cap afterwards.
func TestExecutableBuiltUnderAnISACapIsNotLoadedUnderALowerOne(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("%s caps x86 hosts; this host is %s", target.ISAEnv, runtime.GOARCH)
	}
	high, low := target.LevelAVX2, target.LevelGeneric
	if target.Host().Capped(high).Fingerprint() == target.Host().Capped(low).Fingerprint() {
		t.Skipf("this CPU has no feature above the %s level: the caps %s and %s are the same target", low, high, low)
	}
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := t.TempDir()
	under := func(l target.Level) engine.Config {
		t.Setenv(target.ISAEnv, string(l))
		return cpuConfig(t)
	}

	cfgHigh := under(high)
	first, _, _ := journalRun(t, dir, src, cfgHigh, shapes)
	if first.Outcome != compilecache.Built {
		t.Fatalf("%s: %v, want a compile", high, first.Outcome)
	}
	cfgLow := under(low)
	lower, _, logs := journalRun(t, dir, src, cfgLow, shapes)
	if lower.Outcome != compilecache.Built || !lower.Compiled() || lower.Key == first.Key {
		t.Fatalf("%s after %s: %v (compiled %v, same key %v), want a compile under a new key", low, high, lower.Outcome, lower.Compiled(), lower.Key == first.Key)
	}
	if !loggedCause(logs, "differs in target") {
		t.Errorf("%s after %s: the miss does not name the target: %v", low, high, logs.All())
	}
	if lower.Stats.KernelsCached != 0 {
		t.Errorf("%s after %s: %d of %d kernel objects reused from the %s build", low, high, lower.Stats.KernelsCached, lower.Stats.Kernels, high)
	}
	again, _, _ := journalRun(t, dir, src, under(high), shapes)
	if again.Outcome != compilecache.Hit || again.Key != first.Key {
		t.Fatalf("%s again: %v, want a hit on its first entry", high, again.Outcome)
	}
}
