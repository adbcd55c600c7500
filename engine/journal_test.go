package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/internal/testdata"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
)

// cacheModel is a small model with a constant large enough to be stored as a raw,
// mapped tail (over 1 MiB of incompressible weights).
func cacheModel(t *testing.T) *graph.Module {
	b := graph.NewBuilder("main")
	x := b.Param("x", graph.TensorType(tensor.Float32, graph.Sym("b"), graph.Const(512)))
	w := make([]float32, 512*600)
	seed := uint32(7)
	for i := range w {
		seed = seed*1664525 + 1013904223
		w[i] = float32(seed>>8)/float32(1<<24) - 0.5
	}
	y, _ := b.Op1(graph.OpMatMul, nil, x, b.Const("w", tensor.MustFromSlice(tensor.Shape{512, 600}, w)))
	r, err := b.Op1(graph.OpRelu, nil, y)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Module(r)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// journalRun compiles through a fresh Journal on dir (as a new process would) and runs
// the executable once; it returns the outcome, the output, and the journal's logs.
func journalRun(t *testing.T, dir string, m *engine.Model, cfg engine.Config, shapes map[string][]int64) (*engine.Built, *tensor.Tensor, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	j, err := compilecache.Open(compilecache.Options{Dir: dir, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	cfg.Journal = j
	e := newEngine(t, cfg)
	c, err := e.Load(context.Background(), m, shapes, nil)
	if err != nil {
		t.Fatal(err)
	}
	machine := c.Runner
	defer machine.Close()
	x := tensor.New(tensor.Float32, tensor.Shape{2, 512})
	for i, v := range x.Data.([]float32) {
		_ = v
		x.Data.([]float32)[i] = float32(i%7) - 3
	}
	out, err := machine.Run(context.Background(), []*tensor.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	return c.Built, out[0], logs
}

func loggedCause(logs *observer.ObservedLogs, want string) bool {
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.Key == "cause" && strings.Contains(f.String, want) {
				return true
			}
		}
	}
	return false
}

// TestJournalRecompilesOnDamage: a warm start loads the executable without compiling
// (with its weights mapped in place); a flipped byte in the blob, a truncated journal
// and another compiler identity each lead to a recompile whose log names the cause, and
// the result is always the same.
func TestJournalRecompilesOnDamage(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:test-model"
	shapes := map[string][]int64{"x": {2, 512}}
	loads := 0
	dir := t.TempDir()

	cold, want, _ := journalRun(t, dir, src, cfg, shapes)
	loads += compiled(cold)
	if cold.Outcome != compilecache.Built || loads != 1 {
		t.Fatalf("cold: %v, %d loads", cold.Outcome, loads)
	}
	warm, got, _ := journalRun(t, dir, src, cfg, shapes)
	loads += compiled(warm)
	if warm.Outcome != compilecache.Hit || loads != 1 || !warm.Exe.Mapped() {
		t.Fatalf("warm: %v, %d loads, mapped %v", warm.Outcome, loads, warm.Exe.Mapped())
	}
	same := func(what string, got *tensor.Tensor) {
		t.Helper()
		if got.String() != want.String() {
			t.Fatalf("%s: output differs from the cold compile's", what)
		}
	}
	same("warm", got)

	// 1. one flipped byte in the executable's blob
	es, _ := listEntries(t, dir)
	blob := blobFile(t, dir, es, warm.Key)
	raw, _ := os.ReadFile(blob)
	raw[len(raw)-1000] ^= 0x10
	os.WriteFile(blob, raw, 0o644)
	c, got, logs := journalRun(t, dir, src, cfg, shapes)
	loads += compiled(c)
	if c.Outcome != compilecache.Built || loads != 2 || !loggedCause(logs, "checksum mismatch") {
		t.Fatalf("flipped byte: %v, %d loads, logs %v", c.Outcome, loads, logs.All())
	}
	same("after a flipped byte", got)

	// 2. the journal truncated in the middle of the executable's record (the last one)
	jpath := filepath.Join(dir, "journal")
	st, _ := os.Stat(jpath)
	os.Truncate(jpath, st.Size()-7)
	c, got, logs = journalRun(t, dir, src, cfg, shapes)
	loads += compiled(c)
	if c.Outcome != compilecache.Built || loads != 3 || !loggedCause(logs, "journal-truncated") {
		t.Fatalf("truncated journal: %v, %d loads, logs %v", c.Outcome, loads, logs.All())
	}
	same("after truncation", got)

	// 3. another compiler identity: a miss naming the component, kernels rebuilt too
	c, _, _ = journalRun(t, dir, src, cfg, shapes)
	if c.Outcome != compilecache.Hit {
		t.Fatalf("before the identity change: %v", c.Outcome)
	}
	mat := newEngine(t, cfg).Material(src, shapes)
	other := compilecache.Material{Kind: mat.Kind}
	for _, p := range mat.Parts {
		if p.Name == "compiler" {
			p.Value += " (another build)"
		}
		other.Parts = append(other.Parts, p)
	}
	core, logs := observer.New(zap.InfoLevel)
	j, _ := compilecache.Open(compilecache.Options{Dir: dir, Log: zap.New(core)})
	defer j.Close()
	res, err := j.Do(context.Background(), other, "mlp", func(context.Context) ([]byte, int, error) { return []byte("rebuilt"), 0, nil })
	if err != nil || res.Outcome != compilecache.Built || !loggedCause(logs, "differs in compiler") {
		t.Fatalf("identity change: %v %v, logs %v", res.Outcome, err, logs.All())
	}
}

func listEntries(t *testing.T, dir string) ([]compilecache.Entry, error) {
	j, err := compilecache.Open(compilecache.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	return j.Entries()
}

func blobFile(t *testing.T, dir string, es []compilecache.Entry, k compilecache.Key) string {
	for _, e := range es {
		if e.Key == k {
			s := e.Blob.String()
			return filepath.Join(dir, "blobs", s[:2], s)
		}
	}
	t.Fatalf("no entry %s", k.Short())
	return ""
}

// TestKernelsSharedAcrossModels: a second model with the same layers builds no kernel
// of its own: every object comes from the journal.
func TestKernelsSharedAcrossModels(t *testing.T) {
	cfg := cpuConfig(t)
	m := cacheModel(t)
	dir := t.TempDir()
	shapes := map[string][]int64{"x": {2, 512}}
	a, b := engine.InMemory("a", m), engine.InMemory("b", m)
	a.Digest, b.Digest = "sha256:a", "sha256:b"
	ca, _, _ := journalRun(t, dir, a, cfg, shapes)
	cb, _, _ := journalRun(t, dir, b, cfg, shapes)
	if cb.Outcome != compilecache.Built || ca.Stats.KernelsCached != 0 || cb.Stats.KernelsCached != cb.Stats.Kernels {
		t.Fatalf("model b: %v, kernels cached %d of %d (model a: %d)", cb.Outcome, cb.Stats.KernelsCached, cb.Stats.Kernels, ca.Stats.KernelsCached)
	}
}

// TestJournalEntryThatDoesNotDecode: an entry whose bytes pass the journal's checksums
// but are no executable (written by a buggy or foreign build) is invalidated and rebuilt.
func TestJournalEntryThatDoesNotDecode(t *testing.T) {
	cfg := cpuConfig(t)
	src := engine.InMemory("mlp", cacheModel(t))
	src.Digest = "sha256:garbage-test"
	shapes := map[string][]int64{"x": {2, 512}}
	dir := t.TempDir()
	j, err := compilecache.Open(compilecache.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Put(newEngine(t, cfg).Material(src, shapes), "mlp", []byte("not an executable"), 0); err != nil {
		t.Fatal(err)
	}
	j.Close()
	c, _, _ := journalRun(t, dir, src, cfg, shapes)
	if c.Outcome != compilecache.Built || c.Miss.Kind != compilecache.MissInvalidated || !strings.Contains(c.Miss.String(), "does not decode") {
		t.Fatalf("outcome %v, miss %v: %s", c.Outcome, c.Miss.Kind, c.Miss)
	}
	if c2, _, _ := journalRun(t, dir, src, cfg, shapes); c2.Outcome != compilecache.Hit {
		t.Fatalf("after the rebuild: %v", c2.Outcome)
	}
}

// cpuConfig is an engine configuration for this machine's CPU with the C compiler.
func cpuConfig(t *testing.T) engine.Config {
	t.Helper()
	dev, err := devcpu.Open(devcpu.Options{Threads: 2})
	if errors.Is(err, devices.ErrUnavailable) {
		testdata.NoCompiler(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return engine.Config{Target: target.Host(), Device: dev, Compiler: compiler.JIT{}}
}

func newEngine(t *testing.T, cfg engine.Config) *engine.Engine {
	t.Helper()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// compiled counts a compile (1) or a journal hit (0).
func compiled(b *engine.Built) int {
	if b.Compiled() {
		return 1
	}
	return 0
}
