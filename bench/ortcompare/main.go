package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
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

// Config is the run's configuration, as the flags set it.
type Config struct {
	// Zoo is the model zoo folder.
	Zoo string `json:"zoo"`
	// Models are the zoo cases to run, in order.
	Models []string `json:"models"`
	// Set is the N of the test_data_set_N whose inputs are used.
	Set int `json:"set"`
	// Threads are the thread counts to measure.
	Threads []int `json:"threads"`
	// Rounds is the number of alternating rounds per model and thread count.
	Rounds int `json:"rounds"`
	// Iters is the fixed number of timed iterations per run; 0 chooses it by a probe.
	Iters int `json:"iters"`
	// Warmup is the fixed number of warm-up iterations per run; -1 chooses it.
	Warmup int `json:"warmup"`
	// Target is the wanted duration of one engine's timed iterations in a round.
	Target time.Duration `json:"target_ns"`
	// Engines are the engines to run, in the order each round runs them.
	Engines []string `json:"engines"`
	// Kiln is the kiln binary; empty builds ./cmd/kiln.
	Kiln string `json:"kiln"`
	// Node is the node binary.
	Node string `json:"node"`
	// ORTDir is the folder holding bench.js and node_modules.
	ORTDir string `json:"ort_dir"`
	// JSON is the file the raw results go to ("" for none).
	JSON string `json:"-"`
	// Workdir holds converted inputs, compiled models and the kiln build.
	Workdir string `json:"-"`
	// RunTimeout bounds one benchmark process.
	RunTimeout time.Duration `json:"run_timeout_ns"`
	// CompileTimeout bounds one `kiln compile`.
	CompileTimeout time.Duration `json:"compile_timeout_ns"`
}

// Report is everything one run measured; --json writes it.
type Report struct {
	// Machine describes the machine and tool versions.
	Machine Machine `json:"machine"`
	// Config is the run's configuration.
	Config Config `json:"config"`
	// Models holds one entry per model, in run order.
	Models []*ModelReport `json:"models"`
	// Interrupted is set when the run was stopped before its end.
	Interrupted bool `json:"interrupted,omitempty"`
}

// ModelReport is one zoo case's results.
type ModelReport struct {
	// Name is the zoo folder's name.
	Name string `json:"name"`
	// Model is the model.onnx path.
	Model string `json:"model"`
	// DataSet is the test_data_set folder whose inputs were used.
	DataSet string `json:"data_set"`
	// Label is the data set's label.txt (its shape label), when present.
	Label string `json:"label,omitempty"`
	// Err is a problem with the case itself (missing folder), which stops every engine.
	Err string `json:"error,omitempty"`
	// CompileS is the wall time of `kiln compile`, in seconds.
	CompileS float64 `json:"kiln_compile_s,omitempty"`
	// CompileErr is `kiln compile`'s failure, if any.
	CompileErr string `json:"kiln_compile_error,omitempty"`
	// Rows holds one entry per thread count.
	Rows []*Row `json:"rows"`
}

// Row is one model at one thread count.
type Row struct {
	// Threads is the thread count.
	Threads int `json:"threads"`
	// Engines maps an engine name to its runs.
	Engines map[string]*EngineRuns `json:"engines"`
	// Ratio is kiln's median p50 over ORT's (0 when either is missing).
	Ratio float64 `json:"ratio_kiln_over_ort,omitempty"`
	// OthersShare is the median over the row's rounds of the share of the machine's CPU
	// that other processes and the hypervisor took while an engine ran (-1: unknown).
	OthersShare float64 `json:"others_cpu_share"`
}

