package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/kilnrt/kiln/compilecache"
	"github.com/kilnrt/kiln/compiler"
	"github.com/kilnrt/kiln/devices"
	devcpu "github.com/kilnrt/kiln/devices/cpu"
	"github.com/kilnrt/kiln/engine"
	"github.com/kilnrt/kiln/graph"
	"github.com/kilnrt/kiln/graph/passes"
	"github.com/kilnrt/kiln/kernels/ref"
	"github.com/kilnrt/kiln/loader/onnx"
	"github.com/kilnrt/kiln/target"
	"github.com/kilnrt/kiln/tensor"
	"github.com/kilnrt/kiln/vm"
)

// maxKilnBytes bounds a .kiln file read from disk.
const maxKilnBytes = 8 << 30

// openCPU opens the CPU device with threads for parallel loops (0: every core). With
// needCompiler false a missing C compiler is not an error: prebuilt executables run
// without one.
func openCPU(threads int, needCompiler bool) (*devcpu.Device, error) {
	dev, err := devcpu.Open(devcpu.Options{Threads: threads})
	if err == nil || needCompiler || !errors.Is(err, devices.ErrUnavailable) {
		return dev, err
	}
	return devcpu.Open(devcpu.Options{Threads: threads, NoCompiler: true})
}

// isKilnFile reports a compiled executable (by its magic), as opposed to an ONNX model.
func isKilnFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return strings.HasSuffix(path, ".kiln")
	}
	defer f.Close()
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte("KILNEXE"))
}

