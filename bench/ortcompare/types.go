package main

import (
	"encoding/json"
	"time"
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
	// Levels are the graph optimization levels (kiln compile -O) kiln is compiled and
	// measured at, ascending; each round runs every level where --engines puts kiln.
	Levels []int `json:"levels"`
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
	// ProfileDir receives each model's per-kernel and per-op profiles ("" for none).
	ProfileDir string `json:"profile_dir,omitempty"`
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
	// CompileS is the wall time of `kiln compile` at the highest level, in seconds.
	CompileS float64 `json:"kiln_compile_s,omitempty"`
	// CompileErr is `kiln compile`'s failure at the highest level, if any.
	CompileErr string `json:"kiln_compile_error,omitempty"`
	// GenericS and GenericErr: the generic executable's compile (kiln-generic engine).
	GenericS   float64 `json:"kiln_generic_compile_s,omitempty"`
	GenericErr string  `json:"kiln_generic_compile_error,omitempty"`
	// ISACompileS: the compile time under each ISA engine's cap (kiln@ISA engines).
	ISACompileS map[string]float64 `json:"kiln_isa_compile_s,omitempty"`
	// OpenCLS and OpenCLErr: the OpenCL executable's compile (kiln-opencl engine).
	OpenCLS   float64 `json:"kiln_opencl_compile_s,omitempty"`
	OpenCLErr string  `json:"kiln_opencl_compile_error,omitempty"`
	// Compiles holds one entry per level, ascending (the highest repeats CompileS).
	Compiles []*Compile `json:"kiln_compiles,omitempty"`
	// Rows holds one entry per thread count.
	Rows []*Row `json:"rows"`
}

// Row is one model at one thread count.
type Row struct {
	// Threads is the thread count.
	Threads int `json:"threads"`
	// Engines maps an engine name to its runs: "ort", "kiln" for kiln at the highest
	// level, "kiln-O<n>" for kiln at each lower level n, "kiln-generic" and
	// "kiln-opencl".
	Engines map[string]*EngineRuns `json:"engines"`
	// Ratio is kiln's median p50 (at the highest level) over ORT's (0 when either is
	// missing).
	Ratio float64 `json:"ratio_kiln_over_ort,omitempty"`
	// RatioByRound is the median over rounds of kiln's round p50 (at the highest level)
	// over ORT's in the same round (0 when no round has both): the two engines run back
	// to back in each round, so a slow spell of the machine that spans a few rounds
	// moves both sides of a round's ratio, where it can move one engine's median and not
	// the other's.
	RatioByRound float64 `json:"ratio_kiln_over_ort_by_round,omitempty"`
	// Levels sums up kiln at each level, ascending.
	Levels []*LevelResult `json:"kiln_levels,omitempty"`
	// RatioHighLow is the highest level's median p50 over the lowest level's, with two
	// levels or more (0 when either is missing).
	RatioHighLow float64 `json:"ratio_high_over_low_level,omitempty"`
	// OthersShare is the median over the row's rounds of the share of the machine's CPU
	// that other processes and the hypervisor took while an engine ran (-1: unknown).
	OthersShare float64 `json:"others_cpu_share"`
}

// Compile is one `kiln compile` of a model at one level.
type Compile struct {
	// Level is the graph optimization level (-O).
	Level int `json:"level"`
	// S is the compile's wall time, in seconds.
	S float64 `json:"compile_s,omitempty"`
	// Err is its failure, if any.
	Err string `json:"error,omitempty"`
}

// LevelResult is kiln at one level, for one model and thread count.
type LevelResult struct {
	// Level is the graph optimization level (-O).
	Level int `json:"level"`
	// Engine is the key of its runs in Row.Engines.
	Engine string `json:"engine"`
	// MedianP50 is the median over rounds of each round's p50, in ms (0: none).
	MedianP50 float64 `json:"median_p50_ms,omitempty"`
	// Ratio is MedianP50 over ORT's (0 when either is missing).
	Ratio float64 `json:"ratio_over_ort,omitempty"`
}

// EngineRuns is one engine's rounds for one model and thread count.
type EngineRuns struct {
	// Level is kiln's graph optimization level (absent for ORT, kiln-generic and
	// kiln-opencl, which run at the highest level).
	Level *int `json:"level,omitempty"`
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
