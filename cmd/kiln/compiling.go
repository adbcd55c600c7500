//go:build !serveonly

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/tensor"
)

// defaultLevel is the graph optimization level when -O is not given.
const defaultLevel = 3

// levelHelp describes -O from the pipelines themselves.
func levelHelp() string {
	names := func(o int) string {
		var s []string
		for _, p := range passes.Level(o) {
			s = append(s, p.Name)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("graph optimization level: 0 (%s), 1 (%s), 2 and 3 (%s)", names(0), names(1), names(3))
}

// checkLevel refuses an -O outside the levels the pipelines define (a usage error).
func checkLevel(level int) error {
	if level < 0 || level > defaultLevel {
		return usageError{fmt.Errorf("-O %d: the optimization level is 0, 1, 2 or 3", level)}
	}
	return nil
}

// boundsCheckHelp describes --bounds-check (compile, run, bench, conformance).
const boundsCheckHelp = "debug build: every kernel checks each buffer access against the buffer's extent; an access outside one fails the inference with an error naming the kernel, node, buffer and offset (a compiler bug). Slower; cached apart from default builds"

// compileOptions are the CLI's compile settings.
type compileOptions struct {
	quiet    bool
	plain    bool // no alter-layout
	noFusion bool // every node its own kernel
	level    int  // graph optimization level (-O); callers without the flag pass defaultLevel
	// boundsCheck builds kernels that check every buffer access (--bounds-check)
	boundsCheck bool
	dumpPass    string
	dump        io.Writer
	// noTuning ignores the journal's tuning records (--no-tuning); records, when not
	// nil, are applied instead of the journal's
	noTuning bool
	records  []compilecache.TuningRecord
}

// recipe is the engine recipe the options describe.
func (co compileOptions) recipe() (engine.Recipe, error) {
	level, err := engine.LevelOf(co.level)
	if err != nil {
		return engine.Recipe{}, usageError{err}
	}
	return engine.Recipe{Level: level, NoFusion: co.noFusion, PlainLayout: co.plain, BoundsCheck: co.boundsCheck}, nil
}

// newEngine is kiln's engine on the devices ds with the journal j (nil: none, every
// executable is compiled) and the recipe of co.
func newEngine(ds *deviceSet, j *compilecache.Journal, co compileOptions) (*engine.Engine, error) {
	r, err := co.recipe()
	if err != nil {
		return nil, err
	}
	jit := compiler.JIT{DumpPass: co.dumpPass}
	if co.dumpPass != "" {
		jit.Dump = func(pass, before, after string) {
			fmt.Fprintf(co.dump, "=== before %s ===\n%s\n=== after %s ===\n%s\n", pass, before, pass, after)
		}
	}
	r.NoTextures, r.TextureLimit, r.Precision = ds.noTextures, ds.textureLimit, ds.precision
	cfg := ds.config()
	cfg.Journal, cfg.Compiler, cfg.Recipe, cfg.NoTuning, cfg.Records = j, jit, r, co.noTuning, co.records
	return engine.New(cfg)
}

// buildWith obtains m's executable for the shapes through e, showing progress on
// stderr unless co.quiet.
func buildWith(e *engine.Engine, m *engine.Model, shapes map[string][]int64, co compileOptions) (*engine.Built, error) {
	var bar *progressBar
	var progress func(engine.Progress)
	if !co.quiet {
		bar = newProgressBar(os.Stderr)
		progress = bar.update
	}
	b, err := e.Executable(context.Background(), m, shapes, progress)
	if bar != nil {
		bar.finish()
	}
	return b, err
}

// compileModel compiles m for the shapes of inputs (keyed by name), showing progress on
// stderr.
func compileModel(m *graph.Module, inputs map[string]*tensor.Tensor, ds *deviceSet, co compileOptions) (*engine.Built, time.Duration, error) {
	if _, err := engine.DimsFromInputs(m, inputs); err != nil {
		return nil, 0, usageError{err}
	}
	e, err := newEngine(ds, nil, co)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	b, err := buildWith(e, engine.InMemory("", m), engine.ShapesOf(inputs), co)
	return b, time.Since(start), err
}

// printStats summarizes a compile.
func printStats(w io.Writer, name string, st *engine.Stats, took time.Duration) {
	fmt.Fprintf(w, "compiled %s in %v: %d graph nodes, %d kernel launches per inference, %d unique kernels\n",
		name, took.Round(time.Millisecond), st.Nodes, st.Launches, st.Kernels)
	fmt.Fprintf(w, "memory: arena %s (the planned tensors without reuse: %s), constants %s\n",
		byteSize(st.ArenaBytes), byteSize(st.UnplannedSum), byteSize(st.ConstantBytes))
	var parts []string
	for _, s := range st.Stages {
		parts = append(parts, fmt.Sprintf("%s %.2fs", s.Stage, s.Seconds))
	}
	fmt.Fprintf(w, "stages: %s\n", strings.Join(parts, ", "))
}

// compileAndRun compiles m for the inputs' shapes and runs it once.
func compileAndRun(m *graph.Module, inputs map[string]ref.Value, tf targetFlags, threads int, co compileOptions) ([]ref.Value, error) {
	ts := map[string]*tensor.Tensor{}
	for k, v := range inputs {
		t, ok := v.(*tensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("input %q is %s; the compiled engine takes tensors", k, ref.Describe(v))
		}
		ts[k] = t
	}
	ds, err := tf.open(threads, true)
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	res, _, err := compileModel(m, ts, ds, co)
	if err != nil {
		return nil, err
	}
	got, err := runExecutable(res.Exe, ds, ts)
	if err != nil {
		return nil, err
	}
	out := make([]ref.Value, len(got))
	for i, t := range got {
		out[i] = t
	}
	return out, nil
}

// compileCached returns the executable of the model at path for the shapes of inputs,
// from the journal or compiled into it, with a line on stderr saying which. The model
// is compiled only from the bytes its digest names (a file replaced in between is an
// error, never compiled under the old file's key).
func compileCached(j *compilecache.Journal, path string, inputs map[string]*tensor.Tensor, ds *deviceSet, co compileOptions) (*engine.Built, error) {
	c, _, err := compileCachedOn(j, path, inputs, ds, co)
	return c, err
}

// compileCachedOn is compileCached that also returns the engine it built with.
func compileCachedOn(j *compilecache.Journal, path string, inputs map[string]*tensor.Tensor, ds *deviceSet, co compileOptions) (*engine.Built, *engine.Engine, error) {
	buildInCache(ds.cpu, j)
	e, err := newEngine(ds, j, co)
	if err != nil {
		return nil, nil, err
	}
	m, err := e.Open(modelName(path), path)
	if err != nil {
		return nil, nil, err
	}
	c, err := buildWith(e, m, engine.ShapesOf(inputs), co)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if !co.quiet {
		miss := ""
		if c.Outcome != compilecache.Hit {
			miss = fmt.Sprintf(" (%s: %s)", c.Miss.Kind, c.Miss)
		}
		fmt.Fprintf(os.Stderr, "journal: %s %s (key %s) in %v%s\n", m.Name, c.Outcome, c.Key.Short(), c.Took.Round(time.Millisecond), miss)
	}
	return c, e, nil
}