func readKilnFile(path string) (*vm.Executable, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxKilnBytes {
		return nil, fmt.Errorf("%s: %d bytes is larger than any executable kiln writes", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var exe vm.Executable
	if err := exe.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &exe, nil
}

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
}

// recipe is the engine recipe the options describe.
func (co compileOptions) recipe() (engine.Recipe, error) {
	level, err := engine.LevelOf(co.level)
	if err != nil {
		return engine.Recipe{}, usageError{err}
	}
	return engine.Recipe{Level: level, NoFusion: co.noFusion, PlainLayout: co.plain, BoundsCheck: co.boundsCheck}, nil
}

// newEngine is kiln's engine on the CPU device dev with the journal j (nil: none, every
// executable is compiled) and the recipe of co.
func newEngine(dev *devcpu.Device, j *compilecache.Journal, co compileOptions) (*engine.Engine, error) {
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
	return engine.New(engine.Config{Target: target.Host(), Device: dev, Journal: j, Compiler: jit, Recipe: r})
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
func compileModel(m *graph.Module, inputs map[string]*tensor.Tensor, dev *devcpu.Device, co compileOptions) (*engine.Built, time.Duration, error) {
	if _, err := engine.DimsFromInputs(m, inputs); err != nil {
		return nil, 0, usageError{err}
	}
	e, err := newEngine(dev, nil, co)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	b, err := buildWith(e, engine.InMemory("", m), engine.ShapesOf(inputs), co)
	return b, time.Since(start), err
}

// progressBar shows compile progress: a bar for stages with parts (kernels lowered,
// kernels built), a line for the others; plain lines when stderr is not a terminal.
type progressBar struct {
	w     io.Writer
	tty   bool
	stage string
	bar   *progressbar.ProgressBar
	last  time.Time
}

func newProgressBar(f *os.File) *progressBar {
	return &progressBar{w: f, tty: term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) update(pr engine.Progress) {
	if pr.Stage != p.stage {
		p.finish()
		p.stage = pr.Stage
		if !p.tty {
			fmt.Fprintf(p.w, "compile: %s\n", pr.Stage)
		}
	}
	if pr.Total == 0 || !p.tty {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(pr.Total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(pr.Stage),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(50*time.Millisecond))
	}
	p.bar.ChangeMax(pr.Total)
	p.bar.Describe(fmt.Sprintf("%-6s %s", pr.Stage, shorten(pr.Detail, 32)))
	_ = p.bar.Set(pr.Done)
}

func (p *progressBar) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
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

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// readInputDir reads input_K.pb files of an ONNX test data set, in the order of names.
func readInputDir(dir string, names []string, types []graph.Type) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	for k, name := range names {
		p := filepath.Join(dir, fmt.Sprintf("input_%d.pb", k))
		if _, err := os.Stat(p); err != nil {
			if k == 0 {
				return nil, fmt.Errorf("--input-dir %s: no input_0.pb", dir)
			}
			break
		}
		d, err := onnx.ReadData(p, types[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if d.Tensor == nil {
			return nil, fmt.Errorf("%s: input %q is not a tensor", p, name)
		}
		out[name] = d.Tensor
	}
	return out, nil
}

// exeInputs reads the inputs of a compiled executable from --input / --input-dir, by the
// names in its signature.
func exeInputs(exe *vm.Executable, s shapeFlags) (map[string]*tensor.Tensor, error) {
	out := map[string]*tensor.Tensor{}
	if s.inputDir != "" {
		var names []string
		var types []graph.Type
		for _, in := range exe.Inputs {
			names = append(names, in.Name)
			types = append(types, graph.TensorType(in.DType))
		}
		got, err := readInputDir(s.inputDir, names, types)
		if err != nil {
			return nil, err
		}
		out = got
	}
	for _, spec := range s.inputs {
		name, file, ok := strings.Cut(spec, "=")
		if !ok {
			return nil, usageError{fmt.Errorf("--input %q: want NAME=FILE", spec)}
		}
		t, err := readTensorFile(file)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// orderInputs puts named inputs in the executable's parameter order.
func orderInputs(exe *vm.Executable, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	var args []*tensor.Tensor
	var missing []string
	for _, in := range exe.Inputs {
		t, ok := inputs[in.Name]
		if !ok {
			missing = append(missing, fmt.Sprintf("%s (%s)", in.Name, in.TypeString()))
		}
		args = append(args, t)
	}
	if len(missing) > 0 {
		return nil, usageError{fmt.Errorf("missing inputs: %s", strings.Join(missing, ", "))}
	}
	for name := range inputs {
		found := false
		for _, in := range exe.Inputs {
			found = found || in.Name == name
		}
		if !found {
			return nil, usageError{fmt.Errorf("the executable has no input %q", name)}
		}
	}
	return args, nil
}

// runExecutable loads exe on dev and runs it once.
func runExecutable(exe *vm.Executable, dev *devcpu.Device, inputs map[string]*tensor.Tensor) ([]*tensor.Tensor, error) {
	args, err := orderInputs(exe, inputs)
	if err != nil {
		return nil, err
	}
	machine, err := loadOn(dev, exe)
	if err != nil {
		return nil, err
	}
	defer machine.Close()
	return machine.Run(context.Background(), args)
}

// compileAndRun compiles m for the inputs' shapes and runs it once.
func compileAndRun(m *graph.Module, inputs map[string]ref.Value, threads int, co compileOptions) ([]ref.Value, error) {
	ts := map[string]*tensor.Tensor{}
	for k, v := range inputs {
		t, ok := v.(*tensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("input %q is %s; the compiled engine takes tensors", k, ref.Describe(v))
		}
		ts[k] = t
	}
	dev, err := openCPU(threads, true)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	res, _, err := compileModel(m, ts, dev, co)
	if err != nil {
		return nil, err
	}
	got, err := runExecutable(res.Exe, dev, ts)
	if err != nil {
		return nil, err
	}
	out := make([]ref.Value, len(got))
	for i, t := range got {
		out[i] = t
	}
	return out, nil
}

// loadOn loads an executable (compiled now, from the journal or a .kiln file) on dev.
func loadOn(dev *devcpu.Device, exe *vm.Executable) (*vm.VM, error) {
	e, err := engine.New(engine.Config{Target: target.Host(), Device: dev})
	if err != nil {
		return nil, err
	}
	return e.LoadExecutable(exe)
}
