package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// modulePath is the module whose root the driver looks for.
const modulePath = "github.com/kilnrt/kiln"

// Engine names, as --engines and the result lines spell them.
const (
	engineKiln = "kiln"
	engineORT  = "ort"
	// engineGeneric is kiln compiled with the model's symbolic dims free (one executable
	// for every shape, `kiln compile` without --input-dir) at the highest level, run on
	// the same inputs: generic against specialized.
	engineGeneric = "kiln-generic"
	// engineOpenCL is kiln compiled for the OpenCL target (`kiln compile --target
	// opencl`, GPU kernels where the GPU strategies build them, the rest on the host
	// CPU) at the highest level for the data set's shapes, run with `kiln bench
	// --target opencl` on the same inputs.
	engineOpenCL = "kiln-opencl"
)

// Graph optimization levels: `kiln compile -O N` takes 0 to maxLevel, and compiles at
// defaultLevel without -O.
const (
	defaultLevel = 3
	maxLevel     = 3
)

// ortEnv is the malloc tuning ONNX Runtime is benchmarked with: glibc would otherwise
// unmap and re-map ORT's large activation buffers on every run.
var ortEnv = []string{"MALLOC_MMAP_THRESHOLD_=33554432", "MALLOC_TRIM_THRESHOLD_=17179869184"}

// Iteration choice: a probe run of probeIters timed iterations measures the latency;
// the timed iterations of a round are then clamped to [minIters, maxIters].
const (
	probeIters  = 5
	probeWarmup = 2
	minIters    = 5
	maxIters    = 20000
)

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the benchmark and returns the exit status: 0 when every run succeeded,
// 1 when some engine failed somewhere (the table says where), 2 for usage or setup
// errors, 130 when interrupted.
func realMain(args []string, stdout, stderr io.Writer) int {
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(stderr, "ortcompare:", err)
		return 2
	}
	cfg, err := parseFlags(args, root, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "ortcompare:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	d := &driver{cfg: cfg, root: root, log: stderr}
	keep := cfg.Workdir != ""
	if keep {
		err = os.MkdirAll(cfg.Workdir, 0o755)
		d.work = cfg.Workdir
	} else {
		d.work, err = os.MkdirTemp("", "ortcompare-")
	}
	if err != nil {
		fmt.Fprintln(stderr, "ortcompare: work folder:", err)
		return 2
	}
	if !keep {
		defer os.RemoveAll(d.work)
	}

	rep := d.run(ctx, stdout)
	printTable(stdout, rep)
	if cfg.JSON != "" {
		if err := writeJSON(cfg.JSON, rep); err != nil {
			fmt.Fprintln(stderr, "ortcompare:", err)
			return 2
		}
		fmt.Fprintf(stderr, "raw results written to %s\n", cfg.JSON)
	}
	switch {
	case rep.Interrupted:
		return 130
	case rep.failed():
		return 1
	}
	return 0
}

// failed reports whether any engine failed anywhere.
func (r *Report) failed() bool {
	for _, m := range r.Models {
		if m.Err != "" || m.CompileErr != "" {
			return true
		}
		for _, c := range m.Compiles {
			if c.Err != "" {
				return true
			}
		}
		for _, row := range m.Rows {
			for _, e := range row.Engines {
				if e.Err != "" {
					return true
				}
			}
		}
	}
	return false
}

// moduleRoot walks up from the working directory to the folder whose go.mod declares
// the kiln module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == modulePath {
					return dir, nil
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: run from inside the kiln module", modulePath)
		}
		dir = parent
	}
}