// EngineRuns is one engine's rounds for one model and thread count.
type EngineRuns struct {
	// Iters is the number of timed iterations per run.
	Iters int `json:"iters"`
	// Warmup is the number of warm-up iterations per run.
	Warmup int `json:"warmup"`
	// Probe is the short run that chose Iters (absent with --iters).
	Probe *Run `json:"probe,omitempty"`
	// Runs holds one entry per round.
	Runs []*Run `json:"runs"`
	// MedianP50 is the median over rounds of each round's p50, in ms.
	MedianP50 float64 `json:"median_p50_ms,omitempty"`
	// MinP50 is the smallest round p50, in ms.
	MinP50 float64 `json:"min_p50_ms,omitempty"`
	// MaxP50 is the largest round p50, in ms.
	MaxP50 float64 `json:"max_p50_ms,omitempty"`
	// Err is the failure that stopped this engine here, if any.
	Err string `json:"error,omitempty"`
}

// Run is one engine process.
type Run struct {
	// Round is the round number from 1; 0 for the probe.
	Round int `json:"round"`
	// WallS is the process's wall time in seconds (load, warm-up and timed iterations).
	WallS float64 `json:"wall_s"`
	// CPUS is the process's own CPU time (user+system), in seconds.
	CPUS float64 `json:"cpu_s"`
	// OthersCPUS is the CPU time the rest of the machine was busy during the run, in
	// seconds: more than a few percent of WallS times the cores means a shared machine.
	OthersCPUS *float64 `json:"others_cpu_s,omitempty"`
	// StealS is the CPU time the hypervisor stole during the run, in seconds.
	StealS *float64 `json:"steal_s,omitempty"`
	// Load is /proc/loadavg's 1-minute figure when the run started, to spot rounds
	// that shared the machine.
	Load string `json:"load,omitempty"`
	// Result is the decoded summary line.
	Result *Result `json:"result,omitempty"`
	// Raw is the summary line as printed (it may carry more fields than Result).
	Raw json.RawMessage `json:"raw,omitempty"`
	// Err is the failure, if any.
	Err string `json:"error,omitempty"`
}

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
	var models, threads, engines string
	fs.StringVar(&cfg.Zoo, "zoo", defZoo, "model zoo folder (default $KILN_ZOO, else ../shared/zoo beside the module root)")
	fs.StringVar(&models, "models", "", "comma-separated zoo cases (default: every folder holding model.onnx)")
	fs.IntVar(&cfg.Set, "set", 0, "use test_data_set_`N`'s inputs")
	fs.StringVar(&threads, "threads", "1,2", "comma-separated thread counts")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "alternating rounds per model and thread count")
	fs.IntVar(&cfg.Iters, "iters", 0, "timed iterations per run (0: chosen by a probe run so that a round takes about -target)")
	fs.IntVar(&cfg.Warmup, "warmup", -1, "warm-up iterations per run (-1: iters/10, 3 to 100)")
	fs.DurationVar(&cfg.Target, "target", 750*time.Millisecond, "wanted duration of one engine's timed iterations per round")
	fs.StringVar(&engines, "engines", "kiln,ort", "engines to run, in the order each round runs them")
	fs.StringVar(&cfg.Kiln, "kiln", "", "kiln binary (default: go build ./cmd/kiln into the work folder)")
	fs.StringVar(&cfg.Node, "node", "node", "node binary")
	fs.StringVar(&cfg.ORTDir, "ort-dir", filepath.Join(root, "bench", "ort"), "folder of bench.js and its node_modules")
	fs.StringVar(&cfg.JSON, "json", "", "write all raw results to `FILE`")
	fs.StringVar(&cfg.Workdir, "workdir", "", "keep converted inputs and compiled models in `DIR` (default: a temporary folder, removed)")
	fs.DurationVar(&cfg.RunTimeout, "run-timeout", 5*time.Minute, "limit for one benchmark process")
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
		if e != engineKiln && e != engineORT {
			return cfg, fmt.Errorf("--engines: unknown engine %q (want kiln, ort)", e)
		}
	}
	if len(dedup(cfg.Engines)) != len(cfg.Engines) {
		return cfg, errors.New("--engines: an engine is listed twice")
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