// parseFlags reads the command line into a Config; root is the module root.
func parseFlags(args []string, root string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("ortcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defZoo := os.Getenv("KILN_ZOO")
	if defZoo == "" {
		defZoo = filepath.Join(root, "..", "shared", "zoo")
	}
	var cfg Config
	var models, threads, engines, levels string
	fs.StringVar(&cfg.Zoo, "zoo", defZoo, "model zoo folder (default $KILN_ZOO, else ../shared/zoo beside the module root)")
	fs.StringVar(&models, "models", "", "comma-separated zoo cases (default: every folder holding model.onnx)")
	fs.IntVar(&cfg.Set, "set", 0, "use test_data_set_`N`'s inputs")
	fs.StringVar(&threads, "threads", "1,2", "comma-separated thread counts")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "alternating rounds per model and thread count")
	fs.IntVar(&cfg.Iters, "iters", 0, "timed iterations per run (0: chosen by a probe run so that a round takes about -target)")
	fs.IntVar(&cfg.Warmup, "warmup", -1, "warm-up iterations per run (-1: iters/10, 3 to 100)")
	fs.DurationVar(&cfg.Target, "target", 750*time.Millisecond, "wanted duration of one engine's timed iterations per round")
	fs.StringVar(&engines, "engines", "kiln,ort", "engines to run, in the order each round runs them: kiln, ort, kiln-generic (symbolic dims free), kiln-opencl, kiln@ISA (compiled and run under KILN_CPU_ISA=ISA: avx512, avx2, sse4 or generic)")
	fs.StringVar(&levels, "levels", strconv.Itoa(defaultLevel), "comma-separated graph optimization levels (kiln compile -O, 0 to 3) to compile and measure kiln at, each round running all")
	fs.StringVar(&cfg.Kiln, "kiln", "", "kiln binary (default: go build ./cmd/kiln into the work folder)")
	fs.StringVar(&cfg.Node, "node", "node", "node binary")
	fs.StringVar(&cfg.ORTDir, "ort-dir", filepath.Join(root, "bench", "ort"), "folder of bench.js and its node_modules")
	fs.StringVar(&cfg.JSON, "json", "", "write all raw results to `FILE`")
	fs.StringVar(&cfg.Workdir, "workdir", "", "keep converted inputs and compiled models in `DIR` (default: a temporary folder, removed)")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", 5*time.Minute, "limit for one benchmark process")
	fs.StringVar(&cfg.ProfileDir, "profile", "", profileFlagDoc)
	fs.DurationVar(&cfg.CompileTimeout, "compile-timeout", 10*time.Minute, "limit for one kiln compile")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Threads, err = parseInts(threads); err != nil {
		return cfg, fmt.Errorf("--threads: %w", err)
	}
	cfg.Engines = splitList(engines)
	if len(cfg.Engines) == 0 {
		return cfg, errors.New("--engines: none given")
	}
	for _, e := range cfg.Engines {
		if _, isa := isaEngine(e); !isa && e != engineKiln && e != engineORT && e != engineGeneric && e != engineOpenCL {
			return cfg, fmt.Errorf("--engines: unknown engine %q (want kiln, kiln-generic, kiln-opencl, kiln@ISA with ISA one of %s, ort)", e, strings.Join(isaLevels, ", "))
		}
	}
	if len(dedup(cfg.Engines)) != len(cfg.Engines) {
		return cfg, errors.New("--engines: an engine is listed twice")
	}
	if cfg.Levels, err = parseLevels(levels); err != nil {
		return cfg, fmt.Errorf("--levels: %w", err)
	}
	switch {
	case cfg.Rounds < 1:
		return cfg, errors.New("--rounds must be at least 1")
	case cfg.Iters < 0:
		return cfg, errors.New("--iters must be positive (or 0 to choose)")
	case cfg.Warmup < -1:
		return cfg, errors.New("--warmup must be -1 (choose) or at least 0")
	case cfg.Target <= 0:
		return cfg, errors.New("--target must be positive")
	case cfg.Set < 0:
		return cfg, errors.New("--set must be at least 0")
	}
	if cfg.Zoo, err = filepath.Abs(cfg.Zoo); err != nil {
		return cfg, fmt.Errorf("--zoo: %w", err)
	}
	if cfg.ORTDir, err = filepath.Abs(cfg.ORTDir); err != nil {
		return cfg, fmt.Errorf("--ort-dir: %w", err)
	}
	if cfg.Kiln != "" {
		if cfg.Kiln, err = filepath.Abs(cfg.Kiln); err != nil {
			return cfg, fmt.Errorf("--kiln: %w", err)
		}
	}
	if cfg.Models = splitList(models); len(cfg.Models) == 0 {
		if cfg.Models, err = zooCases(cfg.Zoo); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// dedup returns xs without repeated elements, in first-seen order.
func dedup(xs []string) []string {
	var out []string
	for _, x := range xs {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("none given")
	}
	return out, nil
}

// parseLevels parses a comma-separated list of graph optimization levels and returns
// them ascending.
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 || n > maxLevel {
			return nil, fmt.Errorf("%q is not a level from 0 to %d", f, maxLevel)
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("level %d is listed twice", n)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("none given")
	}
	slices.Sort(out)
	return out, nil
}

// zooCases lists the folders of zoo that hold a model.onnx, sorted by name.
func zooCases(zoo string) ([]string, error) {
	ents, err := os.ReadDir(zoo)
	if err != nil {
		return nil, fmt.Errorf("reading the zoo (set --zoo or $KILN_ZOO): %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if st, err := os.Stat(filepath.Join(zoo, e.Name(), "model.onnx")); err == nil && st.Mode().IsRegular() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no folder with a model.onnx in %s", zoo)
	}
	return out, nil
}
